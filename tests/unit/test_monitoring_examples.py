"""The example Grafana dashboard and Prometheus alert rules: they parse, and every metric they
query is one the ``/metrics`` endpoint serves (a renamed metric would otherwise leave a blank
panel or an alert that can never fire, silently)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml
from prometheus_client import CollectorRegistry

import storage_adapters
from parallel_scheduler import Client
from parallel_scheduler.process.metrics import PrometheusRecorder, StorageCollector
from parallel_scheduler.process.storage_metrics import storage_registry

MONITORING = Path(__file__).resolve().parents[2] / "examples" / "monitoring"
METRIC = re.compile(r"\bparallel_scheduler_[a-z_]+")


def served_names(tmp_path: Path) -> set[str]:
    """Every sample name a scheduler process serves, and those the exporter (and the
    dashboard's /metrics) serve from storage."""
    registry = CollectorRegistry()
    PrometheusRecorder(registry)
    storage = storage_adapters.from_url(f"sqlite:///{tmp_path / 'names.db'}")
    storage.setup()
    try:
        registry.register(StorageCollector(storage))
        with Client(storage) as client:
            registries = (registry, storage_registry(client))
            return {
                sample.name
                for served in registries
                for family in served.collect()
                for sample in family.samples
            }
    finally:
        storage.close()


def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((MONITORING / "grafana-dashboard.json").read_text())
    return loaded


def test_the_dashboard_queries_only_served_metrics(tmp_path: Path) -> None:
    served = served_names(tmp_path)
    exprs = [t["expr"] for panel in dashboard()["panels"] for t in panel["targets"]]
    assert exprs
    used = set().union(*(METRIC.findall(e) for e in exprs))
    assert used <= served, f"not served: {sorted(used - served)}"
    # The panels the issue asks for are there
    titles = " / ".join(panel["title"].lower() for panel in dashboard()["panels"])
    for word in ("lag", "due", "released", "errors", "pass", "lateness", "state", "live"):
        assert word in titles, word


def test_the_alert_rules_parse_and_query_only_served_metrics(tmp_path: Path) -> None:
    served = served_names(tmp_path)
    rules = yaml.safe_load((MONITORING / "alerts.yml").read_text())
    alerts = {rule["alert"]: rule for group in rules["groups"] for rule in group["rules"]}
    for name, rule in alerts.items():
        assert {"expr", "for", "labels", "annotations"} <= set(rule), name
        used = set(METRIC.findall(rule["expr"]))
        assert used and used <= served, f"{name}: not served: {sorted(used - served)}"
    assert "parallel_scheduler_lag_seconds" in alerts["ParallelSchedulerLagging"]["expr"]
    assert "absent(" in alerts["ParallelSchedulerNoLiveScheduler"]["expr"]
