"""Settings from env and YAML; bad settings fail naming the variable."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from monitor.config import (
    PREFIX,
    ConfigError,
    Settings,
    TokenBudgetSpec,
    load_settings,
    setting_variables,
)
from tests.support import ROOT
from tests.support.kafka import BROKER_ENV


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for name in list(os.environ):
        if name.startswith("RAG_MONITOR_") or name == "OPENAI_API_KEY":
            monkeypatch.delenv(name)


def config_errors(config: Path | None = None) -> list[str]:
    """The lines of the ConfigError that loading the settings (``config``, the environment)
    raises."""
    with pytest.raises(ConfigError) as info:
        load_settings(config)
    return str(info.value).splitlines()


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
        f"invalid configuration: {variable.upper()}: not valid JSON: Expecting property name "
        "enclosed in double quotes at column 22",
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
    assert f"  {config}: sample_rate: Input should be less than or equal to 1" in str(info.value)
    assert f"  {config}: no_such_setting: not a setting" in str(info.value)


def test_a_mistyped_key_in_the_file_names_the_nearest_setting(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("sample_rte: 0.5\nthresholds__faithfulness: 0.3\n")
    assert config_errors(config) == [
        "invalid configuration:",
        f"  {config}: sample_rte: not a setting; did you mean sample_rate?",
        f"  {config}: thresholds__faithfulness: not a setting; did you mean thresholds?",
    ]


def test_a_bad_value_is_named_where_it_was_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("RAG_MONITOR_SAMPLE_RATE: 3\nmax_in_flight: 0\n")
    monkeypatch.setenv(f"{PREFIX}MAX_IN_FLIGHT", "-1")  # the environment wins: its value is bad
    assert config_errors(config) == [
        "invalid configuration:",
        f"  {PREFIX}MAX_IN_FLIGHT: Input should be greater than 0",
        f"  {config}: RAG_MONITOR_SAMPLE_RATE: Input should be less than or equal to 1",
    ]


# the mistyped names are spelled from PREFIX, so the scan of the tree below does not find them
@pytest.mark.parametrize(
    ("variable", "reason"),
    [
        (f"{PREFIX}SAMPLE_RTE", "did you mean RAG_MONITOR_SAMPLE_RATE?"),
        (f"{PREFIX}PGDSN", "did you mean RAG_MONITOR_PG_DSN?"),
        (f"{PREFIX.lower()}kafka_bootstrap_server",
         "did you mean RAG_MONITOR_KAFKA_BOOTSTRAP_SERVERS?"),
        (f"{PREFIX}JUDGE_APIKEY", "did you mean RAG_MONITOR_JUDGE_API_KEY?"),
        (f"{PREFIX}THRESHOLDS__FAITHFULNESS",
         "RAG_MONITOR_THRESHOLDS is one variable, holding JSON"),
        (f"{PREFIX}SAMPLE_RULES_0", "RAG_MONITOR_SAMPLE_RULES is one variable, holding JSON"),
        (f"{PREFIX}ROUTES__0", "RAG_MONITOR_ROUTES is one variable, a comma-separated list"),
        (f"{PREFIX}CONFIG", "the settings file is named with --config FILE"),
    ],
)  # fmt: skip
def test_an_unknown_variable_is_refused_naming_the_nearest_setting(
    monkeypatch: pytest.MonkeyPatch, variable: str, reason: str
) -> None:
    monkeypatch.setenv(variable, "postgresql://monitor:hunter2@pg/rag")
    errors = config_errors()
    assert errors == [f"invalid configuration: {variable}: not a setting; {reason}"]
    assert "hunter2" not in "\n".join(errors)  # a variable's value may be a secret: never shown


def test_a_name_like_no_setting_points_at_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(f"{PREFIX}WIBBLE", "1")
    with pytest.raises(
        ConfigError, match=r"WIBBLE: not a setting \(docs/configuration.md lists every setting"
    ):
        load_settings()


def test_every_unknown_variable_is_named_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(f"{PREFIX}SAMPLE_RTE", "0.5")
    monkeypatch.setenv(f"{PREFIX}TOKEN_BUDGT", "1000/h")
    assert [line.split(":")[0].strip() for line in config_errors()[1:]] == [
        f"{PREFIX}SAMPLE_RTE",
        f"{PREFIX}TOKEN_BUDGT",
    ]


def test_variables_of_other_prefixes_are_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(BROKER_ENV, "tansu")  # the test suite's own prefix
    monkeypatch.setenv("CI", "true")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("RAG_MONITOR_SAMPLE_RATE", "0.5")
    assert load_settings().sample_rate == 0.5


def test_the_prefix_has_no_exception_for_the_tests(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(f"{PREFIX}TEST_BROKER", "tansu")  # what the suite once used
    assert config_errors()[0].startswith(
        f"invalid configuration: {PREFIX}TEST_BROKER: not a setting"
    )


def test_the_package_never_reads_the_test_suites_variables() -> None:
    assert not BROKER_ENV.startswith(PREFIX)
    suite = BROKER_ENV.removesuffix("BROKER")
    readers = [
        str(path.relative_to(ROOT))
        for path in sorted((ROOT / "monitor").rglob("*.py"))
        if suite in path.read_text(encoding="utf-8")
    ]
    assert readers == []


def _tree_files() -> list[Path]:
    """The text files of the repository that may name a variable (CHANGELOG.md is history)."""
    files = [ROOT / "Dockerfile", ROOT / "README.md", ROOT / "pyproject.toml", ROOT / ".ci/run"]
    suffixes = {".py", ".md", ".yaml", ".yml", ".tpl", ".txt", ".json", ".toml", ".sh", ".cfg"}
    for top in ("monitor", "tests", "helm", "bench", "scripts", "docs", "dashboards"):
        for path in sorted((ROOT / top).rglob("*")):
            if path.is_file() and path.suffix in suffixes and "__pycache__" not in path.parts:
                files.append(path)
    return [path for path in files if path.is_file()]


#: settings of earlier commits that the tree still names for a reason of its own
RETIRED = {
    # bench.local_judge runs an old commit's support model as its baseline with it
    "RAG_MONITOR_LOCAL_JUDGE",
}


def test_every_variable_named_in_the_tree_is_a_setting() -> None:
    known = set(setting_variables())
    named: dict[str, str] = {}
    for path in _tree_files():
        text = path.read_text(encoding="utf-8", errors="replace")
        # a name ending in _ or _* (RAG_MONITOR_KAFKA_SSL_*) is a family, not a variable
        for variable in re.findall(r"\b(RAG_MONITOR_[A-Z0-9_]*[A-Z0-9])\b(?![_*])", text):
            named.setdefault(variable, str(path.relative_to(ROOT)))
    assert len(named) > 40  # the scan found the settings themselves
    unknown = {
        variable: where
        for variable, where in named.items()
        if variable not in known and variable not in RETIRED
    }
    assert unknown == {}, "not a setting (the test suite's variables start with RAGMON_TEST_)"


def test_the_settings_the_tree_names_are_the_settings_tree() -> None:
    assert set(setting_variables()) == {PREFIX + name.upper() for name in Settings.model_fields}


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


@pytest.mark.parametrize(
    ("thresholds", "message"),
    [
        ('{"faithfulnes": 0.3}', "'faithfulnes' is not a metric; did you mean faithfulness?"),
        ('{"answer_relevancy": 0.3}', "not a metric; did you mean response_relevancy?"),
        (
            '{"hallucination": 0.3}',
            "'hallucination' is not a metric; known: faithfulness, response_relevancy, "
            "context_utility, context_precision, precision_at_k, context_recall, "
            "factual_correctness, noise_sensitivity, semantic_similarity",
        ),
    ],
)
def test_a_threshold_for_no_metric_is_refused_naming_the_nearest(
    monkeypatch: pytest.MonkeyPatch, thresholds: str, message: str
) -> None:
    """A misspelt metric would leave the metric meant at its default threshold, unnoticed."""
    monkeypatch.setenv(f"{PREFIX}THRESHOLDS", thresholds)
    (line,) = config_errors()
    assert line.startswith(f"invalid configuration: {PREFIX}THRESHOLDS: ") and line.endswith(
        message
    )
    assert "Value error" not in line  # pydantic's own words, not the user's business


def test_an_offline_metric_may_have_a_threshold(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(f"{PREFIX}THRESHOLDS", '{"context_recall": 0.7}')
    assert load_settings().thresholds["context_recall"] == 0.7


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("KAFKA_BOOTSTRAP_SERVERS", "kafka", "'kafka' has no port: write HOST:PORT"),
        ("KAFKA_BOOTSTRAP_SERVERS", "a:9092,b", "'b' has no port"),
        ("KAFKA_BOOTSTRAP_SERVERS", "kafka:90a2", "'kafka:90a2': the port must be a number"),
        ("PG_DSN", "host=pg user=monitor password=hunter2", "not a Postgres URL"),
        ("PG_DSN", "postgresql://monitor:hunter2@pg:54x2/rag", "the port after HOST:"),
        # not the endpoint's URL: refused here, not met as a connection error on the first call
        ("JUDGE_BASE_URL", "api.openai.com/v1", "not an http(s) URL: write http(s)://HOST"),
        ("JUDGE_BASE_URL", "ftp://judge/v1", "not an http(s) URL"),
        ("JUDGE_BASE_URL", "http://hunter2@:8080/v1", "not an http(s) URL"),
        ("JUDGE_BASE_URL", "http://judge:80x0/v1", "the port after HOST:"),
    ],
)
def test_malformed_addresses_are_settings_errors_that_never_show_the_password(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, message: str
) -> None:
    monkeypatch.setenv(PREFIX + variable, value)
    with pytest.raises(ConfigError) as info:
        load_settings()
    assert str(info.value).startswith(f"invalid configuration: {PREFIX}{variable}: {message}")
    assert "\n" not in str(info.value) and "Value error" not in str(info.value)
    assert "hunter2" not in str(info.value)


def test_well_formed_addresses_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(f"{PREFIX}KAFKA_BOOTSTRAP_SERVERS", "a:9092, [::1]:9093")
    monkeypatch.setenv(f"{PREFIX}PG_DSN", "postgres://monitor@pg/rag?sslmode=require")
    monkeypatch.setenv(f"{PREFIX}JUDGE_BASE_URL", "http://[::1]:8080/v1")
    settings = load_settings()
    assert settings.judge_base_url == "http://[::1]:8080/v1"
    assert settings.kafka_bootstrap_servers == "a:9092, [::1]:9093"
