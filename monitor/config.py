"""The settings: one frozen tree from ``RAG_MONITOR_*`` variables and an optional YAML file.

See docs/configuration.md.
"""

from __future__ import annotations

import difflib
import json
import os
import re
from collections.abc import Mapping
from contextvars import ContextVar
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Annotated, Any, Literal, get_origin
from urllib.parse import SplitResult, urlsplit

import yaml
from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
)
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
    YamlConfigSettingsSource,
)

from monitor.flags import DEFAULT_THRESHOLDS
from monitor.records import ALL_METRICS

PREFIX = "RAG_MONITOR_"

_WINDOWS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


class TokenBudgetSpec(BaseModel):
    """``200000/h`` → 200000 tokens per 3600 s. ``0`` or ``none`` means unlimited."""

    model_config = ConfigDict(frozen=True)

    tokens: int
    window_seconds: float

    @property
    def unlimited(self) -> bool:
        return self.tokens <= 0

    @classmethod
    def parse(cls, text: str) -> TokenBudgetSpec:
        raw = text.strip().lower().replace("_", "").replace(",", "")
        if raw in {"", "0", "none", "unlimited"}:
            return cls(tokens=0, window_seconds=3600)
        m = re.fullmatch(r"(\d+)(k|m)?\s*/\s*(\d*)\s*(s|m|h|d)", raw)
        if not m:
            raise ValueError(
                f"token budget {text!r} is not of the form TOKENS/WINDOW, e.g. 200000/h, 50k/15m"
            )
        tokens = int(m.group(1)) * {"": 1, "k": 1000, "m": 1_000_000}[m.group(2) or ""]
        window = int(m.group(3) or 1) * _WINDOWS[m.group(4)]
        return cls(tokens=tokens, window_seconds=float(window))

    def __str__(self) -> str:
        return "unlimited" if self.unlimited else f"{self.tokens}/{int(self.window_seconds)}s"


class SampleRule(BaseModel):
    """Records whose metadata matches every key in ``match`` are sampled at ``rate``."""

    model_config = ConfigDict(frozen=True)

    match: dict[str, str]
    rate: float = Field(ge=0.0, le=1.0)


class RedactionPattern(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    pattern: str

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"not a valid regular expression: {exc}") from None
        return value


def _check_port(url: SplitResult) -> None:
    """A URL's port, if any, is a number (urllib checks it when it is read)."""
    try:
        url.port  # noqa: B018
    except ValueError:
        raise ValueError("the port after HOST: must be a number from 0 to 65535") from None


