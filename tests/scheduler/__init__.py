"""The scheduler loops (delayed, recurring, races) against real storage."""
