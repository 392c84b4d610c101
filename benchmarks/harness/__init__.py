"""What every benchmark scenario shares: servers, processes, Celery apps, workloads, oracles,
measuring and reporting.

Modules import each other relatively and nothing here imports a scenario, so the package works
both as ``harness`` (a scenario run as ``python benchmarks/<scenario>.py``, whose folder is
``sys.path[0]``) and as ``benchmarks.harness`` (the tests and ``scripts/test_services.py``, which
need only ``servers``). This file imports nothing, so ``servers`` can be used without Celery.
"""
