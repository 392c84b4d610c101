"""The Redis adapter (a single server or a Redis Cluster): a module per family of the contract,
each running the Lua scripts in ``lua/``."""
