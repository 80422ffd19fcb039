"""One frozen settings tree, read from ``RAG_MONITOR_*`` variables and an optional YAML file.

Precedence: explicit overrides > environment > YAML file (``--config``) > defaults.
The YAML file uses the same keys as the variables, without the prefix, in
lower case (``kafka_topic: interactions``); the upper-case variable spelling
(``RAG_MONITOR_KAFKA_TOPIC``) is accepted there too.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Annotated, Any, Literal

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
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict, SettingsError

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


_DEFAULT_THRESHOLDS = {"faithfulness": 0.5, "response_relevancy": 0.5, "context_utility": 0.5}


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


class Settings(BaseSettings):
    """Every setting of rag-monitor. Documented in README.md's configuration table."""

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
    max_record_bytes: int = Field(default=1_000_000, gt=0)
    max_in_flight: int = Field(default=256, gt=0)
    #: records scored at once (the rest of the in-flight window waits for a slot)
    score_concurrency: int = Field(default=64, gt=0)
    kafka_session_timeout_ms: int = Field(default=10_000, gt=0)
    kafka_heartbeat_interval_ms: int = Field(default=3_000, gt=0)
    #: static membership (KIP-345): a restart with the same id takes over its old member
    kafka_group_instance_id: str | None = None

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
    call_pattern: Literal["frugal", "per_call"] = "frugal"
    relevancy_questions: int = Field(default=3, ge=1)
    judge_cache_size: int = Field(default=512, ge=0)

    # --- which metrics, and when a score is a flag
    online_metrics: Annotated[list[str], NoDecode] = [
        "faithfulness",
        "response_relevancy",
        "context_utility",
    ]
    thresholds: dict[str, float] = _DEFAULT_THRESHOLDS

    # --- sampling and budget
    sample_rate: float = Field(default=0.1, ge=0.0, le=1.0)
    sample_rules: list[SampleRule] = []
    token_budget: Annotated[TokenBudgetSpec, NoDecode] = TokenBudgetSpec(
        tokens=200_000, window_seconds=3600
    )
    budget_fallback: Literal["skip", "local"] = "skip"
    risk_sampling: bool = False

    # --- backlog
    pg_dsn: SecretStr | None = None
    migrate_on_start: bool = False
    control_share: float = Field(default=0.01, ge=0.0, le=1.0)
    redact_pii: bool = True
    redaction_patterns: list[RedactionPattern] = []
    offline_token_budget: Annotated[TokenBudgetSpec, NoDecode] = TokenBudgetSpec(
        tokens=0, window_seconds=3600
    )

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

    @field_validator("thresholds", mode="after")
    @classmethod
    def _thresholds(cls, value: dict[str, float]) -> dict[str, float]:
        """A partial mapping keeps the defaults of the metrics it does not name."""
        for metric, limit in value.items():
            if not 0.0 <= limit <= 1.0:
                raise ValueError(f"threshold of {metric} must be within [0, 1]")
        return {**_DEFAULT_THRESHOLDS, **value}

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


class ConfigError(Exception):
    """Invalid configuration; the message names the setting."""


def load_settings(config_file: str | Path | None = None, **overrides: Any) -> Settings:
    """Build the settings tree or raise ConfigError naming each bad setting."""
    file_values: dict[str, Any] = {}
    if config_file is not None:
        path = Path(config_file)
        try:
            loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
        except yaml.YAMLError as exc:
            raise ConfigError(f"config file {path} is not valid YAML: {exc}") from None
        if loaded is None:
            loaded = {}
        if not isinstance(loaded, dict):
            raise ConfigError(f"config file {path} must hold a mapping of settings")
        for key, value in loaded.items():
            name = str(key).lower()
            if name.startswith(PREFIX.lower()):
                name = name[len(PREFIX) :]
            env_name = PREFIX + name.upper()
            if env_name in os.environ or (
                name == "judge_api_key" and "OPENAI_API_KEY" in os.environ
            ):
                continue  # the environment wins over the file
            file_values[name] = value
    try:
        return Settings(**{**file_values, **overrides})
    except ValidationError as exc:
        raise ConfigError(_explain(exc)) from None
    except SettingsError as exc:
        raise ConfigError(f"invalid configuration: {exc}") from None


def _explain(exc: ValidationError) -> str:
    lines = ["invalid configuration:"]
    for err in exc.errors(include_input=False, include_url=False):
        loc = [str(p) for p in err["loc"]]
        name = loc[0] if loc else "?"
        where = ".".join(loc[1:])
        setting = f"{PREFIX}{name.upper()}" + (f" [{where}]" if where else "")
        lines.append(f"  {setting}: {err['msg']}")
    return "\n".join(lines)
