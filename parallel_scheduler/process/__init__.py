"""The scheduler process: the service that runs the schedulers, one pass of them, start-up,
liveness, shard assignment, metrics and the status report."""
