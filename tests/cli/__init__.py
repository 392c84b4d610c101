"""The command line, the demo and the profile command."""
