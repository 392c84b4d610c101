"""The parts ``ShardedStorage`` (``sharded_storage.py``) is built from: the shard set it routes
over, and its families that act on every shard at once (the whole-store lock, the release)."""
