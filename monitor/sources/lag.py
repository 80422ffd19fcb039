"""The consumer lag gauge, per partition (docs/design.md, "The Kafka source").

`ConsumerLag` sets ``rag_monitor_consumer_lag`` to the fetch's high watermark minus
the commit position (not ``end_offsets()``, which some brokers report wrong).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from monitor.sources.offsets import Partition
from monitor.telemetry import Exporter


class ConsumerLag:
    """``rag_monitor_consumer_lag{partition}`` of the partitions the source holds."""

    def __init__(self, exporter: Exporter) -> None:
        self.exporter = exporter

    def update(
        self,
        partitions: Iterable[Partition],
        highwater: Callable[[Partition], int | None],
        position: Callable[[Partition], int | None],
    ) -> None:
        """Each partition's high watermark minus its position, where both are known."""
        for tp in partitions:
            high = highwater(tp)
            at = position(tp) if high is not None else None
            if high is None or at is None:
                continue
            self.exporter.consumer_lag.labels(partition=str(tp[1])).set(max(0, high - at))

    def forget(self, partition: int) -> None:
        """A revoked partition's series goes: its new owner reports it."""
        try:
            self.exporter.consumer_lag.remove(str(partition))
        except KeyError:
            pass
