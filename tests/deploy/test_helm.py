"""The Helm chart helm/rag-monitor, linted and rendered by Helm's Go SDK.

`helm-python-sdk` (import `helm_python`) binds Helm's Go SDK through a C ABI:
no helm binary and no cluster. Rendered manifests of built-in kinds are
validated strictly with `kubernetes-validate`; the CRD kinds (ServiceMonitor,
PodMonitor, PrometheusRule, ScaledObject) are not in its schemas and are checked
structurally here. Rendering includes the hooks (the migration Job, the
`helm test` pod); the migration Job's container runs for real against
Postgres, the test pod's script against the monitor's real HTTP server.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import helm_python as helm
import kubernetes_validate
import pytest
import yaml
from prometheus_client import CollectorRegistry

from monitor.config import ConfigError, Settings, load_settings
from monitor.http import MetricsServer
from tests.support import ROOT, load_script

CHART = ROOT / "helm" / "rag-monitor"
KUBE_VERSION = "1.30.0"
CRD_KINDS = {
    ("monitoring.coreos.com/v1", "ServiceMonitor"),
    ("monitoring.coreos.com/v1", "PodMonitor"),
    ("monitoring.coreos.com/v1", "PrometheusRule"),
    ("keda.sh/v1alpha1", "ScaledObject"),
}
# review_tokens: read by `rag-monitor review` only, which the chart does not deploy
SECRET_SETTINGS = {"judge_api_key", "pg_dsn", "kafka_sasl_password", "review_tokens"}
#: Settings the chart sets itself from `kafkaTls` (paths of the files it mounts).
CHART_SET_SETTINGS = {
    "kafka_ssl_cafile",
    "kafka_ssl_certfile",
    "kafka_ssl_keyfile",
    "kafka_ssl_check_hostname",
}
DIGEST = "sha256:" + "ab" * 32
TLS_DIR = "/etc/rag-monitor/kafka-tls"

ALL_ON: dict[str, Any] = {
    "existingSecret": "",
    "deployment": {"enabled": True, "staticMembership": True},
    "secret": {"judgeApiKey": "sk-test", "pgDsn": "postgresql://u:pw@pg:5432/rag"},
    "serviceMonitor": {
        "enabled": True,
        "labels": {"release": "prometheus"},
        "relabelings": [{"targetLabel": "team", "replacement": "search"}],
        "metricRelabelings": [{"sourceLabels": ["__name__"], "regex": "go_.*", "action": "drop"}],
    },
    "podMonitor": {
        "enabled": True,
        "selector": {"app": "rag-service"},
        "relabelings": [{"targetLabel": "team", "replacement": "search"}],
        "metricRelabelings": [
            {"sourceLabels": ["__name__"], "regex": "python_.*", "action": "drop"}
        ],
    },
    "image": {"digest": DIGEST},
    "kafkaTls": {
        "secretName": "kafka-client-tls",
        "caKey": "ca.pem",
        "certKey": "tls.crt",
        "keyKey": "tls.key",
        "checkHostname": False,
    },
    "priorityClassName": "rag-critical",
    "podAnnotations": {"example.com/owner": "search"},
    "podLabels": {"team": "search"},
    "extraEnv": [
        {"name": "HTTPS_PROXY", "value": "http://proxy:3128"},
        {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
    ],
    "extraEnvFrom": [{"configMapRef": {"name": "proxy-settings"}}],
    "extraVolumes": [{"name": "judge-ca", "configMap": {"name": "judge-ca"}}],
    "extraVolumeMounts": [{"name": "judge-ca", "mountPath": "/etc/judge-ca", "readOnly": True}],
    "initContainers": [{"name": "wait", "image": "busybox:1.36", "command": ["true"]}],
    "helmTest": {"attempts": 3, "intervalSeconds": 1},
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
        "kafka_security_protocol": "SSL",
    },
}


def render(
    values: dict[str, Any] | None = None, *, prometheus_operator: bool = True
) -> list[dict[str, Any]]:
    """The manifests at ``values``; the SDK renders without a cluster to ask, so
    ``prometheus_operator`` stands in for a cluster that serves monitoring.coreos.com/v1."""
    return documents(rendered_files(values, prometheus_operator))


def documents(rendered: dict[str, str]) -> list[dict[str, Any]]:
    """The manifests in a chart's rendered files, in file order (NOTES.txt is no manifest)."""
    texts = [text for path, text in sorted(rendered.items()) if not path.endswith("NOTES.txt")]
    return [doc for text in texts for doc in yaml.safe_load_all(text) if doc]


def rendered_files(
    values: dict[str, Any] | None, prometheus_operator: bool, *, release: str = "prod"
) -> dict[str, str]:
    values = dict(values or {})
    if prometheus_operator:
        values.setdefault("prometheusOperator", {"assumeInstalled": True})
    chart = helm.Chart.load(str(CHART))
    rendered: dict[str, str] = chart.render(values, name=release, namespace="rag", is_install=True)
    return rendered


