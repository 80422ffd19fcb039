"""Scored records → a Kafka topic as JSON, so other tools can join scores to their traces.

One message per scored record, keyed by the interaction id; its fields and its delivery:
docs/metrics.md, "Scores back out".
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

from monitor.backoff import Backoff
from monitor.config import Settings
from monitor.flags import flag_reasons
from monitor.metrics.faithfulness import HALLUCINATION_PROBABILITY
from monitor.records import ScoredRecord
from monitor.sinks import SinkBackpressure, SinkError

SINK = "scores_topic"


class PublishError(Exception):
    """Kafka did not take a batch; ``retryable`` False for a record it will never take."""

    def __init__(self, detail: str, *, retryable: bool) -> None:
        super().__init__(detail)
        self.retryable = retryable


class Publisher(Protocol):
    """`monitor.kafka.publisher.KafkaPublisher`; raises `PublishError`."""

    async def publish(self, topic: str, records: Sequence[tuple[bytes | None, bytes]]) -> None: ...


def score_message(record: ScoredRecord, settings: Settings, scored_at: datetime) -> dict[str, Any]:
    """The JSON object written for ``record``. Pure."""
    interaction = record.interaction
    judges = {r.judge for r in record.results.values()}
    scores = {
        name: (r.score if math.isfinite(r.score) else None) for name, r in record.results.items()
    }
    faithfulness = record.results.get("faithfulness")
    probability = (
        None if faithfulness is None else faithfulness.details.get(HALLUCINATION_PROBABILITY)
    )
    return {
        "id": interaction.id,
        "trace_id": interaction.trace_id,
        "span_id": interaction.span_id,
        "scores": scores,
        "flags": flag_reasons(record, settings.thresholds),
        # the local judge's probability that the answer holds an unsupported claim
        HALLUCINATION_PROBABILITY: probability,
        "judge": judges.pop() if len(judges) == 1 else ("mixed" if judges else None),
        "scored_at": scored_at.isoformat(),
    }


class ScoresTopicSink:
    """A `Sink`: ``write`` returns once Kafka acknowledged every message of the batch."""

    name = SINK

    def __init__(
        self,
        publisher: Publisher,
        settings: Settings,
        *,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        if not settings.scores_topic:
            raise ValueError("RAG_MONITOR_SCORES_TOPIC is not set")
        self.publisher = publisher
        self.settings = settings
        self.topic = settings.scores_topic
        self.clock = clock or (lambda: datetime.now(UTC))
        #: how long a batch Kafka did not take asks the pipeline to wait
        self._backoff = Backoff()

    async def write(self, batch: Sequence[ScoredRecord]) -> None:
        if not batch:
            return
        now = self.clock()
        messages = [
            (
                record.interaction.id.encode("utf-8"),
                json.dumps(score_message(record, self.settings, now), allow_nan=False).encode(),
            )
            for record in batch
        ]
        try:
            await self.publisher.publish(self.topic, messages)
        except PublishError as exc:
            if exc.retryable:  # Kafka not answering: wait and ask again
                raise SinkBackpressure(SINK, str(exc), self._backoff.failed()) from exc
            raise SinkError(SINK, str(exc)) from exc  # a record Kafka will never take
        self._backoff.succeeded()

    async def flush(self) -> None:
        """`write` waits for the acknowledgements; nothing is buffered."""

    async def aclose(self) -> None:
        """Nothing to release: the publisher is started and stopped by whoever made it."""
