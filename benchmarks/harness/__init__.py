"""What every benchmark scenario shares: Celery apps, workloads, oracles, measuring and reporting.

Scenarios run as modules from the repository root (``.venv/bin/python -m benchmarks.<scenario>``)
and import ``benchmarks.harness.*`` and ``devtools.*`` (the throwaway servers, the scheduler
process, child processes and waiting) as packages; the workers they start run from the root too
(``celery -A benchmarks.harness.celery_apps``). Nothing here imports a scenario.
"""
