"""The Helm chart helm/rag-monitor, linted and rendered by Helm's Go SDK.

`helm-python-sdk` (import `helm_python`) binds Helm's Go SDK through a C ABI:
no helm binary and no cluster. Rendered manifests of built-in kinds are
validated strictly with `kubernetes-validate`; the CRD kinds (ServiceMonitor,
PrometheusRule, ScaledObject) are not in its schemas and are checked
structurally here.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import helm_python as helm
import kubernetes_validate
import pytest
import yaml

from monitor.config import Settings

ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "helm" / "rag-monitor"
KUBE_VERSION = "1.30.0"
CRD_KINDS = {
    ("monitoring.coreos.com/v1", "ServiceMonitor"),
    ("monitoring.coreos.com/v1", "PrometheusRule"),
    ("keda.sh/v1alpha1", "ScaledObject"),
}
# review_tokens: read by `rag-monitor review` only, which the chart does not deploy
SECRET_SETTINGS = {"judge_api_key", "pg_dsn", "kafka_sasl_password", "review_tokens"}

ALL_ON: dict[str, Any] = {
    "existingSecret": "",
    "deployment": {"enabled": True, "staticMembership": True},
    "secret": {"judgeApiKey": "sk-test", "pgDsn": "postgresql://u:pw@pg:5432/rag"},
    "serviceMonitor": {"enabled": True, "labels": {"release": "prometheus"}},
    "prometheusRule": {"enabled": True},
    "dashboard": {"enabled": True},
    "offline": {"enabled": True},
    "keda": {"enabled": True},
    "podDisruptionBudget": {"enabled": True},
    "networkPolicy": {
        "enabled": True,
        "metricsFrom": [{"namespaceSelector": {"matchLabels": {"name": "monitoring"}}}],
        "egress": [{"ports": [{"port": 53, "protocol": "UDP"}]}, {"to": []}],
    },
    "settings": {
        "online_metrics": ["faithfulness", "context_utility"],
        "routes": ["chat", "search"],
        "thresholds": {"faithfulness": 0.6},
        "max_record_bytes": 2000000,
        "sample_rules": [{"match": {"route": "chat"}, "rate": 0.5}],
    },
}


def render(values: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    chart = helm.Chart.load(str(CHART))
    rendered = chart.render(values, name="prod", namespace="rag", is_install=True)
    docs: list[dict[str, Any]] = []
    for path, text in sorted(rendered.items()):
        if path.endswith("NOTES.txt"):
            continue
        docs.extend(doc for doc in yaml.safe_load_all(text) if doc)
    return docs


def by_kind(docs: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for doc in docs:
        out.setdefault(doc["kind"], []).append(doc)
    return out


def check_crd(doc: dict[str, Any]) -> None:
    meta = doc["metadata"]
    assert meta["name"] and isinstance(meta.get("labels", {}), dict)
    spec = doc["spec"]
    if doc["kind"] == "ServiceMonitor":
        assert spec["selector"]["matchLabels"]
        assert [e["port"] for e in spec["endpoints"]] == ["metrics"]
    elif doc["kind"] == "PrometheusRule":
        assert spec == yaml.safe_load((ROOT / "dashboards" / "alerts.yaml").read_text())
    elif doc["kind"] == "ScaledObject":
        assert spec["scaleTargetRef"]["name"]
        (trigger,) = spec["triggers"]
        assert trigger["type"] == "prometheus"
        assert "rag_monitor_consumer_lag" in trigger["metadata"]["query"]
        assert isinstance(trigger["metadata"]["threshold"], str)
        assert spec["minReplicaCount"] <= spec["maxReplicaCount"]


def validate_all(docs: list[dict[str, Any]]) -> None:
    for doc in docs:
        if (doc["apiVersion"], doc["kind"]) in CRD_KINDS:
            check_crd(doc)
        else:
            kubernetes_validate.validate(doc, KUBE_VERSION, strict=True)


def pod_specs(docs: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for doc in docs:
        if doc["kind"] == "Deployment":
            yield doc["spec"]["template"]["spec"]
        elif doc["kind"] == "CronJob":
            yield doc["spec"]["jobTemplate"]["spec"]["template"]["spec"]


# --- lint and render ---------------------------------------------------------


@pytest.mark.parametrize("values", [None, ALL_ON], ids=["defaults", "all-on"])
def test_chart_lints_clean(values: dict[str, Any] | None) -> None:
    report = helm.lint(str(CHART), values, strict=True, kube_version=f"v{KUBE_VERSION}")
    assert report["errors"] == []
    assert [m for m in report["messages"] if m["severity"] >= 2] == []


@pytest.mark.parametrize("values", [None, ALL_ON], ids=["defaults", "all-on"])
def test_rendered_manifests_validate(values: dict[str, Any] | None) -> None:
    docs = render(values)
    kinds = {doc["kind"] for doc in docs}
    expected = {
        "Deployment",
        "ConfigMap",
        "Secret",
        "Service",
        "ServiceAccount",
        "ServiceMonitor",
        "PrometheusRule",
        "PodDisruptionBudget",
        "NetworkPolicy",
    }
    if values is ALL_ON:
        expected |= {"CronJob", "ScaledObject"}
    assert expected <= kinds
    validate_all(docs)


def test_defaults_leave_optional_features_off() -> None:
    kinds = by_kind(render())
    assert "CronJob" not in kinds and "ScaledObject" not in kinds
    (deployment,) = kinds["Deployment"]
    assert deployment["spec"]["replicas"] == 2


def test_schema_rejects_bad_values() -> None:
    chart = helm.Chart.load(str(CHART))
    for bad in (
        {"settings": {"sample_rate": 2}},
        {"settings": {"no_such_setting": 1}},
        {"securityContext": {"readOnlyRootFilesystem": False}},
    ):
        with pytest.raises(helm.HelmError):
            chart.validate_schema(bad)


def test_schema_settings_match_the_config_module() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text(encoding="utf-8"))
    in_schema = set(schema["properties"]["settings"]["properties"])
    assert in_schema == set(Settings.model_fields) - SECRET_SETTINGS
    defaults = yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8"))
    for field in (
        "kafka_bootstrap_servers",
        "kafka_topic",
        "kafka_group_id",
        "kafka_dlq_topic",
        "judge_model",
        "embedding_model",
        "sample_rate",
        "token_budget",
        "metrics_port",
    ):
        assert field in defaults["settings"]


# --- what the manifests say --------------------------------------------------


def test_configmap_holds_settings_the_monitor_can_load(monkeypatch: pytest.MonkeyPatch) -> None:
    kinds = by_kind(render(ALL_ON))
    (config,) = [c for c in kinds["ConfigMap"] if not c["metadata"]["name"].endswith("dashboard")]
    data: dict[str, str] = config["data"]
    assert all(key.startswith("RAG_MONITOR_") for key in data)
    assert data["RAG_MONITOR_MAX_RECORD_BYTES"] == "2000000"  # not 2e+06
    for key, value in data.items():
        monkeypatch.setenv(key, value)
    settings = Settings()
    assert settings.online_metrics == ["faithfulness", "context_utility"]
    assert settings.routes == ["chat", "search"]
    assert settings.thresholds["faithfulness"] == 0.6
    assert settings.sample_rules[0].rate == 0.5
    assert settings.token_budget.tokens == 200_000
    assert settings.metrics_port == 9108


def test_secrets_stay_in_the_secret() -> None:
    kinds = by_kind(render(ALL_ON))
    (secret,) = kinds["Secret"]
    assert set(secret["data"]) == {"RAG_MONITOR_JUDGE_API_KEY", "RAG_MONITOR_PG_DSN"}
    for config in kinds["ConfigMap"]:
        assert "pw@" not in json.dumps(config) and "sk-test" not in json.dumps(config)
    for spec in pod_specs(render(ALL_ON)):
        refs = [ref for c in spec["containers"] for ref in c["envFrom"]]
        assert {"secretRef": {"name": secret["metadata"]["name"]}} in refs


def test_existing_secret_replaces_the_chart_secret() -> None:
    docs = render({"existingSecret": "rag-monitor-credentials"})
    assert "Secret" not in by_kind(docs)
    for spec in pod_specs(docs):
        refs = [ref for c in spec["containers"] for ref in c["envFrom"]]
        assert {"secretRef": {"name": "rag-monitor-credentials"}} in refs


def test_pods_are_locked_down() -> None:
    for spec in pod_specs(render(ALL_ON)):
        assert spec["securityContext"]["runAsNonRoot"] is True
        (container,) = spec["containers"]
        sc = container["securityContext"]
        assert sc["readOnlyRootFilesystem"] is True
        assert sc["allowPrivilegeEscalation"] is False
        assert sc["capabilities"]["drop"] == ["ALL"]
        assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"]
        assert {v["name"]: v for v in spec["volumes"]}["tmp"]["emptyDir"]
        assert container["resources"]["requests"] and container["resources"]["limits"]


def test_consumer_exposes_metrics_and_probes() -> None:
    kinds = by_kind(render())
    (deployment,) = kinds["Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["args"] == ["run"]
    assert container["ports"] == [{"name": "metrics", "containerPort": 9108, "protocol": "TCP"}]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    (service,) = kinds["Service"]
    assert service["spec"]["ports"][0]["name"] == "metrics"
    assert service["spec"]["ports"][0]["port"] == 9108


def test_keda_owns_replicas_and_cronjob_runs_offline() -> None:
    kinds = by_kind(render(ALL_ON))
    (deployment,) = kinds["Deployment"]
    assert "replicas" not in deployment["spec"]
    (cronjob,) = kinds["CronJob"]
    (container,) = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    assert container["args"] == ["offline"]


# --- copies of the rules and the dashboard -----------------------------------


@pytest.mark.parametrize(
    ("source", "copy"),
    [
        ("dashboards/alerts.yaml", "files/alerts.yaml"),
        ("dashboards/rag-monitor.json", "files/rag-monitor.json"),
    ],
)
def test_chart_files_equal_the_sources(source: str, copy: str) -> None:
    assert (CHART / copy).read_bytes() == (ROOT / source).read_bytes(), (
        f"copy {source} to helm/rag-monitor/{copy}"
    )


def test_rendered_rules_and_dashboard_are_the_sources() -> None:
    kinds = by_kind(render())
    (rule,) = kinds["PrometheusRule"]
    assert rule["spec"] == yaml.safe_load((ROOT / "dashboards" / "alerts.yaml").read_text())
    (dashboard,) = [c for c in kinds["ConfigMap"] if c["metadata"]["name"].endswith("dashboard")]
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert dashboard["data"]["rag-monitor.json"] == (
        (ROOT / "dashboards" / "rag-monitor.json").read_text().rstrip("\n")
    )


# --- the sidecar template, from a parent chart -------------------------------

PARENT_DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}-rag-service
spec:
  selector:
    matchLabels: {app: rag-service}
  template:
    metadata:
      labels: {app: rag-service}
    spec:
      containers:
        - name: rag-service
          image: example/rag-service:1.0
        {{- include "rag-monitor.sidecarContainer" . | nindent 8 }}
      volumes:
        {{- include "rag-monitor.sidecarVolume" . | nindent 8 }}
"""