def render_release(release: str) -> list[dict[str, Any]]:
    """The manifests of a release named ``release``, at the defaults."""
    return documents(rendered_files(None, True, release=release))


def by_kind(docs: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for doc in docs:
        out.setdefault(doc["kind"], []).append(doc)
    return out


def check_crd(doc: dict[str, Any], faithfulness: float = 1.0) -> None:
    meta = doc["metadata"]
    assert meta["name"] and isinstance(meta.get("labels", {}), dict)
    spec = doc["spec"]
    if doc["kind"] == "ServiceMonitor":
        assert spec["selector"]["matchLabels"]
        assert [e["port"] for e in spec["endpoints"]] == ["metrics"]
    elif doc["kind"] == "PodMonitor":
        assert spec["selector"]["matchLabels"]
        assert [e["port"] for e in spec["podMetricsEndpoints"]] == ["metrics"]
        assert "rag-monitor" in meta["name"]  # the job label RagMonitorAbsent expects
    elif doc["kind"] == "PrometheusRule":
        assert spec == yaml.safe_load(alerts_at(faithfulness))
    elif doc["kind"] == "ScaledObject":
        assert spec["scaleTargetRef"]["name"]
        (trigger,) = spec["triggers"]
        assert trigger["type"] == "prometheus"
        assert "rag_monitor_consumer_lag" in trigger["metadata"]["query"]
        assert isinstance(trigger["metadata"]["threshold"], str)
        assert spec["minReplicaCount"] <= spec["maxReplicaCount"]


#: the alerts' sentence for the default faithfulness threshold (dashboards/alerts.yaml)
DEFAULT_RULE = (
    "Hallucinated: at least one claim the retrieved context does not support "
    "(faithfulness below 1)."
)


def alerts_at(faithfulness: float) -> str:
    """dashboards/alerts.yaml as the chart renders it with this faithfulness threshold: the
    alert texts name the threshold in force, nothing else moves."""
    text = (ROOT / "dashboards" / "alerts.yaml").read_text()
    assert DEFAULT_RULE in text
    if faithfulness >= 1.0:
        return text
    return text.replace(
        DEFAULT_RULE, f"Hallucinated: faithfulness below {faithfulness:g} (settings.thresholds)."
    )


def validate_all(docs: list[dict[str, Any]], values: dict[str, Any] | None = None) -> None:
    faithfulness = float(
        ((values or {}).get("settings") or {}).get("thresholds", {}).get("faithfulness", 1.0)
    )
    for doc in docs:
        if (doc["apiVersion"], doc["kind"]) in CRD_KINDS:
            check_crd(doc, faithfulness)
        else:
            kubernetes_validate.validate(doc, KUBE_VERSION, strict=True)


def pod_templates(docs: list[dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(kind, pod template) of every workload that runs the monitor."""
    for doc in docs:
        if doc["kind"] in {"Deployment", "Job"}:
            yield doc["kind"], doc["spec"]["template"]
        elif doc["kind"] == "CronJob":
            yield doc["kind"], doc["spec"]["jobTemplate"]["spec"]["template"]


def pod_specs(docs: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for _, template in pod_templates(docs):
        yield template["spec"]


def hook(doc: dict[str, Any]) -> str:
    annotations: dict[str, str] = doc["metadata"].get("annotations", {})
    return annotations.get("helm.sh/hook", "")


def chart_secret(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (secret,) = [d for d in by_kind(docs)["Secret"] if not hook(d)]
    return secret


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
        expected |= {"CronJob", "ScaledObject", "Job", "PodMonitor"}
    assert expected <= kinds
    assert "Pod" in kinds  # the helm test hook
    validate_all(docs, values)


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
        # a misspelt top-level key: without the refusal the chart renders with no DSN at all
        {"secrets": {"pgDsn": "postgresql://u:pw@pg:5432/rag"}},
        {"replicas": 3},
    ):
        with pytest.raises(helm.HelmError):
            chart.validate_schema(bad)


def test_schema_settings_match_the_config_module() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text(encoding="utf-8"))
    in_schema = set(schema["properties"]["settings"]["properties"])
    assert in_schema == set(Settings.model_fields) - SECRET_SETTINGS - CHART_SET_SETTINGS
    defaults = yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8"))
    for field in (
        "kafka_bootstrap_servers",
        "kafka_topic",
        "kafka_group_id",
        "kafka_dlq_topic",
        "judge_base_url",
        "judge_model",
        "embedding_model",
        "sample_rate",
        "token_budget",
        "metrics_port",
    ):
        assert field in defaults["settings"]


def test_schema_knows_every_top_level_value() -> None:
    """The schema's top level is closed: every value of values.yaml is in it, and only
    ``global`` besides (what Helm hands a subchart)."""
    schema = json.loads((CHART / "values.schema.json").read_text(encoding="utf-8"))
    assert schema["additionalProperties"] is False
    defaults = yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8"))
    in_schema = set(schema["properties"]) - {"global"}
    assert set(defaults) == in_schema, "values.yaml and the schema disagree"
    helm.Chart.load(str(CHART)).validate_schema({"global": {"imageRegistry": "r.example.com"}})


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


def deployment_environment(docs: list[dict[str, Any]]) -> dict[str, str]:
    """The RAG_MONITOR_* variables a consumer pod gets: the ConfigMap, then the Secret."""
    kinds = by_kind(docs)
    (config,) = [c for c in kinds["ConfigMap"] if not c["metadata"]["name"].endswith("dashboard")]
    env: dict[str, str] = dict(config["data"])
    for key, value in chart_secret(docs)["data"].items():
        env[key] = base64.b64decode(value).decode()
    return env


@pytest.mark.parametrize("url", ["", "https://judge.example.com/v1"])
def test_the_judge_is_chosen_in_the_values(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    values = {"secret": {"judgeApiKey": "sk-test"}, "settings": {"judge_model": "judge-7b"}}
    if url:
        values["settings"]["judge_base_url"] = url
    env = deployment_environment(render(values))
    for key in [k for k in os.environ if k.startswith("RAG_MONITOR_") or k == "OPENAI_API_KEY"]:
        monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    if not url:  # a key and no URL: the pod would run the local judge, so it refuses to start
        with pytest.raises(ConfigError, match="RAG_MONITOR_JUDGE_BASE_URL is not"):
            load_settings()
        return
    settings = load_settings()
    assert (settings.judge_base_url, settings.judge_model) == (url, "judge-7b")


def notes(values: dict[str, Any] | None) -> str:
    return rendered_files(values, True)["rag-monitor/templates/NOTES.txt"]


def configmap_data(values: dict[str, Any] | None) -> dict[str, str]:
    kinds = by_kind(render(values))
    (config,) = [c for c in kinds["ConfigMap"] if not c["metadata"]["name"].endswith("dashboard")]
    data: dict[str, str] = config["data"]
    return data


def test_the_notes_and_the_configmap_name_the_judge_that_runs() -> None:
    """Without a judge URL the pods run the local judge: the notes say so, and the ConfigMap
    shows no LLM model that nothing would use; with one, both name the LLM judge's model."""
    local = notes(None)
    assert "Judge: the zero-token local judge" in local and "settings.judge_base_url" in local
    assert "gpt-4o-mini" not in local
    data = configmap_data(None)
    assert "RAG_MONITOR_JUDGE_MODEL" not in data and "RAG_MONITOR_EMBEDDING_MODEL" not in data
    llm = {
        "settings": {
            "judge_base_url": "https://user:pw@judge.example.com:8443/v1?tenant=a",
            "judge_model": "judge-7b",
        }
    }
    assert "Judge: the LLM judge, model judge-7b at https://judge.example.com:8443/v1 " in notes(
        llm
    )
    assert "pw" not in notes(llm).split("Judge:")[1].splitlines()[0]  # no credentials shown
    data = configmap_data(llm)
    assert data["RAG_MONITOR_JUDGE_MODEL"] == "judge-7b"
    assert data["RAG_MONITOR_EMBEDDING_MODEL"] == "text-embedding-3-small"


OPERATOR_KINDS = {"ServiceMonitor", "PodMonitor", "PrometheusRule"}


def test_operator_resources_need_the_operators_api() -> None:
    values = {"podMonitor": {"enabled": True, "selector": {"app": "rag-service"}}}
    without = {doc["kind"] for doc in render(values, prometheus_operator=False)}
    assert without & OPERATOR_KINDS == set()
    assert {"Deployment", "Service", "ConfigMap"} <= without  # the rest is unchanged
    notes = rendered_files(values, prometheus_operator=False)["rag-monitor/templates/NOTES.txt"]
    assert "No ServiceMonitor, PodMonitor or PrometheusRule was rendered" in notes
    assert "Alerts: disabled" in notes
    with_operator = {doc["kind"] for doc in render(values)}
    assert OPERATOR_KINDS <= with_operator
    notes = rendered_files(values, prometheus_operator=True)["rag-monitor/templates/NOTES.txt"]
    assert "No ServiceMonitor" not in notes


def test_notes_warn_while_the_image_is_the_charts_placeholder() -> None:
    notes = rendered_files(None, True)["rag-monitor/templates/NOTES.txt"]
    assert "WARNING: image.repository is the chart's placeholder" in notes
    mine = {"image": {"repository": "registry.example.com/rag-monitor"}}
    assert "WARNING" not in rendered_files(mine, True)["rag-monitor/templates/NOTES.txt"]


def test_the_memory_request_covers_the_local_judges_measured_peak(tmp_path: Path) -> None:
    """The default settings score with the local judge: its peak RSS, measured on the
    demo's traffic with `rag-monitor score`, fits in the consumer's memory request."""
    (deployment,) = by_kind(render())["Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    request = container["resources"]["requests"]["memory"]
    assert request.endswith("Mi")
    traffic = ROOT / "monitor" / "demo" / "traffic.jsonl"
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAG_MONITOR_")}
    env["PYTHONPATH"] = str(ROOT)
    argv = [sys.executable, "-m", "monitor", "score", str(traffic), "--judge", "local",
            "--out", str(tmp_path / "scores.jsonl")]  # fmt: skip
    # A child's peak RSS starts at its parent's (it is kept across fork and exec), and this
    # test process may hold models of its own: a small Python in between starts the
    # command, so the peak it reads is the command's alone.
    measure = (
        "import os, subprocess, sys\n"
        "p = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL)\n"
        "_, status, usage = os.wait4(p.pid, 0)\n"
        "print(usage.ru_maxrss)\n"
        "sys.exit(os.waitstatus_to_exitcode(status))\n"
    )
    with open(tmp_path / "stderr", "wb") as err:
        done = subprocess.run(
            [sys.executable, "-c", measure, *argv], env=env, stdout=subprocess.PIPE, stderr=err
        )
    assert done.returncode == 0, (tmp_path / "stderr").read_text()
    peak_mib = int(done.stdout) / 1024  # KiB
    assert peak_mib > 200, peak_mib  # it did load the model
    assert peak_mib * 1.2 <= int(request.removesuffix("Mi")), (peak_mib, request)


def test_secrets_stay_in_the_secret() -> None:
    docs = render(ALL_ON)
    kinds = by_kind(docs)
    secret = chart_secret(docs)
    assert set(secret["data"]) == {"RAG_MONITOR_JUDGE_API_KEY", "RAG_MONITOR_PG_DSN"}
    for config in kinds["ConfigMap"]:
        assert "pw@" not in json.dumps(config) and "sk-test" not in json.dumps(config)
    for doc in docs:
        if doc["kind"] not in {"Secret", "Job"}:
            assert "pw@" not in json.dumps(doc) and "sk-test" not in json.dumps(doc)
    for kind, template in pod_templates(docs):
        refs = [ref for c in template["spec"]["containers"] for ref in c["envFrom"]]
        if kind != "Job":  # the migration Job has a hook Secret of its own
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


def test_chart_dashboard_equals_the_source() -> None:
    copy = CHART / "files" / "rag-monitor.json"
    assert copy.read_bytes() == (ROOT / "dashboards" / "rag-monitor.json").read_bytes(), (
        "copy dashboards/rag-monitor.json to helm/rag-monitor/files/rag-monitor.json"
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


def test_dashboard_slo_line_follows_the_slo_value() -> None:
    values = {"prometheusRule": {"slo": {"maxHallucinationRatio": 0.02}}}
    (config,) = [
        c for c in by_kind(render(values))["ConfigMap"] if "dashboard" in c["metadata"]["name"]
    ]
    dashboard = json.loads(config["data"]["rag-monitor.json"])
    targets = [t for p in dashboard["panels"] for t in p.get("targets", [])]
    (slo,) = [t for t in targets if t["expr"].startswith("vector(")]
    assert (slo["expr"], slo["legendFormat"]) == ("vector(0.02)", "SLO (2%)")


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


def render_parent(
    tmp_path: Path, values: dict[str, Any], *, app_version: str | None = None
) -> dict[str, list[dict[str, Any]]]:
    """A parent chart (rag-service: PARENT_DEPLOYMENT, this chart as its subchart) at
    ``values``, rendered and validated: its manifests by kind."""
    parent = tmp_path / "rag-service"
    (parent / "templates").mkdir(parents=True)
    shutil.copytree(CHART, parent / "charts" / "rag-monitor")
    app = f"appVersion: '{app_version}'\n" if app_version else ""
    (parent / "Chart.yaml").write_text(
        f"apiVersion: v2\nname: rag-service\nversion: 1.2.3\n{app}"
        "dependencies:\n  - name: rag-monitor\n    version: 0.1.0\n"
    )
    (parent / "values.yaml").write_text(yaml.safe_dump(values))
    (parent / "templates" / "deployment.yaml").write_text(PARENT_DEPLOYMENT)
    docs = documents(helm.Chart.load(str(parent)).render(name="shop", namespace="rag"))
    validate_all(docs)
    return by_kind(docs)


def test_sidecar_container_renders_into_a_parent_pod(tmp_path: Path) -> None:
    values = {"rag-monitor": {"deployment": {"enabled": False}, "existingSecret": "rag-creds"}}
    kinds = render_parent(tmp_path, values, app_version="9.9")
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


def test_sidecar_mounts_kafka_tls_and_extra_volumes_in_the_parent_pod(tmp_path: Path) -> None:
    values = {
        "rag-monitor": {
            "deployment": {"enabled": False},
            "existingSecret": "rag-creds",
            "settings": {"kafka_security_protocol": "SSL"},
            "kafkaTls": {"secretName": "kafka-ca"},
            "extraVolumes": [{"name": "judge-ca", "configMap": {"name": "judge-ca"}}],
            "extraVolumeMounts": [{"name": "judge-ca", "mountPath": "/etc/judge-ca"}],
            "podMonitor": {"enabled": True, "selector": {"app": "rag-service"}},
            "prometheusOperator": {"assumeInstalled": True},  # no cluster to ask
        }
    }
    kinds = render_parent(tmp_path, values)
    (deployment,) = kinds["Deployment"]
    spec = deployment["spec"]["template"]["spec"]
    sidecar = {c["name"]: c for c in spec["containers"]}["rag-monitor"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    mounts = {m["mountPath"]: m["name"] for m in sidecar["volumeMounts"]}
    assert set(mounts.values()) <= set(volumes)
    assert volumes[mounts[TLS_DIR]]["secret"]["secretName"] == "kafka-ca"
    assert mounts["/etc/judge-ca"] == "judge-ca"
    assert container_env(sidecar)["RAG_MONITOR_KAFKA_SSL_CAFILE"] == f"{TLS_DIR}/ca.crt"
    (pod_monitor,) = kinds["PodMonitor"]  # scrapes the sidecar in the service's pods
    assert pod_monitor["spec"]["selector"]["matchLabels"] == {"app": "rag-service"}
    assert "Pod" not in kinds  # no Service to test without the chart's Deployment
    (job,) = kinds["Job"]  # the subchart still migrates, with the parent's release
    assert job["spec"]["template"]["spec"]["containers"][0]["args"] == ["migrate"]


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
        names = {env["name"] for env in runner.get("env", [])}
        assert "RAG_MONITOR_KAFKA_GROUP_INSTANCE_ID" not in names


# --- migrations ----------------------------------------------------------------


def hook_weight(doc: dict[str, Any]) -> int:
    return int(doc["metadata"]["annotations"]["helm.sh/hook-weight"])


def migration(docs: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The migration Job and its hook Secret (None with an existingSecret)."""
    (job,) = by_kind(docs)["Job"]
    secrets = [d for d in by_kind(docs).get("Secret", []) if hook(d)]
    return job, (secrets[0] if secrets else None)


def test_migration_job_runs_before_install_and_upgrade() -> None:
    docs = render({"secret": {"pgDsn": "postgresql://u:pw@pg:5432/rag"}})
    validate_all(docs)
    job, hook_secret = migration(docs)
    assert hook(job) == "pre-install,pre-upgrade"
    assert set(job["metadata"]["annotations"]["helm.sh/hook-delete-policy"].split(",")) == {
        "before-hook-creation",
        "hook-succeeded",
    }
    spec = job["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    assert container["args"] == ["migrate"]
    (deployment,) = by_kind(docs)["Deployment"]
    (consumer,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == consumer["image"]
    assert container["securityContext"] == consumer["securityContext"]
    # Before a first install neither the chart's Secret nor its ConfigMap
    # exist: the DSN comes from a hook Secret created first, the ConfigMap is optional.
    assert hook_secret is not None and hook(hook_secret) == "pre-install,pre-upgrade"
    assert hook_weight(hook_secret) < hook_weight(job)
    assert set(hook_secret["data"]) == {"RAG_MONITOR_PG_DSN"}
    assert hook_secret["data"] == {
        "RAG_MONITOR_PG_DSN": chart_secret(docs)["data"]["RAG_MONITOR_PG_DSN"]
    }
    refs = container["envFrom"]
    assert {"secretRef": {"name": hook_secret["metadata"]["name"]}} in refs
    (config_ref,) = [r["configMapRef"] for r in refs if "configMapRef" in r]
    assert config_ref["optional"] is True
    assert "serviceAccountName" not in spec  # the chart's ServiceAccount is not there yet
    assert not consumer["envFrom"][0]["configMapRef"].get("optional")


def test_migration_job_uses_an_existing_secret_and_service_account() -> None:
    docs = render(
        {
            "existingSecret": "rag-monitor-credentials",
            "serviceAccount": {"create": False, "name": "rag-monitor"},
        }
    )
    job, hook_secret = migration(docs)
    assert hook_secret is None and "Secret" not in by_kind(docs)
    spec = job["spec"]["template"]["spec"]
    assert spec["serviceAccountName"] == "rag-monitor"
    assert {"secretRef": {"name": "rag-monitor-credentials"}} in spec["containers"][0]["envFrom"]


@pytest.mark.parametrize(
    "values",
    [
        {"secret": {"pgDsn": "postgresql://u:pw@pg/rag"}, "migrations": {"enabled": False}},
        {"existingSecret": "creds", "migrations": {"enabled": False}},
        None,  # no DSN anywhere: no backlog, nothing to migrate
    ],
    ids=["off", "off-existing-secret", "no-dsn"],
)
def test_migration_job_absent(values: dict[str, Any] | None) -> None:
    docs = render(values)
    assert "Job" not in by_kind(docs)
    assert not [d for d in by_kind(docs).get("Secret", []) if hook(d)]


@pytest.mark.postgres
async def test_migration_container_migrates_a_real_database(pg_dsn: str) -> None:
    """The Job's container (its args and env, decoded from the manifests) run as a process."""
    docs = render({"secret": {"pgDsn": pg_dsn}})
    job, hook_secret = migration(docs)
    assert hook_secret is not None
    (container,) = job["spec"]["template"]["spec"]["containers"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAG_MONITOR_")}
    for key, value in hook_secret["data"].items():
        env[key] = base64.b64decode(value).decode()
    (config,) = [c for c in by_kind(docs)["ConfigMap"] if "dashboard" not in c["metadata"]["name"]]
    env.update(config["data"])  # the ConfigMap, as on an upgrade

    async def run() -> tuple[int, str, str]:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "monitor",
            *container["args"],
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(proc.communicate(), 120)
        assert proc.returncode is not None
        return proc.returncode, out.decode(), err.decode()

    code, out, err = await run()
    assert code == 0, out + err
    assert out.startswith("applied "), out
    # the log (a line per migration) is JSON on stderr, apart from the command's answer
    events = [json.loads(line)["event"] for line in err.splitlines()]
    assert events.count("applied migration") == out.count(",") + 1, err
    code, out, err = await run()  # the next upgrade's hook
    assert (code, out.strip()) == (0, "schema is up to date"), err


# --- Kafka TLS -----------------------------------------------------------------


def container_env(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


def test_kafka_tls_files_are_mounted_from_the_secret() -> None:
    docs = render(ALL_ON)
    (deployment,) = by_kind(docs)["Deployment"]
    spec = deployment["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    env = container_env(container)
    assert env["RAG_MONITOR_KAFKA_SSL_CAFILE"] == f"{TLS_DIR}/ca.pem"
    assert env["RAG_MONITOR_KAFKA_SSL_CERTFILE"] == f"{TLS_DIR}/tls.crt"
    assert env["RAG_MONITOR_KAFKA_SSL_KEYFILE"] == f"{TLS_DIR}/tls.key"
    assert env["RAG_MONITOR_KAFKA_SSL_CHECK_HOSTNAME"] == "false"
    (mount,) = [m for m in container["volumeMounts"] if m["mountPath"] == TLS_DIR]
    assert mount["readOnly"] is True
    volume = {v["name"]: v for v in spec["volumes"]}[mount["name"]]
    assert volume["secret"] == {"secretName": "kafka-client-tls", "defaultMode": 0o440}
    for kind, template in pod_templates(docs):  # the offline runner and migrate: no Kafka
        if kind != "Deployment":
            (other,) = template["spec"]["containers"]
            assert not set(container_env(other)) & {"RAG_MONITOR_KAFKA_SSL_CAFILE"}
            assert TLS_DIR not in {m["mountPath"] for m in other["volumeMounts"]}


def test_kafka_tls_ca_only_and_off() -> None:
    docs = render(
        {
            "kafkaTls": {"secretName": "kafka-ca"},
            "settings": {"kafka_security_protocol": "SASL_SSL"},
        }
    )
    (container,) = by_kind(docs)["Deployment"][0]["spec"]["template"]["spec"]["containers"]
    env = container_env(container)
    assert env["RAG_MONITOR_KAFKA_SSL_CAFILE"] == f"{TLS_DIR}/ca.crt"
    assert env["RAG_MONITOR_KAFKA_SSL_CHECK_HOSTNAME"] == "true"
    assert "RAG_MONITOR_KAFKA_SSL_CERTFILE" not in env
    assert "RAG_MONITOR_KAFKA_SSL_KEYFILE" not in env
    (plain,) = by_kind(render())["Deployment"][0]["spec"]["template"]["spec"]["containers"]
    assert "env" not in plain and [m["name"] for m in plain["volumeMounts"]] == ["tmp"]


@pytest.mark.parametrize(
    "values",
    [
        {"kafkaTls": {"secretName": "kafka-ca"}},  # PLAINTEXT: the files would be unused
        {
            "kafkaTls": {"secretName": "kafka-ca", "certKey": "tls.crt"},
            "settings": {"kafka_security_protocol": "SSL"},
        },
    ],
    ids=["plaintext", "cert-without-key"],
)
def test_kafka_tls_misconfigurations_fail_to_render(values: dict[str, Any]) -> None:
    with pytest.raises(helm.HelmError):
        render(values)


# --- what well-kept charts offer -----------------------------------------------


def test_extras_reach_every_monitor_pod() -> None:
    docs = render(ALL_ON)
    kinds = {kind for kind, _ in pod_templates(docs)}
    assert kinds == {"Deployment", "CronJob", "Job"}
    for kind, template in pod_templates(docs):
        meta, spec = template["metadata"], template["spec"]
        assert meta["labels"]["team"] == "search", kind
        assert meta["annotations"]["example.com/owner"] == "search", kind
        assert spec["priorityClassName"] == "rag-critical", kind
        assert "judge-ca" in {v["name"] for v in spec["volumes"]}, kind
        (container,) = spec["containers"]
        assert container["image"] == f"ghcr.io/rag-monitor/rag-monitor@{DIGEST}", kind
        env = container_env(container)
        assert env["HTTPS_PROXY"] == "http://proxy:3128", kind
        assert env["POD_IP"] == {"fieldRef": {"fieldPath": "status.podIP"}}, kind
        assert {"configMapRef": {"name": "proxy-settings"}} in container["envFrom"], kind
        assert {"name": "judge-ca", "mountPath": "/etc/judge-ca", "readOnly": True} in (
            container["volumeMounts"]
        ), kind
        if kind == "Deployment":
            assert [c["name"] for c in spec["initContainers"]] == ["wait"]
            # the selector still matches: pod labels only add to it
            selector = by_kind(docs)["Deployment"][0]["spec"]["selector"]["matchLabels"]
            assert selector.items() <= meta["labels"].items()
        else:
            assert "initContainers" not in spec


def test_image_tag_without_digest() -> None:
    (container,) = by_kind(render({"image": {"tag": "1.2.3"}}))["Deployment"][0]["spec"][
        "template"
    ]["spec"]["containers"]
    assert container["image"] == "ghcr.io/rag-monitor/rag-monitor:1.2.3"
    chart = helm.Chart.load(str(CHART))
    with pytest.raises(helm.HelmError):
        chart.validate_schema({"image": {"digest": "latest"}})


def test_service_monitor_and_pod_monitor_relabel() -> None:
    kinds = by_kind(render(ALL_ON))
    (service_monitor,) = kinds["ServiceMonitor"]
    (endpoint,) = service_monitor["spec"]["endpoints"]
    assert endpoint["relabelings"] == ALL_ON["serviceMonitor"]["relabelings"]
    assert endpoint["metricRelabelings"] == ALL_ON["serviceMonitor"]["metricRelabelings"]
    (pod_monitor,) = kinds["PodMonitor"]
    assert pod_monitor["spec"]["selector"]["matchLabels"] == {"app": "rag-service"}
    assert pod_monitor["spec"]["namespaceSelector"]["matchNames"] == ["rag"]
    (pod_endpoint,) = pod_monitor["spec"]["podMetricsEndpoints"]
    assert pod_endpoint["path"] == "/metrics"
    assert pod_endpoint["relabelings"] == ALL_ON["podMonitor"]["relabelings"]
    assert pod_endpoint["metricRelabelings"] == ALL_ON["podMonitor"]["metricRelabelings"]
    defaults = by_kind(render())
    assert "PodMonitor" not in defaults
    (endpoint,) = defaults["ServiceMonitor"][0]["spec"]["endpoints"]
    assert "relabelings" not in endpoint and "metricRelabelings" not in endpoint


def test_pod_monitor_needs_a_selector() -> None:
    with pytest.raises(helm.HelmError, match="podMonitor.selector"):
        render({"podMonitor": {"enabled": True}})


# --- helm test -------------------------------------------------------------------


def helm_test_pod(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (pod,) = [d for d in docs if d["kind"] == "Pod"]
    return pod


def test_helm_test_pod_asks_the_service_for_readyz() -> None:
    docs = render(ALL_ON)
    pod = helm_test_pod(docs)
    assert hook(pod) == "test"
    (container,) = pod["spec"]["containers"]
    (service,) = by_kind(docs)["Service"]
    url = f"http://{service['metadata']['name']}:9108/readyz"
    assert container["command"][-3:] == [url, "3", "1"]
    assert container["image"].endswith(DIGEST)
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert pod["spec"]["priorityClassName"] == "rag-critical"
    assert pod["metadata"]["annotations"]["example.com/owner"] == "search"
    assert pod["metadata"]["labels"]["team"] == "search"
    # a NetworkPolicy that admits only some scrapers still admits the test pod
    (policy,) = by_kind(docs)["NetworkPolicy"]
    peers = policy["spec"]["ingress"][0]["from"]
    selectors = [p["podSelector"]["matchLabels"] for p in peers if "podSelector" in p]
    labels = pod["metadata"]["labels"].items()
    assert any(sel.items() <= labels for sel in selectors)
    # ... while the Service (and PDB, and policy) do not take it for a consumer pod
    assert not service["spec"]["selector"].items() <= labels
    assert not [d for d in render({"helmTest": {"enabled": False}}) if d["kind"] == "Pod"]
    assert not [d for d in render({"deployment": {"enabled": False}}) if d["kind"] == "Pod"]


@pytest.fixture
def readiness_server() -> Iterator[tuple[dict[str, bool], int]]:
    """The monitor's real HTTP server on loopback with one switchable readiness check."""
    state = {"ready": False}

    async def ready() -> bool:
        return state["ready"]

    server = MetricsServer(CollectorRegistry(), "127.0.0.1", 0, {"partitions": ready})
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(server.start(), loop).result(timeout=10)
    try:
        yield state, server.port
    finally:
        asyncio.run_coroutine_threadsafe(server.stop(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()


def test_helm_test_script_passes_only_when_ready(
    readiness_server: tuple[dict[str, bool], int],
) -> None:
    state, port = readiness_server
    (container,) = helm_test_pod(render({"helmTest": {"attempts": 2, "intervalSeconds": 0.1}}))[
        "spec"
    ]["containers"]
    program, flag, script, _url, attempts, pause = container["command"]
    assert (program, flag) == ("python", "-c")

    def run(url: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", script, url, attempts, pause],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    url = f"http://127.0.0.1:{port}/readyz"
    not_ready = run(url)
    assert not_ready.returncode == 1
    assert not_ready.stdout.count("503") == 2  # both attempts, with the checks' body
    assert '"partitions": false' in not_ready.stdout
    state["ready"] = True
    ready = run(url)
    assert ready.returncode == 0, ready.stdout
    assert "200" in ready.stdout
    with socket.socket() as sock:  # bound, not listening: connections are refused
        sock.bind(("127.0.0.1", 0))
        assert run(f"http://127.0.0.1:{sock.getsockname()[1]}/readyz").returncode == 1


# --- the values table of the README ------------------------------------------------


def values_table() -> ModuleType:
    return load_script("scripts/values_table.py")


def test_readme_values_table_is_generated_from_values_yaml() -> None:
    script = values_table()
    generated, undocumented = script.table((CHART / "values.yaml").read_text(encoding="utf-8"))
    assert undocumented == [], "values without a comment in values.yaml"
    readme = (CHART / "README.md").read_text(encoding="utf-8")
    assert script.updated_readme(readme, generated) == readme, (
        "helm/rag-monitor/README.md is out of date: run python3 scripts/values_table.py"
    )


def test_values_table_covers_every_value_and_notices_a_missing_comment() -> None:
    script = values_table()
    text = (CHART / "values.yaml").read_text(encoding="utf-8")
    generated, _ = script.table(text)
    keys = [line.split("`")[1] for line in generated.splitlines()[2:]]
    assert len(keys) == len(set(keys))
    for top in yaml.safe_load(text):  # every value has a row, or its keys have
        assert top in keys or any(k.startswith(top + ".") for k in keys), top
    assert '| `image.digest` | `""` | Image digest' in generated
    assert '| `kafkaTls.caKey` | `"ca.crt"` |' in generated
    assert "| `migrations.enabled` | `true` |" in generated
    broken = text.replace(
        "  # Image digest (sha256:", "  digest_note: 1\n  # Image digest (sha256:", 1
    )
    _, undocumented = script.table(broken)
    assert undocumented == ["image.digest_note"]


# --- the runbook's commands --------------------------------------------------

#: kubectl's short resource names -> the kind they name
KUBECTL_KINDS = {"deploy": "Deployment", "deployment": "Deployment", "svc": "Service",
                 "service": "Service", "cm": "ConfigMap", "configmap": "ConfigMap",
                 "job": "Job", "cronjob": "CronJob", "secret": "Secret"}  # fmt: skip


def runbook_kubectl_commands() -> list[str]:
    text = (ROOT / "docs" / "runbook.md").read_text(encoding="utf-8")
    return [c for c in re.findall(r"`(kubectl [^`]+)`", text) if not c.startswith("kubectl -n")]


@pytest.mark.parametrize("release", ["rag-monitor", "search"])
def test_every_kubectl_command_of_the_runbook_names_what_the_chart_renders(release: str) -> None:
    """`<name>` is the Deployment's name as the notes print it (the README's release
    `rag-monitor` and another one); each resource, label selector and port a command names
    must be in the render."""
    docs = render_release(release)
    (deployment,) = by_kind(docs)["Deployment"]
    name = deployment["metadata"]["name"]
    assert name == ("rag-monitor" if release == "rag-monitor" else f"{release}-rag-monitor")
    notes = rendered_files(None, True, release=release)["rag-monitor/templates/NOTES.txt"]
    assert f" is installed as {name} in rag." in notes.splitlines()[0]
    commands = runbook_kubectl_commands()
    assert len(commands) >= 5, commands
    pods = [template for _, template in pod_templates(docs)]
    for command in commands:
        line = command.replace("<name>", name).replace("<release>", release)
        assert "<" not in line.split("|")[0], f"unknown placeholder in {command!r}"
        argv = shlex.split(line.split("|")[0])
        selector = argv[argv.index("-l") + 1] if "-l" in argv else None
        refs = [re.fullmatch(r"([a-z]+)/([a-z0-9.-]+)", a) for a in argv if a != selector]
        for kind, resource in (m.groups() for m in refs if m):
            assert kind in KUBECTL_KINDS, f"{command!r}: {kind}/ is no kind checked here"
            rendered = {d["metadata"]["name"] for d in by_kind(docs).get(KUBECTL_KINDS[kind], [])}
            assert resource in rendered, f"{command!r}: no {KUBECTL_KINDS[kind]} {resource}"
        if selector is not None:
            wanted = dict(p.split("=", 1) for p in selector.split(","))
            assert any(wanted.items() <= t["metadata"]["labels"].items() for t in pods), (
                f"{command!r}: no pod carries {wanted}"
            )
        if argv[1] == "port-forward":
            ports = {
                p["containerPort"]
                for c in deployment["spec"]["template"]["spec"]["containers"]
                for p in c.get("ports", [])
            }
            for port in argv[3:]:
                assert int(port.split(":")[-1]) in ports, f"{command!r}: no container port"
