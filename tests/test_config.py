"""Settings from env and YAML; bad settings fail naming the variable."""

from __future__ import annotations

from pathlib import Path

import pytest

from monitor.config import ConfigError, TokenBudgetSpec, load_settings


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for name in list(os.environ):
        if name.startswith("RAG_MONITOR_") or name == "OPENAI_API_KEY":
            monkeypatch.delenv(name)


@pytest.mark.parametrize(
    ("text", "tokens", "seconds"),
    [
        ("200000/h", 200_000, 3600),
        ("50k/15m", 50_000, 900),
        ("1m/d", 1_000_000, 86400),
        ("none", 0, 3600),
    ],
)
def test_budget_spec(text: str, tokens: int, seconds: float) -> None:
    spec = TokenBudgetSpec.parse(text)
    assert (spec.tokens, spec.window_seconds) == (tokens, seconds)


def test_bad_budget_names_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_MONITOR_TOKEN_BUDGET", "lots")
    with pytest.raises(ConfigError, match="RAG_MONITOR_TOKEN_BUDGET"):
        load_settings()


@pytest.mark.parametrize(
    "variable",
    ["RAG_MONITOR_THRESHOLDS", "RAG_MONITOR_SAMPLE_RULES", "rag_monitor_redaction_patterns"],
)
def test_malformed_json_names_its_variable(monkeypatch: pytest.MonkeyPatch, variable: str) -> None:
    monkeypatch.setenv(variable, '{"faithfulness": 0.4,')
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert str(caught.value).splitlines() == [
        "invalid configuration:",
        f"  {variable.upper()}: not valid JSON: Expecting property name enclosed in double quotes"
        " at column 22",
    ]
    assert "EnvSettingsSource" not in str(caught.value)


def test_env_beats_yaml_and_lists_parse(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(
        "kafka_topic: from-yaml\nsample_rate: 0.3\nRAG_MONITOR_ROUTES: [hr, billing]\n"
    )
    monkeypatch.setenv("RAG_MONITOR_SAMPLE_RATE", "0.7")
    monkeypatch.setenv("RAG_MONITOR_ONLINE_METRICS", "faithfulness, context_utility")
    settings = load_settings(config)
    assert settings.kafka_topic == "from-yaml"
    assert settings.sample_rate == 0.7
    assert settings.routes == ["hr", "billing"]
    assert settings.online_metrics == ["faithfulness", "context_utility"]
    assert settings.route_label("hr") == "hr"
    assert settings.route_label("secret-route-123") == "other"


def test_api_key_falls_back_and_is_never_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-123")
    settings = load_settings()
    assert settings.judge_api_key is not None
    assert settings.judge_api_key.get_secret_value() == "sk-test-123"
    assert "sk-test-123" not in repr(settings)


def test_invalid_values_and_unknown_keys(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("sample_rate: 3\nno_such_setting: 1\n")
    with pytest.raises(ConfigError) as info:
        load_settings(config)
    assert "RAG_MONITOR_SAMPLE_RATE" in str(info.value)
    assert "RAG_MONITOR_NO_SUCH_SETTING" in str(info.value)


def test_unreadable_config_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_settings(tmp_path / "missing.yaml")


def test_a_directory_or_a_list_is_not_a_config_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file .*: Is a directory"):
        load_settings(tmp_path)
    config = tmp_path / "c.yaml"
    config.write_text("- kafka_topic\n")
    with pytest.raises(ConfigError, match="must hold a mapping"):
        load_settings(config)


def test_explicit_beats_env_beats_yaml_and_mappings_merge_by_key(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(
        "kafka_topic: from-yaml\nkafka_group_id: yaml-group\njudge_api_key: from-yaml\n"
        "thresholds: {faithfulness: 0.3, context_utility: 0.6}\n"
    )
    monkeypatch.setenv("RAG_MONITOR_KAFKA_TOPIC", "from-env")
    monkeypatch.setenv("OPENAI_API_KEY", "from-env")
    monkeypatch.setenv("RAG_MONITOR_THRESHOLDS", '{"faithfulness": 0.4}')
    settings = load_settings(config, kafka_group_id="explicit")
    assert settings.kafka_topic == "from-env"
    assert settings.kafka_group_id == "explicit"
    assert settings.judge_api_key is not None
    assert settings.judge_api_key.get_secret_value() == "from-env"
    assert settings.thresholds["faithfulness"] == 0.4
    assert settings.thresholds["context_utility"] == 0.6  # the file's key, not overridden
    assert settings.thresholds["response_relevancy"] == 0.5  # the default
    assert load_settings().kafka_group_id != "yaml-group"  # no file, no file values


def test_partial_thresholds_keep_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_MONITOR_THRESHOLDS", '{"faithfulness": 0.8}')
    settings = load_settings()
    assert settings.thresholds["faithfulness"] == 0.8
    assert settings.thresholds["context_utility"] == 0.5
    monkeypatch.setenv("RAG_MONITOR_THRESHOLDS", '{"faithfulness": 8}')
    with pytest.raises(ConfigError, match="RAG_MONITOR_THRESHOLDS"):
        load_settings()
