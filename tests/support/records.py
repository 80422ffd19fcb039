"""Record and exposition helpers the tests share: interactions the deterministic judge
scores 1.0 or 0.0, their Kafka encoding, which of them a sampler keeps, and Prometheus
samples by labels."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from prometheus_client.metrics_core import Metric
from prometheus_client.openmetrics import parser as openmetrics_parser
from prometheus_client.parser import text_string_to_metric_families
from pydantic import ValidationError

from monitor.records import Interaction, InvalidRecord, describe_validation_error
from monitor.sampling import unit_hash


def interaction(i: int, *, supported: bool = True, **metadata: str) -> dict[str, Any]:
    """A record the deterministic judge scores 1.0 (supported) or 0.0 on faithfulness."""
    context = f"Receipts are required for travel expenses over {100 + i} dollars."
    response = context if supported else f"Receipts are never required for item {i} lodging."
    return {
        "id": f"rec-{i}",
        "user_input": "When do I need to attach a receipt for travel expenses?",
        "retrieved_contexts": [context],
        "response": response,
        "metadata": metadata,
    }


def validate_record(data: dict[str, Any]) -> Interaction:
    """A record's fields (already decoded) to an Interaction, or InvalidRecord (``schema``,
    ``empty_response``): what `monitor.records.parse_record` makes of their JSON.

    The model itself accepts a blank response (a stored backlog row may hold one); a
    record arriving for scoring does not: an answer of nothing is a failure of the RAG
    service, not an answer whose relevancy or utility is 0.
    """
    try:
        interaction = Interaction.model_validate(data)
    except ValidationError as exc:
        raise InvalidRecord("schema", describe_validation_error(exc)) from None
    if not interaction.response.strip():
        raise InvalidRecord("empty_response", "response: empty or blank")
    return interaction


def encode(record: dict[str, Any]) -> bytes:
    return json.dumps(record).encode("utf-8")


def samples(text: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """Values of the sample ``name`` in Prometheus text, keyed by sorted labels."""
    out: dict[tuple[tuple[str, str], ...], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                out[tuple(sorted(sample.labels.items()))] = sample.value
    return out


def openmetrics_families(text: str) -> Iterator[Metric]:
    """The metric families of an OpenMetrics exposition (the exemplars included)."""
    # prometheus_client's OpenMetrics parser has no annotations; its classic one has
    families: Iterator[Metric] = openmetrics_parser.text_string_to_metric_families(text)  # type: ignore[no-untyped-call]
    return families


def expected_sample(n: int, rate: float) -> set[int]:
    """Which of records ``rec-0`` … (keyed by their id) a sampler at ``rate`` keeps: those
    whose key hashes below it."""
    return {i for i in range(n) if unit_hash(f"rec-{i}".encode()) < rate}
