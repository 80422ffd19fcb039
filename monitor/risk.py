"""Risk-based sampling: the LLM judge spent on the records the local judge finds suspicious.

The maths (`inclusion_probability`, `solve_scale`, `RiskCalibrator`) is pure; `RiskScreen`
runs the local judge's screen off the event loop, on what it can keep up with.
See docs/design.md, "The cascade".
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import structlog

from monitor.records import Interaction
from monitor.sampling import Screened

if TYPE_CHECKING:
    from monitor.config import Settings
    from monitor.judges.local.judge import LocalJudge

log = structlog.get_logger("monitor.risk")

#: Defaults: ε (risk added to every record) and the smallest share of the rate any record gets.
EPSILON = 0.05
FLOOR_SHARE = 0.1


def inclusion_probability(
    risk: float, scale: float, *, floor: float, epsilon: float = EPSILON
) -> float:
    """p(r) = min(1, max(floor, scale · (ε + r))), with ``risk`` clamped to [0, 1]."""
    r = min(1.0, max(0.0, risk)) if not math.isnan(risk) else 1.0
    return min(1.0, max(floor, scale * (epsilon + r)))


def solve_scale(
    risks: Sequence[float],
    rate: float,
    *,
    floor: float,
    epsilon: float = EPSILON,
    weights: Sequence[float] | None = None,
) -> float:
    """The ``c`` for which the (weighted) mean of p over ``risks`` equals ``rate``.

    Mean p grows monotonically with c, from ``floor`` (c = 0) to 1, so bisection
    finds it. Rates at or below the floor give c = 0 (everyone at the floor);
    a rate of 1 gives the c that puts every record at 1.
    """
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"rate {rate} is not within [0, 1]")
    if not risks:
        return rate / (epsilon + 0.5)
    w = list(weights) if weights is not None else [1.0] * len(risks)
    total = sum(w)
    if total <= 0:
        return rate / (epsilon + 0.5)

    def mean_p(c: float) -> float:
        return (
            sum(
                wi * inclusion_probability(r, c, floor=floor, epsilon=epsilon)
                for r, wi in zip(risks, w, strict=True)
            )
            / total
        )

    if rate <= floor:
        return 0.0
    high = 1.0 / epsilon
    if rate >= 1.0:
        return high
    low = 0.0
    for _ in range(60):
        mid = (low + high) / 2
        if mean_p(mid) < rate:
            low = mid
        else:
            high = mid
    return high


@dataclass
class RiskCalibrator:
    """Turns risks into inclusion probabilities whose mean tracks the target rate.

    ``floor_share``: every record gets at least ``floor_share × rate``.
    ``halflife``: after this many observations an old risk counts half.
    ``bins``: resolution of the risk histogram. The scale is re-solved every
    ``resolve_every`` observations (and whenever the rate changes).
    """

    epsilon: float = EPSILON
    floor_share: float = FLOOR_SHARE
    halflife: float = 5000.0
    bins: int = 50
    resolve_every: int = 100
    _counts: list[float] = field(init=False, repr=False)
    _since: int = field(default=0, init=False, repr=False)
    _scales: dict[float, float] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        if not 0.0 < self.floor_share <= 1.0:
            raise ValueError("floor_share must be within (0, 1]")
        if self.epsilon <= 0 or self.halflife <= 0 or self.bins < 2:
            raise ValueError("epsilon and halflife must be > 0, bins >= 2")
        self._counts = [0.0] * self.bins
        self._decay = 0.5 ** (1.0 / self.halflife)

    @property
    def observed(self) -> float:
        """The decayed number of observations behind the current histogram."""
        return sum(self._counts)

    def observe(self, risk: float) -> None:
        """Add one record's risk to the running distribution."""
        r = 1.0 if math.isnan(risk) else min(1.0, max(0.0, risk))
        if self._decay < 1.0:
            self._counts = [c * self._decay for c in self._counts]
        self._counts[min(self.bins - 1, int(r * self.bins))] += 1.0
        self._since += 1
        if self._since >= self.resolve_every:
            self._since = 0
            self._scales.clear()

    def floor(self, rate: float) -> float:
        return self.floor_share * rate

    def scale(self, rate: float) -> float:
        """The current ``c`` for ``rate`` (cached until the next re-solve)."""
        cached = self._scales.get(rate)
        if cached is None:
            centers = [self._center(i) for i in range(self.bins)]
            used = [(r, c) for r, c in zip(centers, self._counts, strict=True) if c > 0]
            cached = solve_scale(
                [r for r, _ in used],
                rate,
                floor=self.floor(rate),
                epsilon=self.epsilon,
                weights=[c for _, c in used],
            )
            self._scales[rate] = cached
        return cached

    def probability(self, risk: float, rate: float) -> float:
        """The inclusion probability of a record with ``risk`` when the target rate is ``rate``."""
        if rate <= 0.0:
            return 0.0
        return inclusion_probability(
            risk, self.scale(rate), floor=self.floor(rate), epsilon=self.epsilon
        )

    def ceiling(self, rate: float) -> float:
        """The highest probability any record can get at ``rate`` (that of risk 1)."""
        return self.probability(1.0, rate)

    def _center(self, i: int) -> float:
        return (i + 0.5) / self.bins


