"""examples/deploy/kubernetes/: the manifests parse, every container's command is accepted by
the real parser, the probes exist and name real commands and ports, the PodDisruptionBudget and
the Service select the pods they are meant for, and secrets come from a Secret."""

from __future__ import annotations

from typing import Any

import yaml

from tests.deploy.helpers import DEPLOY, KNOWN_ENV, parse_cli, program_argv, stop_grace

MANIFESTS = sorted((DEPLOY / "kubernetes").glob("*.yaml"))
#: Read by the example project's proj/celery.py, not by parallel-scheduler.
PROJECT_ENV = {"BROKER_URL"}


def documents() -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for path in MANIFESTS:
        docs += [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    return docs


def of_kind(kind: str) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in documents() if d["kind"] == kind}


def container(deployment: dict[str, Any]) -> dict[str, Any]:
    (only,) = deployment["spec"]["template"]["spec"]["containers"]
    return only


def argv(spec: dict[str, Any]) -> list[str]:
    command = [str(a) for a in spec["command"] + spec.get("args", [])]
    parsed = program_argv(command, "parallel-scheduler")
    assert parsed is not None, f"not a parallel-scheduler command: {command}"
    return parsed


def test_kinds() -> None:
    kinds = sorted(d["kind"] for d in documents())
    assert kinds == ["Deployment", "Deployment", "PodDisruptionBudget", "Service"]


def test_every_deployment_selects_its_own_pods() -> None:
    for name, deployment in of_kind("Deployment").items():
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        selector = deployment["spec"]["selector"]["matchLabels"]
        assert selector.items() <= labels.items(), name


def test_scheduler_deployment() -> None:
    deployment = of_kind("Deployment")["parallel-scheduler"]
    pod = deployment["spec"]["template"]["spec"]
    assert deployment["spec"]["replicas"] >= 2
    assert pod["terminationGracePeriodSeconds"] > stop_grace()
    spec = container(deployment)
    ns = parse_cli(argv(spec))
    assert ns.command == "run" and ns.app == "proj.celery:app" and not ns.once
    # the liveness probe asks /healthz of the metrics endpoint this very command serves
    (port,) = spec["ports"]
    assert port["containerPort"] == ns.metrics_port
    assert ns.metrics_host == "0.0.0.0"  # the kubelet probes the pod's address
    live = spec["livenessProbe"]["httpGet"]
    assert live["path"] == "/healthz" and live["port"] == port["name"]
    ready = spec["readinessProbe"]["exec"]["command"]
    assert program_argv(ready, "parallel-scheduler") is not None
    assert parse_cli(program_argv(ready, "parallel-scheduler") or []).command == "status"


def test_dashboard_deployment_and_service() -> None:
    deployment = of_kind("Deployment")["parallel-scheduler-dashboard"]
    assert deployment["spec"]["replicas"] == 1  # the session key is drawn per process
    spec = container(deployment)
    ns = parse_cli(argv(spec))
    assert ns.command == "dashboard"
    (port,) = spec["ports"]
    assert port["containerPort"] == ns.port
    assert spec["livenessProbe"]["tcpSocket"]["port"] == port["name"]
    ready = spec["readinessProbe"]["exec"]["command"]
    assert parse_cli(program_argv(ready, "parallel-scheduler") or []).command == "status"
    env = {e["name"] for e in spec["env"]}
    assert "PARALLEL_SCHEDULER_DASHBOARD_TOKEN" in env  # it binds 0.0.0.0: never without auth
    service = of_kind("Service")["parallel-scheduler-dashboard"]
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()
    scheduler_labels = of_kind("Deployment")["parallel-scheduler"]["spec"]["template"]
    assert not service["spec"]["selector"].items() <= scheduler_labels["metadata"]["labels"].items()
    (service_port,) = service["spec"]["ports"]
    assert service_port["targetPort"] == port["name"]


def test_disruption_budget_matches_the_schedulers() -> None:
    budget = of_kind("PodDisruptionBudget")["parallel-scheduler"]
    selector = budget["spec"]["selector"]["matchLabels"]
    schedulers = of_kind("Deployment")["parallel-scheduler"]
    assert selector == schedulers["spec"]["selector"]["matchLabels"]
    assert selector.items() <= schedulers["spec"]["template"]["metadata"]["labels"].items()
    dashboard = of_kind("Deployment")["parallel-scheduler-dashboard"]
    assert not selector.items() <= dashboard["spec"]["template"]["metadata"]["labels"].items()
    assert budget["spec"]["minAvailable"] < schedulers["spec"]["replicas"]


def test_secrets_come_from_a_secret() -> None:
    for name, deployment in of_kind("Deployment").items():
        for variable in container(deployment)["env"]:
            assert variable["name"] in KNOWN_ENV | PROJECT_ENV, f"{name}: {variable['name']}"
            assert "value" not in variable, f"{name}: {variable['name']} written in the manifest"
            assert variable["valueFrom"]["secretKeyRef"]["name"] == "parallel-scheduler"
