"""The app's migrations: one, for the permissions of the table-less ``Scheduler`` model."""