@dataclass
class RiskAdjuster:
    """`monitor.sampling.RateAdjuster` for risk-based sampling.

    ``screen`` maps an interaction to its risk in [0, 1] — e.g.
    ``lambda i: lexical_risk(judge.reader, i.context_texts, i.response)``
    (`monitor.judges.local.readings.lexical_risk`) with a
    `monitor.judges.local.judge.LocalJudge`. Each screened record is observed by the
    calibrator, then given its probability.
    """

    screen: Callable[[Interaction], float]
    calibrator: RiskCalibrator = field(default_factory=RiskCalibrator)

    def ceiling(self, rate: float) -> float:
        return self.calibrator.ceiling(rate)

    def adjust(self, interaction: Interaction, rate: float) -> float:
        risk = self.screen(interaction)
        self.calibrator.observe(risk)
        return self.calibrator.probability(risk, rate)


#: what a screen reads: one interaction → its hallucination risk in [0, 1]
ScreenFn = Callable[[Interaction], float]


def model_screen(judge: LocalJudge) -> ScreenFn:
    """The local judge's screen: the probability that the answer holds at least one
    unsupported claim (`LocalJudge.screen`), the support model run on every claim."""

    def screen(interaction: Interaction) -> float:
        return judge.screen(
            interaction.context_texts, interaction.response, interaction.user_input
        ).risk

    return screen


def lexical_screen(judge: LocalJudge) -> ScreenFn:
    """The cheap fallback: the claims' lexical gaps only (`readings.lexical_risk`), no
    model call."""
    from monitor.judges.local.readings import lexical_risk

    def screen(interaction: Interaction) -> float:
        return lexical_risk(
            judge.reader, interaction.context_texts, interaction.response, interaction.user_input
        )

    return screen


class RiskScreen:
    """The sidecar's `monitor.sampling.RateAdjuster`: the model screen in a worker thread.

    A record within reach of being kept (`monitor.sampling.Sampler.decide`) is screened
    when the screen has room (fewer than ``depth`` records in it): `adjust` answers with a
    future of its probability, which `monitor.sampling.Sampler.settle` awaits. When the
    screen is full the record is not screened and gets the base rate itself: the screen
    runs on the share of the traffic it keeps up with, and every record is stamped with
    the probability it was actually drawn with, so the weights 1/p stay exact either way.
    ``screened_share`` (``rag_monitor_risk_screened_share``) says which: the recent share
    of the records within reach that the screen read (1: it keeps up).

    ``threads`` bounds the CPU it takes (one thread: at most about one core).
    """

    #: how many recent records within reach the screened share is averaged over
    SHARE_WINDOW = 1000.0

    def __init__(
        self,
        screen: ScreenFn,
        *,
        calibrator: RiskCalibrator | None = None,
        threads: int = 1,
        depth: int | None = None,
        warm_up: Callable[[], object] | None = None,
        cut: Callable[[], float] | None = None,
    ) -> None:
        if threads < 1:
            raise ValueError("threads must be >= 1")
        self.screen = screen
        self.calibrator = calibrator if calibrator is not None else RiskCalibrator()
        self.threads = threads
        #: records in the screen at once (running and waiting): two per thread keep each
        #: thread busy without a queue that would hold records back
        self.depth = depth if depth is not None else 2 * threads
        #: loads what the screen reads (the local judge's models), at `start`
        self.warm_up = warm_up
        #: the local judge's cut, the risk at and above which it flags an answer: read when
        #: a record is first screened (it comes with the judge's models); None: no cut, so
        #: `Screened.flagged` stays unknown
        self.cut = cut
        self._executor: ThreadPoolExecutor | None = None
        self._in_screen = 0
        self._share = 1.0
        self._alpha = 1.0 / self.SHARE_WINDOW
        self.screened = 0
        self.unscreened = 0

    @property
    def screened_share(self) -> float:
        return self._share

    def ceiling(self, rate: float) -> float:
        return self.calibrator.ceiling(rate)

    def adjust(self, interaction: Interaction, rate: float) -> float | asyncio.Future[Screened]:
        """The record's probability: a future of it when the screen reads the record, the
        base rate ``rate`` when the screen is full (called in the event loop)."""
        if self._in_screen >= self.depth:
            self.unscreened += 1
            self._share -= self._alpha * self._share
            return rate
        self.screened += 1
        self._share += self._alpha * (1.0 - self._share)
        self._in_screen += 1
        return asyncio.ensure_future(self._probability(interaction, rate))

    async def _probability(self, interaction: Interaction, rate: float) -> Screened:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(self.threads, thread_name_prefix="risk-screen")
        loop = asyncio.get_running_loop()
        try:
            risk = await loop.run_in_executor(self._executor, self.screen, interaction)
        except Exception:  # a bug in the screen: the record keeps the base rate
            log.exception("risk screen failed")
            return Screened(rate)
        finally:
            self._in_screen -= 1
        self.calibrator.observe(risk)
        flagged = None if self.cut is None else risk >= self.cut()
        return Screened(self.calibrator.probability(risk, rate), risk, flagged)

    async def start(self) -> None:
        """Load the screen's models now (in a thread), not on the first record it reads."""
        if self.warm_up is not None:
            await asyncio.to_thread(self.warm_up)

    async def aclose(self) -> None:
        """Let the worker thread go (a running screen finishes)."""
        if self._executor is not None:
            self._executor.shutdown(wait=False)


def build_adjuster(settings: Settings, judge: LocalJudge | None = None) -> RiskScreen:
    """The sidecar's risk-based sampling hook (``RAG_MONITOR_RISK_SAMPLING``), screening with
    ``judge`` (the sidecar's own local judge where it has one; a new one otherwise) in
    ``RAG_MONITOR_RISK_SCREEN_THREADS`` threads."""
    if judge is None:
        from monitor.judges.local.judge import LocalJudge

        judge = LocalJudge()
    return RiskScreen(
        model_screen(judge),
        threads=settings.risk_screen_threads,
        warm_up=judge.warm_up,
        cut=lambda: judge.cut,
    )
