"""The loop every scheduler shares: the lock it runs under, its bounded pool, retrying storage
calls, and what a pass counts and reports."""
