"""Risk-based sampling: probabilities, calibration, and unbiased weighted estimates."""

from __future__ import annotations

import asyncio
import math
import random
import statistics
import threading
import time

import pytest

from monitor.config import Settings
from monitor.kafka.topics import committed_offsets
from monitor.records import Interaction
from monitor.risk import (
    RiskAdjuster,
    RiskCalibrator,
    RiskScreen,
    inclusion_probability,
    solve_scale,
)
from monitor.sampling import RateAdjuster, Sampler, Screened, unit_hash
from tests.fixtures.kafka import Topic, monitor_settings
from tests.support.embedded import Broker
from tests.support.judge_server import RecordingJudge
from tests.support.logs import captured_logs
from tests.support.records import validate_record
from tests.support.waits import wait_until


def test_inclusion_probability_is_clipped_between_floor_and_one() -> None:
    assert inclusion_probability(0.0, 2.0, floor=0.01, epsilon=0.05) == pytest.approx(0.1)
    assert inclusion_probability(0.5, 2.0, floor=0.01, epsilon=0.05) == pytest.approx(1.0)
    assert inclusion_probability(0.0, 0.0, floor=0.01) == 0.01
    assert inclusion_probability(7.0, 0.5, floor=0.01, epsilon=0.0) == 0.5  # risk clamped to 1
    assert inclusion_probability(math.nan, 0.5, floor=0.01, epsilon=0.0) == 0.5  # NaN = risky


@pytest.mark.parametrize("rate", [0.01, 0.05, 0.2, 0.5, 0.9])
def test_solved_scale_gives_the_target_mean(rate: float) -> None:
    rng = random.Random(3)
    risks = [rng.betavariate(0.5, 3) for _ in range(2000)]
    floor = 0.1 * rate
    scale = solve_scale(risks, rate, floor=floor)
    mean = statistics.fmean(inclusion_probability(r, scale, floor=floor) for r in risks)
    assert mean == pytest.approx(rate, rel=1e-6)
    assert min(inclusion_probability(r, scale, floor=floor) for r in risks) >= floor > 0


def test_solve_scale_edges() -> None:
    assert solve_scale([0.2, 0.4], 0.001, floor=0.01) == 0.0  # everyone at the floor
    scale = solve_scale([0.2, 0.4], 1.0, floor=0.1)
    assert all(inclusion_probability(r, scale, floor=0.1) == 1.0 for r in (0.0, 0.2, 0.4))
    with pytest.raises(ValueError):
        solve_scale([0.2], 1.5, floor=0.1)


def test_calibrator_tracks_the_rate_and_never_gives_zero() -> None:
    rng = random.Random(5)
    calibrator = RiskCalibrator(resolve_every=50)
    probabilities = []
    for _ in range(5000):
        risk = rng.betavariate(0.5, 3)
        calibrator.observe(risk)
        probabilities.append((risk, calibrator.probability(risk, 0.1)))
    tail = [p for _, p in probabilities[-2000:]]
    assert statistics.fmean(tail) == pytest.approx(0.1, rel=0.1)
    assert min(tail) >= 0.01 > 0  # floor = 0.1 × rate
    assert calibrator.ceiling(0.1) == calibrator.probability(1.0, 0.1)
    assert calibrator.ceiling(0.1) >= max(tail)
    assert calibrator.probability(0.5, 0.0) == 0.0


def test_calibrator_adapts_when_risk_shifts() -> None:
    calibrator = RiskCalibrator(halflife=500, resolve_every=10)
    for _ in range(3000):
        calibrator.observe(0.05)
    low_traffic = calibrator.probability(0.5, 0.1)
    for _ in range(3000):
        calibrator.observe(0.6)  # a hallucination spike: everything looks risky
    assert calibrator.probability(0.5, 0.1) < low_traffic
    # the new traffic, all at risk 0.6, is kept at the target rate again
    assert calibrator.probability(0.6, 0.1) == pytest.approx(0.1, rel=0.05)


def horvitz_thompson(values: list[float], probabilities: list[float]) -> float:
    """Σ y/p over the sampled records: an unbiased estimate of the population total Σ y."""
    return sum(y / p for y, p in zip(values, probabilities, strict=True))


