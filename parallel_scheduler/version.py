"""The package's version: one home, read by the package, the start-up line and the liveness
records (and by setuptools, through ``[tool.setuptools.dynamic]``)."""

__version__ = "0.2.0"
