"""Which offset is safe to commit, per partition. Pure bookkeeping, no Kafka.

See docs/design.md, "The Kafka source" (the first unfinished record; generations).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

Partition = tuple[str, int]


@dataclass
class _PartitionState:
    generation: int
    #: unfinished offsets, and a min-heap over them (lazy deletion)
    pending: set[int] = field(default_factory=set)
    heap: list[int] = field(default_factory=list)
    next_offset: int | None = None  # one past the highest offset seen
    committed: int | None = None  # last position handed to Kafka

    def position(self) -> int | None:
        while self.heap and self.heap[0] not in self.pending:
            heapq.heappop(self.heap)
        if self.heap:
            return self.heap[0]
        return self.next_offset


class OffsetTracker:
    def __init__(self) -> None:
        self._parts: dict[Partition, _PartitionState] = {}
        self._generation = 0

    def assign(self, tp: Partition) -> int:
        """Start tracking ``tp`` afresh; returns its generation."""
        self._generation += 1
        self._parts[tp] = _PartitionState(generation=self._generation)
        return self._generation

    def begin_at(self, tp: Partition, offset: int) -> None:
        """Reading of ``tp`` starts at ``offset`` with nothing committed there yet: the next
        commit records it, so a restart goes on from it even if no record arrives."""
        state = self._parts.get(tp)
        if state is not None and state.next_offset is None:
            state.next_offset = offset

    def revoke(self, tp: Partition) -> None:
        self._parts.pop(tp, None)

    def generation(self, tp: Partition) -> int | None:
        state = self._parts.get(tp)
        return None if state is None else state.generation

    def start(self, tp: Partition, offset: int, generation: int) -> bool:
        """Track a fetched record; False when ``tp`` is not (or no longer) ours."""
        state = self._parts.get(tp)
        if state is None or state.generation != generation:
            return False
        if offset not in state.pending:
            state.pending.add(offset)
            heapq.heappush(state.heap, offset)
        if state.next_offset is None or offset + 1 > state.next_offset:
            state.next_offset = offset + 1
        return True

    def finish(self, tp: Partition, offset: int, generation: int) -> bool:
        state = self._parts.get(tp)
        if state is None or state.generation != generation:
            return False
        if offset not in state.pending:
            return False
        state.pending.discard(offset)
        return True

    def in_flight(self, tp: Partition | None = None) -> int:
        """Unfinished records of ``tp`` (of every partition when None)."""
        if tp is None:
            return sum(len(s.pending) for s in self._parts.values())
        state = self._parts.get(tp)
        return 0 if state is None else len(state.pending)

    def committable(self) -> dict[Partition, int]:
        """Positions that moved since the last `mark_committed`."""
        out: dict[Partition, int] = {}
        for tp, state in self._parts.items():
            pos = state.position()
            if pos is not None and pos != state.committed:
                out[tp] = pos
        return out

    def mark_committed(self, positions: dict[Partition, int]) -> None:
        for tp, pos in positions.items():
            state = self._parts.get(tp)
            if state is not None:
                state.committed = pos

    def position(self, tp: Partition) -> int | None:
        """The first unfinished offset (one past the last seen when all are finished)."""
        state = self._parts.get(tp)
        return None if state is None else state.position()

    def committed(self, tp: Partition) -> int | None:
        state = self._parts.get(tp)
        return None if state is None else state.committed

    def partitions(self) -> list[Partition]:
        return list(self._parts)
