"""Recurring jobs: their definitions and triggers (cron, interval), the scheduler that fires
their ticks, firing ids and history."""