def _population(n: int, rate: float, seed: int) -> tuple[list[float], list[float]]:
    """True hallucination labels and an informative but noisy risk screen."""
    rng = random.Random(seed)
    ys, risks = [], []
    for _ in range(n):
        y = 1.0 if rng.random() < rate else 0.0
        risk = min(1.0, max(0.0, rng.gauss(0.65 if y else 0.2, 0.2)))
        ys.append(y)
        risks.append(risk)
    return ys, risks


def test_weighted_estimate_is_unbiased_and_beats_uniform_at_the_same_budget() -> None:
    n, true_rate, rate, seeds = 2000, 0.08, 0.1, 300
    ys, risks = _population(n, true_rate, seed=1)
    truth = sum(ys) / n
    floor = 0.1 * rate
    scale = solve_scale(risks, rate, floor=floor)
    p_risk = [inclusion_probability(r, scale, floor=floor) for r in risks]
    assert statistics.fmean(p_risk) == pytest.approx(rate, rel=1e-6)  # same expected budget
    assert min(p_risk) > 0

    estimates: dict[str, list[float]] = {"uniform": [], "risk": []}
    sizes: dict[str, list[int]] = {"uniform": [], "risk": []}
    shares: dict[str, list[float]] = {"uniform": [], "risk": []}
    for seed in range(seeds):
        u = [unit_hash(f"{seed}/{k}".encode()) for k in range(n)]
        for name, ps in (("uniform", [rate] * n), ("risk", p_risk)):
            kept = [k for k in range(n) if u[k] < ps[k]]
            estimates[name].append(
                horvitz_thompson([ys[k] for k in kept], [ps[k] for k in kept]) / n
            )
            sizes[name].append(len(kept))
            shares[name].append(sum(ys[k] for k in kept) / len(kept))

    for name in ("uniform", "risk"):
        mean = statistics.fmean(estimates[name])
        se = statistics.stdev(estimates[name]) / math.sqrt(seeds)
        assert abs(mean - truth) < 3 * se, (name, mean, truth, se)
        assert statistics.fmean(sizes[name]) == pytest.approx(rate * n, rel=0.02)
    var_uniform = statistics.variance(estimates["uniform"])
    var_risk = statistics.variance(estimates["risk"])
    # an informative screen lowers the variance and fills the sample with hallucinations
    assert var_risk < 0.7 * var_uniform, (var_risk, var_uniform)
    assert statistics.fmean(shares["risk"]) > 2 * statistics.fmean(shares["uniform"])


def test_an_uninformative_screen_stays_unbiased() -> None:
    n, rate, seeds = 1500, 0.1, 200
    ys, _ = _population(n, 0.1, seed=2)
    rng = random.Random(9)
    risks = [rng.random() for _ in range(n)]  # says nothing about y
    scale = solve_scale(risks, rate, floor=0.01)
    ps = [inclusion_probability(r, scale, floor=0.01) for r in risks]
    estimates = []
    for seed in range(seeds):
        kept = [k for k in range(n) if unit_hash(f"x{seed}/{k}".encode()) < ps[k]]
        estimates.append(horvitz_thompson([ys[k] for k in kept], [ps[k] for k in kept]) / n)
    se = statistics.stdev(estimates) / math.sqrt(seeds)
    assert abs(statistics.fmean(estimates) - sum(ys) / n) < 3 * se


def _interaction(response: str) -> Interaction:
    return validate_record(
        {"id": "x", "user_input": "q", "retrieved_contexts": ["c"], "response": response}
    )


def test_adjuster_is_a_rate_adjuster_and_is_deterministic() -> None:
    adjuster = RiskAdjuster(screen=lambda i: 1.0 if "$" in i.response else 0.0)
    as_protocol: RateAdjuster = adjuster
    for _ in range(200):
        as_protocol.adjust(_interaction("fine"), 0.1)
    risky = adjuster.adjust(_interaction("costs $5"), 0.1)
    safe = adjuster.adjust(_interaction("fine"), 0.1)
    assert risky > safe > 0
    assert adjuster.ceiling(0.1) >= risky
    twin = RiskAdjuster(screen=lambda i: 1.0 if "$" in i.response else 0.0)
    for _ in range(200):
        twin.adjust(_interaction("fine"), 0.1)
    assert twin.adjust(_interaction("costs $5"), 0.1) == risky


# --- the screen off the event loop (`RiskScreen`), and through the sidecar with a real broker


