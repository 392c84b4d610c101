"""Tools for the developers: test servers, process launchers and waiting helpers. Imported by
tests/, benchmarks/ and scripts/ as a package; never part of the wheel."""
