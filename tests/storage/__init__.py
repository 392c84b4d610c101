"""Storage adapter and contract tests against real servers."""
