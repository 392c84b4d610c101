"""The dashboard's pages, one module per page family: overview, jobs, recurring jobs."""
