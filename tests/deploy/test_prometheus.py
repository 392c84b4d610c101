"""examples/deploy/prometheus/: the extra alert rules parse and query only metrics the /metrics
endpoint serves, and the scrape configuration loads both rule files."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.deploy.helpers import DEPLOY
from tests.unit.test_monitoring_examples import METRIC, served_names

PROMETHEUS = DEPLOY / "prometheus"


def test_extra_rules_query_only_served_metrics(tmp_path: Path) -> None:
    served = served_names(tmp_path)
    rules = yaml.safe_load((PROMETHEUS / "extra-alerts.yml").read_text())
    alerts = [rule for group in rules["groups"] for rule in group["rules"]]
    assert len({rule["alert"] for rule in alerts}) == len(alerts) > 0
    for rule in alerts:
        assert {"alert", "expr", "labels", "annotations"} <= set(rule), rule["alert"]
        used = set(METRIC.findall(rule["expr"]))
        assert used and used <= served, f"{rule['alert']}: not served: {sorted(used - served)}"


def test_the_scrape_configuration_loads_both_rule_files() -> None:
    config = yaml.safe_load((PROMETHEUS / "prometheus.yml").read_text())
    assert config["rule_files"] == ["alerts.yml", "extra-alerts.yml"]
    assert (DEPLOY.parent / "monitoring" / "alerts.yml").exists()
    schedulers, storage = config["scrape_configs"]
    assert all(t.endswith(":9464") for t in schedulers["static_configs"][0]["targets"])
    # the exporter's port, as examples/deploy would start it
    assert storage["static_configs"][0]["targets"] == ["exporter:9465"]
