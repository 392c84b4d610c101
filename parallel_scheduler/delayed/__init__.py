"""Delayed jobs: the scheduler that releases due jobs, the ways a batch is claimed and sent,
accept-time broker messages, and retention."""
