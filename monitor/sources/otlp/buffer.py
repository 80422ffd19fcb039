"""Spans held per trace until the trace is due, and which messages each trace still needs.

`TraceBuffer` holds each trace's spans until its root span has arrived and a grace
period has passed, or until a timeout, within a bound on traces and bytes, and counts
per message how many open traces still need it, so the caller can finish (commit) a
message only once every trace it holds a span of is done. No Kafka, no clock.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field
from typing import Generic, Literal, TypeVar

from monitor.sources.otlp.spans import Span

H = TypeVar("H", bound=Hashable)
P = TypeVar("P", bound=Hashable)

#: why a trace left the buffer
Closing = Literal["complete", "timeout", "overflow", "split"]


@dataclass
class _Open(Generic[H, P]):
    spans: list[Span] = field(default_factory=list)
    handles: set[H] = field(default_factory=set)
    partitions: set[P] = field(default_factory=set)
    size: int = 0
    first_seen: float = 0.0
    root_seen: float | None = None


@dataclass(frozen=True)
class ClosedTrace(Generic[H]):
    """A trace out of the buffer; hand it back to `TraceBuffer.release` once it is done."""

    trace_id: str
    spans: tuple[Span, ...]
    handles: frozenset[H]
    closing: Closing


@dataclass(frozen=True)
class Added(Generic[H]):
    """What `TraceBuffer.add` did with a message."""

    #: traces pushed out to make room (the oldest first)
    evicted: list[ClosedTrace[H]]
    #: spans of traces closed a moment ago (left out, counted)
    late_spans: int
    #: the message holds no span of an open trace: it can be finished at once
    unused: bool


class TraceBuffer(Generic[H, P]):
    """Spans held per trace until the trace is due; which messages each trace needs.

    ``H`` names a message (hashable: the caller's key for it), ``P`` the partition
    it came from. A trace is *due* ``grace`` seconds after its root span arrived, or
    ``timeout`` seconds after its first span did. Beyond ``max_traces`` traces or
    ``max_bytes`` of kept spans the oldest trace is closed with ``overflow``. A trace
    whose spans came from more than one partition closes with ``split`` (when due).
    A message stays *held* while an open or unreleased trace has a span in it.
    Time is passed in (``now``, seconds on a monotonic clock): the buffer reads no clock.
    """

    def __init__(
        self,
        *,
        grace: float,
        timeout: float,
        max_traces: int,
        max_bytes: int,
        remember: int | None = None,
    ) -> None:
        self.grace = grace
        self.timeout = timeout
        self.max_traces = max_traces
        self.max_bytes = max_bytes
        self._open: OrderedDict[str, _Open[H, P]] = OrderedDict()
        #: root arrivals in arrival order (grace is constant: deadlines come in order)
        self._roots: deque[tuple[float, str]] = deque()
        #: per message, how many traces (open or out but unreleased) need it
        self._refs: dict[H, int] = {}
        self._partition_of: dict[H, P] = {}
        #: trace ids closed lately: a span arriving after its trace closed is late
        self._closed: OrderedDict[str, None] = OrderedDict()
        self._remember = remember if remember is not None else 4 * max_traces
        self.bytes = 0

    def __len__(self) -> int:
        return len(self._open)

    def add(self, spans: Iterable[Span], handle: H, partition: P, now: float) -> Added[H]:
        late = 0
        touched: set[str] = set()
        for span in spans:
            trace_id = span.trace_id
            if trace_id in self._closed:
                late += 1
                continue
            state = self._open.get(trace_id)
            if state is None:
                state = self._open[trace_id] = _Open(first_seen=now)
            state.spans.append(span)
            state.size += span.size
            self.bytes += span.size
            state.partitions.add(partition)
            if trace_id not in touched:
                touched.add(trace_id)
                if handle not in state.handles:
                    state.handles.add(handle)
                    self._refs[handle] = self._refs.get(handle, 0) + 1
            if span.is_root and state.root_seen is None:
                state.root_seen = now
                self._roots.append((now + self.grace, trace_id))
        if handle in self._refs:
            self._partition_of[handle] = partition
        evicted: list[ClosedTrace[H]] = []
        while self._open and (len(self._open) > self.max_traces or self.bytes > self.max_bytes):
            oldest = next(iter(self._open))
            evicted.append(self._close(oldest, "overflow"))
        return Added(evicted, late, unused=handle not in self._refs)

    def due(self, now: float) -> list[ClosedTrace[H]]:
        """Traces whose root arrived ``grace`` ago, then those open for ``timeout``."""
        out: list[ClosedTrace[H]] = []
        while self._roots and self._roots[0][0] <= now:
            _, trace_id = self._roots.popleft()
            state = self._open.get(trace_id)
            if state is not None:
                split = len(state.partitions) > 1
                out.append(self._close(trace_id, "split" if split else "complete"))
        while self._open:
            trace_id, state = next(iter(self._open.items()))
            if state.first_seen + self.timeout > now:
                break
            out.append(self._close(trace_id, "split" if len(state.partitions) > 1 else "timeout"))
        return out

    def release(self, trace: ClosedTrace[H]) -> list[H]:
        """``trace`` is done: the messages no trace needs any more."""
        free: list[H] = []
        for handle in trace.handles:
            count = self._refs.get(handle)
            if count is None:
                continue  # discarded with its partition
            if count <= 1:
                del self._refs[handle]
                self._partition_of.pop(handle, None)
                free.append(handle)
            else:
                self._refs[handle] = count - 1
        return free

    def discard(self, partition: P) -> int:
        """Forget every open trace and message of ``partition`` (revoked: it will be re-read)."""
        gone = [t for t, s in self._open.items() if partition in s.partitions]
        for trace_id in gone:
            state = self._open.pop(trace_id)
            self.bytes -= state.size
        for handle in [h for h, p in self._partition_of.items() if p == partition]:
            self._refs.pop(handle, None)
            del self._partition_of[handle]
        self._closed.clear()  # a re-read of the partition brings these traces again
        return len(gone)

    def close_oldest(self) -> ClosedTrace[H] | None:
        """Close the oldest open trace early (``overflow``); None when none is open."""
        if not self._open:
            return None
        return self._close(next(iter(self._open)), "overflow")

    def held_total(self) -> int:
        """Messages needed by a trace that is still open, over every partition."""
        needed: set[H] = set()
        for state in self._open.values():
            needed.update(state.handles)
        return len(needed)

    def held(self, partition: P) -> int:
        """Messages of ``partition`` needed by a trace that is still open."""
        needed: set[H] = set()
        for state in self._open.values():
            if partition in state.partitions:
                needed.update(h for h in state.handles if self._partition_of.get(h) == partition)
        return len(needed)

    def _close(self, trace_id: str, closing: Closing) -> ClosedTrace[H]:
        state = self._open.pop(trace_id)
        self.bytes -= state.size
        self._closed[trace_id] = None
        while len(self._closed) > self._remember:
            self._closed.popitem(last=False)
        return ClosedTrace(trace_id, tuple(state.spans), frozenset(state.handles), closing)