async def test_screen_answers_with_a_future_and_draws_at_the_base_rate_when_full() -> None:
    release = threading.Event()

    def slow(interaction: Interaction) -> float:
        release.wait(10)
        return 1.0 if "$" in interaction.response else 0.0

    screen = RiskScreen(slow, depth=2)
    first = screen.adjust(_interaction("costs $5"), 0.1)
    second = screen.adjust(_interaction("fine"), 0.1)
    assert isinstance(first, asyncio.Future) and isinstance(second, asyncio.Future)
    # full: the third is not screened and keeps the base rate, without waiting
    assert screen.adjust(_interaction("costs $7"), 0.1) == 0.1
    assert screen.screened == 2 and screen.unscreened == 1
    assert screen.screened_share < 1.0
    release.set()
    risky, safe = await first, await second
    assert (risky.risk, safe.risk) == (1.0, 0.0)  # the screen's own reading travels along
    assert risky.probability > safe.probability > 0
    assert risky.probability <= screen.ceiling(0.1)
    assert screen.calibrator.observed == pytest.approx(2.0, rel=0.01)
    again = screen.adjust(_interaction("fine"), 0.1)  # room again
    assert isinstance(again, asyncio.Future) and (await again).probability > 0
    await screen.aclose()


async def test_a_failing_screen_leaves_the_base_rate_and_frees_its_place() -> None:
    def broken(interaction: Interaction) -> float:
        raise RuntimeError("boom")

    screen = RiskScreen(broken, depth=1)
    with captured_logs() as logs:
        for _ in range(3):
            future = screen.adjust(_interaction("x"), 0.2)
            assert isinstance(future, asyncio.Future)
            assert await future == Screened(0.2, None)  # not screened: no risk
    assert any(e["event"] == "risk screen failed" for e in logs)
    await screen.aclose()


async def test_settle_keeps_what_the_screen_draws_and_never_above_the_ceiling() -> None:
    screen = RiskScreen(lambda i: 1.0 if "$" in i.response else 0.05, depth=10_000)
    sampler = Sampler(0.1, adjuster=screen)
    kept: dict[str, float] = {}
    for k in range(3000):
        risky = k % 10 == 0
        record = _interaction("costs $5" if risky else "fine").model_copy(update={"id": f"r{k}"})
        decision = sampler.decide(f"r{k}".encode(), {}, record)
        if decision.screening is not None:
            ceiling = decision.screening.ceiling
            decision = await Sampler.settle(decision)
            if decision.kept is not None:
                assert decision.kept.probability <= ceiling
                assert decision.kept.risk == (1.0 if k % 10 == 0 else 0.05)
        assert decision.screening is None
        if decision.kept is not None:
            kept[decision.kept.interaction.id] = decision.kept.probability
    risky_kept = [k for k in kept if int(k[1:]) % 10 == 0]
    # a tenth of the records are risky; risk sampling fills the sample with them
    assert len(risky_kept) / len(kept) > 0.3
    assert len(kept) / 3000 == pytest.approx(0.1, rel=0.25)
    await screen.aclose()


def test_the_local_probability_joins_an_llm_verdict_and_never_replaces_one() -> None:
    from monitor.metrics.faithfulness import HALLUCINATION_PROBABILITY
    from monitor.pipeline import local_probability
    from monitor.records import MetricResult, ScoredRecord

    llm = ScoredRecord(
        interaction=_interaction("x"),
        results={"faithfulness": MetricResult(metric="faithfulness", score=0.5)},
    )
    local_probability(llm, 0.8123456789)
    assert llm.results["faithfulness"].details[HALLUCINATION_PROBABILITY] == 0.812346
    own = {HALLUCINATION_PROBABILITY: 0.3}  # the local judge scored it: its own stays
    scored = ScoredRecord(
        interaction=_interaction("x"),
        results={"faithfulness": MetricResult(metric="faithfulness", score=1.0, details=own)},
    )
    local_probability(scored, 0.9)
    assert scored.results["faithfulness"].details[HALLUCINATION_PROBABILITY] == 0.3
    unscored = ScoredRecord(interaction=_interaction("x"))
    local_probability(unscored, 0.9)  # no faithfulness asked for: nothing to add it to
    assert unscored.results == {}


