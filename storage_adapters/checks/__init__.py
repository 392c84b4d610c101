"""What every adapter checks before it writes or reads, by family: one home for each refusal, so
the three adapters refuse the same input with the same words."""