class Settings(BaseSettings):
    """Every setting of rag-monitor. Documented in docs/configuration.md's settings table."""

    model_config = SettingsConfigDict(
        env_prefix=PREFIX, frozen=True, extra="forbid", case_sensitive=False
    )

    # --- Kafka source
    kafka_bootstrap_servers: str = "127.0.0.1:9092"
    kafka_topic: str = "rag-interactions"
    kafka_group_id: str = "rag-monitor"
    kafka_dlq_topic: str = "rag-interactions-dlq"
    kafka_security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    kafka_sasl_mechanism: str | None = None
    kafka_sasl_username: str | None = None
    kafka_sasl_password: SecretStr | None = None
    #: TLS (security protocol SSL or SASL_SSL): CA bundle, client certificate and key (PEM)
    kafka_ssl_cafile: str | None = None
    kafka_ssl_certfile: str | None = None
    kafka_ssl_keyfile: str | None = None
    kafka_ssl_check_hostname: bool = True
    max_record_bytes: int = Field(default=1_000_000, gt=0)
    max_in_flight: int = Field(default=256, gt=0)
    #: records scored at once (the rest of the in-flight window waits for a slot)
    score_concurrency: int = Field(default=64, gt=0)
    kafka_session_timeout_ms: int = Field(default=10_000, gt=0)
    kafka_heartbeat_interval_ms: int = Field(default=3_000, gt=0)
    #: static membership (KIP-345): a restart with the same id takes over its old member
    kafka_group_instance_id: str | None = None
    #: where a partition the group has no committed offset for is first read: its oldest
    #: record, or only what arrives from now on
    kafka_start: Literal["earliest", "latest"] = "earliest"

    # --- judge
    judge_base_url: str | None = None
    judge_model: str = "gpt-4o-mini"
    judge_api_key: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices(f"{PREFIX}JUDGE_API_KEY", "judge_api_key", "OPENAI_API_KEY"),
    )
    embedding_model: str = "text-embedding-3-small"
    judge_timeout_seconds: float = Field(default=60.0, gt=0)
    #: a timeout per judge step (statements, verify, questions, usefulness, grounding,
    #: embeddings); the steps it does not name get judge_timeout_seconds
    judge_step_timeouts: dict[str, float] = {}
    #: frugal: faithfulness and context_utility in one fused judge request (false: a judge
    #: model too small to follow it answers the basic steps instead)
    judge_fuse_grounding: bool = True
    judge_max_retries: int = Field(default=2, ge=0)
    judge_concurrency: int = Field(default=16, gt=0)
    #: the largest cap of one judge answer: each request's cap is sized from its step's
    #: inputs, at most this, and the budget reserves exactly the cap
    judge_max_completion_tokens: int = Field(default=2048, gt=0)
    call_pattern: Literal["frugal", "per_call"] = "frugal"
    relevancy_questions: int = Field(default=3, ge=1)
    judge_cache_size: int = Field(default=512, ge=0)

    # --- which metrics, and when a score is a flag
    online_metrics: Annotated[list[str], NoDecode] = [
        "faithfulness",
        "response_relevancy",
        "context_utility",
    ]
    thresholds: dict[str, float] = DEFAULT_THRESHOLDS
    #: how the local judge says a claim is unsupported: only in an answer it judges as a
    #: whole to hold one ("answer", for specificity), or on the claim's own probability
    #: ("claim"; docs/metrics.md, "The flag rule")
    local_decision: Literal["answer", "claim"] = "answer"

    # --- sampling and budget
    sample_rate: float = Field(default=0.1, ge=0.0, le=1.0)
    sample_rules: list[SampleRule] = []
    token_budget: Annotated[TokenBudgetSpec, NoDecode] = TokenBudgetSpec(
        tokens=200_000, window_seconds=3600
    )
    budget_fallback: Literal["skip", "local"] = "skip"
    risk_sampling: bool = False
    #: worker threads of the risk screen (each about one core while traffic outruns it)
    risk_screen_threads: int = Field(default=1, ge=1)

    # --- backlog
    pg_dsn: SecretStr | None = None
    migrate_on_start: bool = False
    control_share: float = Field(default=0.01, ge=0.0, le=1.0)
    redact_pii: bool = True
    redaction_patterns: list[RedactionPattern] = []
    offline_token_budget: Annotated[TokenBudgetSpec, NoDecode] = TokenBudgetSpec(
        tokens=0, window_seconds=3600
    )
    #: `rag-monitor review`: name:token pairs (the name is the reviewer)
    review_tokens: SecretStr | None = None
    #: how often the sidecar reads the calibration series from Postgres
    calibration_interval_seconds: float = Field(default=300.0, gt=0)

    # --- OpenTelemetry traces in (input_format otlp_*), scores out
    input_format: Literal["interaction", "otlp_proto", "otlp_json"] = "interaction"
    trace_grace_seconds: float = Field(default=2.0, ge=0)
    trace_timeout_seconds: float = Field(default=30.0, gt=0)
    trace_buffer_max_traces: int = Field(default=10_000, gt=0)
    trace_buffer_max_bytes: int = Field(default=64 * 1024 * 1024, gt=0)
    trace_buffer_overflow: Literal["assemble", "drop"] = "assemble"
    trace_route_attribute: str | None = "http.route"
    scores_topic: str | None = None

    # --- exporter and lifecycle
    metrics_port: int = Field(default=9108, ge=0, le=65535)
    metrics_host: str = "0.0.0.0"
    routes: Annotated[list[str], NoDecode] = []
    shutdown_grace_seconds: float = Field(default=20.0, ge=0)
    log_level: Literal["debug", "info", "warning", "error"] = "info"

    @field_validator("token_budget", "offline_token_budget", mode="before")
    @classmethod
    def _budget(cls, value: object) -> object:
        if isinstance(value, str | int):
            return TokenBudgetSpec.parse(str(value))
        return value

    @field_validator("kafka_ssl_cafile", "kafka_ssl_certfile", "kafka_ssl_keyfile", mode="before")
    @classmethod
    def _unset_when_empty(cls, value: object) -> object:
        """An empty value (a chart that mounts nothing) means unset."""
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("kafka_bootstrap_servers", mode="after")
    @classmethod
    def _host_ports(cls, value: str) -> str:
        """HOST:PORT[,HOST:PORT…]: a missing or bad port is a settings error, not "unreachable"."""
        for address in (part.strip() for part in value.split(",")):
            host, colon, port = address.rpartition(":")
            if not address or not colon or not host or host.endswith(":"):
                raise ValueError(f"{address!r} has no port: write HOST:PORT, e.g. kafka:9092")
            if not port.isdigit() or not 0 < int(port) < 65536:
                raise ValueError(f"{address!r}: the port must be a number from 1 to 65535")
        return value

    @field_validator("pg_dsn", mode="after")
    @classmethod
    def _dsn(cls, value: SecretStr | None) -> SecretStr | None:
        """A postgresql:// URL with a numeric port, if any (the DSN itself is never shown)."""
        if value is None:
            return None
        parts = urlsplit(value.get_secret_value())
        if parts.scheme not in ("postgresql", "postgres"):
            raise ValueError(
                "not a Postgres URL: write postgresql://USER:PASSWORD@HOST:PORT/DATABASE"
            )
        _check_port(parts)
        return value

    @field_validator("judge_base_url", mode="after")
    @classmethod
    def _judge_url(cls, value: str | None) -> str | None:
        """An http(s) URL with a host and a numeric port, if any (empty: the local judge)."""
        if not value:
            return value
        parts = urlsplit(value)
        example = "write http(s)://HOST[:PORT]/PATH, e.g. https://api.openai.com/v1"
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {example}")
        _check_port(parts)
        return value

    @field_validator("thresholds", mode="after")
    @classmethod
    def _thresholds(cls, value: dict[str, float]) -> dict[str, float]:
        """A partial mapping keeps the defaults of the metrics it does not name; a name that
        is no metric is refused (it would leave the metric it meant at its default)."""
        for metric, limit in value.items():
            if metric not in ALL_METRICS:
                nearest = difflib.get_close_matches(metric, ALL_METRICS, n=1, cutoff=0.6)
                hint = (
                    f"did you mean {nearest[0]}?" if nearest else "known: " + ", ".join(ALL_METRICS)
                )
                raise ValueError(f"{metric!r} is not a metric; {hint}")
            if not 0.0 <= limit <= 1.0:
                raise ValueError(f"threshold of {metric} must be within [0, 1]")
        return {**DEFAULT_THRESHOLDS, **value}

    @field_validator("judge_step_timeouts", mode="after")
    @classmethod
    def _step_timeouts(cls, value: dict[str, float]) -> dict[str, float]:
        known = ("statements", "verify", "questions", "usefulness", "grounding", "embeddings")
        for step, seconds in value.items():
            if step not in known:
                raise ValueError(f"unknown judge step {step!r}; known: {', '.join(known)}")
            if not seconds > 0:
                raise ValueError(f"timeout of {step} must be > 0")
        return value

    @field_validator("online_metrics", "routes", mode="before")
    @classmethod
    def _comma_list(cls, value: object) -> object:
        if isinstance(value, str) and not value.strip().startswith("["):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    def route_label(self, route: str | None) -> str:
        """Bounded label: the route if allow-listed, else ``other`` (``none`` when absent)."""
        if route is None:
            return "none"
        return route if route in self.routes else "other"

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Explicit values, then the environment, then the YAML file `load_settings` names."""
        yaml_file = _SettingsFile(settings_cls, _config_file.get())
        return init_settings, env_settings, yaml_file, dotenv_settings, file_secret_settings


class ConfigError(Exception):
    """Invalid configuration; the message names the setting."""


def _invalid(problems: list[str]) -> ConfigError:
    """The error for ``problems`` (each ``SETTING: why``): one problem on one line, several
    one a line under a heading."""
    if len(problems) == 1:
        return ConfigError(f"invalid configuration: {problems[0]}")
    return ConfigError("\n".join(["invalid configuration:", *(f"  {p}" for p in problems)]))


# The file of the `load_settings` call in progress (a settings class takes no per-call source).
_config_file: ContextVar[Path | None] = ContextVar("rag_monitor_config_file", default=None)


class _SettingsFile(YamlConfigSettingsSource):
    """The YAML settings file: keys as the variables' names too, and every read error named."""

    def __init__(self, settings_cls: type[BaseSettings], path: Path | None) -> None:
        if path is not None and not path.is_file():  # pydantic-settings would skip it silently
            try:
                path.open("rb").close()
            except OSError as exc:
                raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
        super().__init__(settings_cls, yaml_file=path, yaml_file_encoding="utf-8")

    # the one hook pydantic-settings gives for reading a file (its type widened to
    # Traversable in 2.16; accepting both keeps every release since 2.3 working)
    def _read_file(self, file_path: Path | Traversable) -> dict[str, Any]:
        try:
            loaded = yaml.safe_load(file_path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigError(f"cannot read config file {file_path}: {exc.strerror}") from None
        except yaml.YAMLError as exc:
            raise ConfigError(f"config file {file_path} is not valid YAML: {exc}") from None
        if loaded is None:
            return {}
        if not isinstance(loaded, dict):
            raise ConfigError(f"config file {file_path} must hold a mapping of settings")
        values = {}
        for key, value in loaded.items():
            name = str(key).lower()
            values[name.removeprefix(PREFIX.lower())] = value
        return values


def load_settings(config_file: str | Path | None = None, **overrides: Any) -> Settings:
    """Build the settings tree or raise ConfigError naming each bad setting."""
    _check_variable_names(os.environ)
    _check_json_variables(set(overrides))
    token = _config_file.set(None if config_file is None else Path(config_file))
    try:
        settings = Settings(**overrides)
    except ValidationError as exc:
        path = None if config_file is None else Path(config_file)
        raise _invalid(_explain(exc, path, set(overrides))) from None
    except SettingsError as exc:
        raise ConfigError(f"invalid configuration: {exc}") from None
    finally:
        _config_file.reset(token)
    _check_judge_choice(settings)
    return settings


#: the warning of a command that runs the local judge while ``OPENAI_API_KEY`` is set
UNUSED_API_KEY = (
    "OPENAI_API_KEY is set but RAG_MONITOR_JUDGE_BASE_URL is not: the key is "
    "unused and the local judge scores (a screen, not a verdict)"
)


def ambient_api_key(settings: Settings) -> bool:
    """Whether the judge's API key is only the environment's ``OPENAI_API_KEY``.

    Such a key is set for other programs as often as for this one: with no judge URL it
    is left unused (the start-up log says so) rather than refused.
    """
    key = settings.judge_api_key
    if key is None or any(name.upper() == f"{PREFIX}JUDGE_API_KEY" for name in os.environ):
        return False
    return os.environ.get("OPENAI_API_KEY") == key.get_secret_value()


def _check_judge_choice(settings: Settings) -> None:
    """A judge key with no judge URL is a deployment that meant an LLM judge and forgot its
    endpoint: refused, since the local judge would run in its place unnoticed."""
    if settings.judge_api_key is None or settings.judge_base_url or ambient_api_key(settings):
        return
    raise _invalid(
        [
            f"{PREFIX}JUDGE_API_KEY: set, but {PREFIX}JUDGE_BASE_URL is not; the key is for an "
            "LLM judge, which needs its endpoint (e.g. https://api.openai.com/v1). Set "
            f"{PREFIX}JUDGE_BASE_URL, or unset the key to run the local judge"
        ]
    )


def setting_variables() -> dict[str, str]:
    """Every variable name that sets a setting (upper case) -> the setting's field name."""
    names = {}
    for name, info in Settings.model_fields.items():
        names[PREFIX + name.upper()] = name
        alias = info.validation_alias
        choices = alias.choices if isinstance(alias, AliasChoices) else [alias]
        for choice in choices:
            if isinstance(choice, str) and choice.upper().startswith(PREFIX):
                names[choice.upper()] = name
    return names


def _check_variable_names(environ: Mapping[str, str]) -> None:
    """Refuse a ``RAG_MONITOR_*`` variable that is not a setting (the prefix is theirs alone).

    The variables are read regardless of case, so they are checked regardless of case.
    """
    known = setting_variables()
    delimiter = Settings.model_config.get("env_nested_delimiter")
    lines = []
    for variable in sorted(environ):
        upper = variable.upper()
        if not upper.startswith(PREFIX) or upper in known:
            continue
        head = _collection_head(upper, known)
        if delimiter and head is not None and upper.startswith(head + delimiter.upper()):
            continue  # one key of a mapping setting, read as such by pydantic-settings
        lines.append(f"{variable}: {_not_a_setting(upper, known, in_environment=True)}")
    if lines:
        raise _invalid(lines)


def _collection_head(variable: str, known: Mapping[str, str]) -> str | None:
    """The mapping or list setting whose name ``variable`` extends, if any.

    (``THRESHOLDS__FAITHFULNESS`` extends ``THRESHOLDS``, after the prefix.)
    """
    for name, field in known.items():
        if variable.startswith(name + "_"):
            info = Settings.model_fields[field]
            if get_origin(info.annotation) in (dict, list):
                return name
    return None


def _not_a_setting(variable: str, known: Mapping[str, str], *, in_environment: bool) -> str:
    """Why ``variable`` (upper case, not a setting) is refused, naming the nearest setting."""
    head = _collection_head(variable, known)
    if head is not None and in_environment:
        # no nested variables: a mapping or a list is the value of its one variable
        if NoDecode in Settings.model_fields[known[head]].metadata:
            return f"not a setting; {head} is one variable, a comma-separated list"
        return f"not a setting; {head} is one variable, holding JSON"
    if head is not None:
        return f"not a setting; did you mean {head}?"
    if variable == f"{PREFIX}CONFIG":
        return "not a setting; the settings file is named with --config FILE"
    suffixes = {name.removeprefix(PREFIX): name for name in known}
    nearest = difflib.get_close_matches(variable.removeprefix(PREFIX), suffixes, n=1, cutoff=0.6)
    if nearest:
        return f"not a setting; did you mean {suffixes[nearest[0]]}?"
    return "not a setting (docs/configuration.md lists every setting)"


def _check_json_variables(overridden: set[str]) -> None:
    """A variable holding a JSON mapping or list must parse: say which one does not.

    (pydantic-settings would only name its "EnvSettingsSource".)
    """
    environ = {k.upper(): v for k, v in os.environ.items()}
    lines = []
    for name, info in Settings.model_fields.items():
        if name in overridden or NoDecode in info.metadata:
            continue
        if get_origin(info.annotation) not in (dict, list):
            continue
        variable = PREFIX + name.upper()
        if variable not in environ:
            continue
        try:
            json.loads(environ[variable])
        except json.JSONDecodeError as exc:
            lines.append(f"{variable}: not valid JSON: {exc.msg} at column {exc.colno}")
    if lines:
        raise _invalid(lines)


def _explain(exc: ValidationError, config_file: Path | None, overridden: set[str]) -> list[str]:
    """One problem per error, naming the setting where it was given: the environment
    variable, or the key as written in the YAML file; the validator's own words without
    pydantic's ``Value error, `` before them."""
    in_file = _file_keys(config_file)
    in_environment = {k.upper() for k in os.environ}
    lines: list[str] = []
    for err in exc.errors(include_input=False, include_url=False):
        loc = [str(p) for p in err["loc"]]
        name = loc[0] if loc else "?"
        where = ".".join(loc[1:])
        variable = f"{PREFIX}{name.upper()}"
        message = err["msg"].removeprefix("Value error, ")
        from_file = (
            config_file is not None
            and name.lower() in in_file
            and name not in overridden
            and not _in_environment(name, in_environment)
        )
        if from_file and config_file is not None:
            setting = f"{config_file}: {in_file[name.lower()]}" + (f" [{where}]" if where else "")
            if err["type"] == "extra_forbidden" and not where:
                message = _not_a_key(name.lower())
        else:
            setting = variable + (f" [{where}]" if where else "")
            if err["type"] == "extra_forbidden" and not where:
                message = _not_a_setting(variable, setting_variables(), in_environment=False)
        lines.append(f"{setting}: {message}")
    return lines


def _in_environment(name: str, environment: set[str]) -> bool:
    """Whether a variable for setting ``name`` is set (its aliases included)."""
    return any(field == name and variable in environment
               for variable, field in setting_variables().items())  # fmt: skip


def _file_keys(config_file: Path | None) -> dict[str, str]:
    """The YAML file's keys as written, by the name the settings read them under."""
    if config_file is None:
        return {}
    try:
        loaded = yaml.safe_load(config_file.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return {}
    if not isinstance(loaded, dict):
        return {}
    return {str(key).lower().removeprefix(PREFIX.lower()): str(key) for key in loaded}


def _not_a_key(name: str) -> str:
    """Why the file's key ``name`` (lower case, no prefix) is refused, naming the nearest."""
    for field, info in Settings.model_fields.items():
        if name.startswith(field + "_") and get_origin(info.annotation) in (dict, list):
            return f"not a setting; did you mean {field}?"
    nearest = difflib.get_close_matches(name, list(Settings.model_fields), n=1, cutoff=0.6)
    if nearest:
        return f"not a setting; did you mean {nearest[0]}?"
    return "not a setting (docs/configuration.md lists every setting)"