def test_the_local_flag_joins_an_llm_verdict_and_never_a_local_judges_own() -> None:
    from monitor.metrics.faithfulness import HALLUCINATION_PROBABILITY, LOCAL_FLAGGED
    from monitor.pipeline import local_probability
    from monitor.records import MetricResult, ScoredRecord

    llm = ScoredRecord(
        interaction=_interaction("x"),
        results={"faithfulness": MetricResult(metric="faithfulness", score=0.5)},
    )
    local_probability(llm, 0.93, True)
    assert llm.results["faithfulness"].details == {
        HALLUCINATION_PROBABILITY: 0.93,
        LOCAL_FLAGGED: True,
    }
    unknown = ScoredRecord(
        interaction=_interaction("x"),
        results={"faithfulness": MetricResult(metric="faithfulness", score=0.5)},
    )
    local_probability(unknown, 0.4)  # a screen without a cut: the flag stays unknown
    assert LOCAL_FLAGGED not in unknown.results["faithfulness"].details
    own = {HALLUCINATION_PROBABILITY: 0.3}  # the local judge scored it: its flag is its reason
    scored = ScoredRecord(
        interaction=_interaction("x"),
        results={"faithfulness": MetricResult(metric="faithfulness", score=1.0, details=own)},
    )
    local_probability(scored, 0.9, True)
    assert scored.results["faithfulness"].details == {HALLUCINATION_PROBABILITY: 0.3}


async def test_the_pipeline_writes_the_screens_flag_beside_an_llm_verdict() -> None:
    from typing import Any, cast

    from monitor.metrics.faithfulness import HALLUCINATION_PROBABILITY, LOCAL_FLAGGED
    from monitor.pipeline import Pipeline
    from monitor.records import MetricResult, ScoredRecord
    from monitor.sampling import Kept
    from monitor.sources import SourceRecord
    from monitor.telemetry import Exporter

    class LlmScorer:
        async def score(self, interaction: Interaction) -> ScoredRecord:
            result = MetricResult(metric="faithfulness", score=0.5, judge="llm")
            return ScoredRecord(interaction=interaction, results={"faithfulness": result})

    pipeline = Pipeline(cast(Any, object()), Sampler(1.0), LlmScorer(), [], Exporter(), Settings())
    record = SourceRecord("t", 0, 0, b"k", b"{}", 0, 0)
    await pipeline._handle(record, Kept(_interaction("costs $5"), 0.4, 0.9, True))
    [pending] = pipeline.pending
    assert pending.scored.inclusion_probability == 0.4
    assert pending.scored.results["faithfulness"].details == {
        HALLUCINATION_PROBABILITY: 0.9,
        LOCAL_FLAGGED: True,
    }


async def test_the_screen_says_whether_the_risk_reaches_the_local_cut() -> None:
    screen = RiskScreen(lambda i: 0.9 if "$" in i.response else 0.2, depth=10, cut=lambda: 0.851)
    risky, safe = (
        screen.adjust(_interaction("costs $5"), 0.1),
        screen.adjust(_interaction("ok"), 0.1),
    )
    assert isinstance(risky, asyncio.Future) and isinstance(safe, asyncio.Future)
    assert ((await risky).flagged, (await safe).flagged) == (True, False)
    uncut = RiskScreen(lambda i: 0.9, depth=10)  # no cut: not known
    future = uncut.adjust(_interaction("costs $5"), 0.1)
    assert isinstance(future, asyncio.Future) and (await future).flagged is None
    # the sampler hands the flag on with the kept record
    sampler = Sampler(1.0, adjuster=screen)
    decision = sampler.decide(b"k", {}, _interaction("costs $5"))
    kept = (await sampler.settle(decision)).kept
    assert kept is not None and (kept.risk, kept.flagged) == (0.9, True)
    await screen.aclose()
    await uncut.aclose()


def test_the_sidecar_screens_with_its_own_local_judge() -> None:
    from monitor.app import build
    from monitor.judges.local.judge import LocalJudge

    settings = Settings(risk_sampling=True, kafka_topic="t", metrics_port=0, judge_base_url=None)
    parts = build(settings)
    screen = parts.sampler.adjuster
    assert isinstance(screen, RiskScreen) and isinstance(parts.judge, LocalJudge)
    context = "Receipts are required for expenses over $100."
    supported = Interaction(id="a", user_input="q", retrieved_contexts=[context], response=context)
    invented = supported.model_copy(
        update={"response": "Receipts are required for expenses over $700."}
    )
    read = parts.judge.support_model.pairs
    assert screen.screen(invented) > screen.screen(supported)
    # the screen is the app's judge, not a second one: its model read the pairs
    assert parts.judge.support_model.pairs > read
    assert screen.cut is not None and screen.cut() == parts.judge.cut  # its flag's cut
    assert parts.judge.support_model is not None  # the models loaded once, by the judge
    assert "the risk screen" in [s.name for s in parts.services]
    text = parts.exporter.registry.get_sample_value("rag_monitor_risk_screened_share")
    assert text == 1.0