def test_sidecar_container_renders_into_a_parent_pod(tmp_path: Path) -> None:
    parent = tmp_path / "rag-service"
    (parent / "templates").mkdir(parents=True)
    shutil.copytree(CHART, parent / "charts" / "rag-monitor")
    (parent / "Chart.yaml").write_text(
        "apiVersion: v2\nname: rag-service\nversion: 1.2.3\nappVersion: '9.9'\n"
        "dependencies:\n  - name: rag-monitor\n    version: 0.1.0\n"
    )
    (parent / "values.yaml").write_text(
        "rag-monitor:\n  deployment:\n    enabled: false\n  existingSecret: rag-creds\n"
    )
    (parent / "templates" / "deployment.yaml").write_text(PARENT_DEPLOYMENT)
    rendered = helm.Chart.load(str(parent)).render(name="shop", namespace="rag")
    docs = [
        doc
        for path, text in rendered.items()
        if not path.endswith("NOTES.txt")
        for doc in yaml.safe_load_all(text)
        if doc
    ]
    validate_all(docs)
    kinds = by_kind(docs)
    (deployment,) = kinds["Deployment"]  # the subchart's own consumer is off
    assert deployment["metadata"]["name"] == "shop-rag-service"
    spec = deployment["spec"]["template"]["spec"]
    sidecar = {c["name"]: c for c in spec["containers"]}["rag-monitor"]
    assert sidecar["image"] == "ghcr.io/rag-monitor/rag-monitor:0.1.0"  # not the parent's 9.9
    (config,) = [c for c in kinds["ConfigMap"] if not c["metadata"]["name"].endswith("dashboard")]
    assert {"configMapRef": {"name": config["metadata"]["name"]}} in sidecar["envFrom"]
    assert {"secretRef": {"name": "rag-creds"}} in sidecar["envFrom"]
    assert sidecar["securityContext"]["readOnlyRootFilesystem"] is True
    mount = sidecar["volumeMounts"][0]["name"]
    assert mount in {v["name"] for v in spec["volumes"]}


def test_static_membership_takes_the_instance_id_from_the_pod_name() -> None:
    plain = by_kind(render())["Deployment"][0]["spec"]["template"]["spec"]["containers"][0]
    assert "env" not in plain
    kinds = by_kind(render(ALL_ON))
    (container,) = kinds["Deployment"][0]["spec"]["template"]["spec"]["containers"]
    assert {
        "name": "RAG_MONITOR_KAFKA_GROUP_INSTANCE_ID",
        "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}},
    } in container["env"]
    for job in kinds.get("CronJob", []):  # the offline runner is no group member
        (runner,) = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
        assert "env" not in runner