class _SlowScreen:
    """A screen that holds the first record it reads until released, and takes 20 ms for
    every other."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.held: str | None = None
        self._lock = threading.Lock()

    def __call__(self, interaction: Interaction) -> float:
        with self._lock:
            first = self.held is None
            if first:
                self.held = interaction.id
        if first:
            self.release.wait(30)
        else:
            time.sleep(0.02)
        return 0.9 if "never" in interaction.response else 0.1


@pytest.mark.kafka
async def test_a_slow_screen_neither_stalls_consumption_nor_passes_the_commit_order(
    broker: Broker, topic: Topic, recording_judge: RecordingJudge
) -> None:
    from monitor.app import build, serve
    from tests.test_pipeline import records, settled, value

    n, rate = 400, 0.5
    settings = monitor_settings(
        broker, topic, recording_judge, sample_rate=rate, risk_sampling=True, risk_screen_threads=2
    )
    await records(topic, range(n), supported=lambda i: i % 5 != 0)
    parts = build(settings)
    screen = parts.sampler.adjuster
    assert isinstance(screen, RiskScreen)
    slow = _SlowScreen()
    screen.screen = slow
    release = slow.release
    stop = asyncio.Event()
    task = asyncio.create_task(serve(settings, stop, parts))
    try:
        # every record read while the screen holds one: nothing waits for it but its own
        # partition's offsets (40 ms of screen per record would take 8 s for all of them)
        consumed = "rag_monitor_records_consumed_total"
        await wait_until(lambda: value(parts, consumed, topic=topic.name) >= n, 30, "consumed")
        await wait_until(lambda: parts.source.in_flight == 1, 30, "all but the held one finish")
        assert slow.held is not None
        positions = await committed_offsets(topic.bootstrap, topic.group, topic.name, 4)
        assert sum(p or 0 for p in positions.values()) < n  # its partition waits for it
        assert screen.unscreened > 0
        shared = parts.exporter.registry.get_sample_value("rag_monitor_risk_screened_share")
        assert shared is not None and shared < 1.0
        release.set()
        await wait_until(settled(parts, topic, n), 30, "all records finished")
    finally:
        release.set()
        stop.set()
        assert await asyncio.wait_for(task, 30) == 0
    positions = await committed_offsets(topic.bootstrap, topic.group, topic.name, 4)
    assert sum(p or 0 for p in positions.values()) == n
    sampled = value(parts, "rag_monitor_records_sampled_total")
    assert (
        sampled == value(parts, "rag_monitor_records_scored_total") == len(recording_judge.scored)
    )
    assert 0 < sampled < n


@pytest.mark.kafka
async def test_the_real_screen_runs_beside_an_llm_judge_and_every_record_finishes(
    broker: Broker, topic: Topic, recording_judge: RecordingJudge
) -> None:
    from monitor.app import build, serve
    from tests.test_pipeline import records, settled, value

    n = 60
    settings = monitor_settings(broker, topic, recording_judge, sample_rate=0.3, risk_sampling=True)
    await records(topic, range(n), supported=lambda i: i % 3 != 0)
    parts = build(settings)
    screen = parts.sampler.adjuster
    assert isinstance(screen, RiskScreen)
    stop = asyncio.Event()
    task = asyncio.create_task(serve(settings, stop, parts))
    try:
        await wait_until(settled(parts, topic, n), 60, "all records finished")
    finally:
        stop.set()
        assert await asyncio.wait_for(task, 30) == 0
    # the local judge's models were loaded at start and read at least one record
    assert screen.screened >= 1 and screen.calibrator.observed > 0
    positions = await committed_offsets(topic.bootstrap, topic.group, topic.name, 4)
    assert sum(p or 0 for p in positions.values()) == n
    sampled = value(parts, "rag_monitor_records_sampled_total")
    assert 0 < sampled == value(parts, "rag_monitor_records_scored_total")
