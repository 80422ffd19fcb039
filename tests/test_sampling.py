from __future__ import annotations

import pytest

from monitor.config import SampleRule
from monitor.records import Interaction
from monitor.sampling import BUDGET_THINNED, Decision, Sampler, unit_hash


def _interaction(i: int, **metadata: str) -> Interaction:
    return Interaction(
        id=f"id-{i}", user_input="q", retrieved_contexts=(), response="a", metadata=metadata
    )


def test_hash_is_stable_and_in_unit_interval() -> None:
    assert unit_hash(b"abc") == unit_hash(b"abc")
    assert unit_hash(b"abc") != unit_hash(b"abd")
    # a fixed value: the decision must agree across machines and releases
    assert unit_hash(b"rec-1") == pytest.approx(unit_hash(b"rec-1"))
    values = [unit_hash(str(i).encode()) for i in range(20_000)]
    assert all(0.0 <= v < 1.0 for v in values)
    assert sum(values) / len(values) == pytest.approx(0.5, abs=0.01)


class Fixed:
    """A throttle at a fixed scale that records what it was offered."""

    def __init__(self, scale: float) -> None:
        self.factor = scale
        self.offers: list[float] = []

    def scale(self) -> float:
        return self.factor

    def offered(self, weight: float) -> None:
        self.offers.append(weight)


def _decide(sampler: Sampler, interaction: Interaction, unit: bytes | None = None) -> Decision:
    """The sampler's decision on ``interaction``, as the pipeline asks it: by its id."""
    return sampler.decide(unit or interaction.id.encode(), interaction.metadata, interaction)


def _kept(decision: Decision) -> float | None:
    return decision.kept.probability if decision.kept is not None else None


@pytest.mark.parametrize("rate", [0.0, 0.01, 0.2, 0.5, 1.0])
def test_kept_fraction_matches_rate_and_is_deterministic(rate: float) -> None:
    sampler = Sampler(rate)
    kept = 0
    n = 20_000
    for i in range(n):
        key = f"key-{i}".encode()
        first = _decide(sampler, _interaction(i), unit=key)
        again = _decide(Sampler(rate), _interaction(i), unit=key)  # a replica, a redelivery
        assert first == again
        assert first.offered == rate and first.skipped is None
        if first.kept is not None:
            assert first.kept.probability == rate
            kept += 1
    assert kept / n == pytest.approx(rate, abs=0.01)


def test_rule_rate_is_the_inclusion_probability() -> None:
    sampler = Sampler(0.1, [SampleRule(match={"feedback": "negative"}, rate=1.0),
                            SampleRule(match={"route": "search"}, rate=0.2)])  # fmt: skip
    assert _kept(_decide(sampler, _interaction(1, feedback="negative"))) == 1.0
    decisions = [_decide(sampler, _interaction(i, route="search")) for i in range(2000)]
    assert {_kept(d) for d in decisions} - {None} == {0.2}
    assert {d.offered for d in decisions} == {0.2}
    assert sampler.rate_for({"route": "chat"}) == 0.1
    assert sampler.rate_for({"route": "search"}) == 0.2


def test_a_rule_keeps_every_match_and_the_rest_at_the_rate() -> None:
    sampler = Sampler(0.05, [SampleRule(match={"feedback": "negative"}, rate=1.0)])
    kept = []
    for i in range(4000):
        feedback = "negative" if i % 10 == 0 else "positive"
        record = _interaction(i, feedback=feedback)
        decision = sampler.decide(f"id-{i}".encode(), {"feedback": feedback}, record)
        if decision.kept is not None:
            kept.append(i)
            assert decision.kept.interaction is record
    assert {i for i in range(0, 4000, 10)} <= set(kept)  # every rule match, at rate 1
    positive = [i for i in kept if i % 10]
    assert len(positive) / 3600 == pytest.approx(0.05, abs=0.015)


def test_the_budget_thins_what_the_configured_rate_keeps_and_says_so() -> None:
    throttle = Fixed(0.5)
    sampler = Sampler(0.5, throttle=throttle)
    assert sampler.scaled_rate() == 0.25
    thinned = kept = 0
    for i in range(8000):
        u = unit_hash(f"id-{i}".encode())
        decision = _decide(sampler, _interaction(i))
        assert decision.offered == 0.5  # offered at the configured rate, whatever the scale
        if u < 0.25:
            assert _kept(decision) == 0.25
            kept += 1
        elif u < 0.5:  # the configured rate keeps it; the budget's scale dropped it
            assert decision.kept is None and decision.skipped == BUDGET_THINNED
            thinned += 1
        else:  # sampled out at the configured rate: not a skip
            assert decision.kept is None and decision.skipped is None
    assert kept / 8000 == pytest.approx(0.25, abs=0.02)
    assert thinned / 8000 == pytest.approx(0.25, abs=0.02)
    assert throttle.offers == [0.5] * 8000  # every record, at its rate before the scale


def test_the_throttle_is_offered_each_record_at_its_rules_rate() -> None:
    throttle = Fixed(1.0)
    sampler = Sampler(0.1, [SampleRule(match={"feedback": "negative"}, rate=0.8)],
                      throttle=throttle)  # fmt: skip
    _decide(sampler, _interaction(1, feedback="negative"))
    _decide(sampler, _interaction(2))
    assert throttle.offers[:2] == [0.8, 0.1]
    assert Sampler(0.3).scaled_rate() == 0.3  # without a throttle the rate is unscaled


def test_an_unread_record_is_decided_on_its_unit() -> None:
    sampler = Sampler(0.3)
    units = [f"trace-{i}".encode() for i in range(3000)]
    unread = [u for u in units if sampler.drops_unread(u)]
    assert unread == [u for u in units if unit_hash(u) >= 0.3]
    for unit in unread:  # whatever the budget's scale
        for scale in (1.0, 0.4):
            scaled = Sampler(0.3, throttle=Fixed(scale))
            assert scaled.decide(unit, None, None) == Decision(offered=0.3)
    kept = next(u for u in units if not sampler.drops_unread(u))
    with pytest.raises(ValueError, match="left unread"):
        sampler.decide(kept, None, None)
    # with rules or a risk adjuster a record's rate depends on what it holds: read them all
    assert not any(Sampler(0.3, [SampleRule(match={"a": "b"}, rate=0.9)]).drops_unread(u)
                   for u in units)  # fmt: skip
    assert not any(Sampler(0.3, adjuster=_Boost()).drops_unread(u) for u in units)


class _Boost:
    def ceiling(self, rate: float) -> float:
        return min(1.0, rate * 4)

    def adjust(self, interaction: Interaction, rate: float) -> float:
        return min(1.0, rate * 4) if interaction.metadata.get("risky") == "yes" else rate


def test_adjuster_hook_raises_rates_exactly() -> None:
    sampler = Sampler(0.1, adjuster=_Boost())
    risky = [_kept(_decide(sampler, _interaction(i, risky="yes"))) for i in range(4000)]
    kept = [p for p in risky if p is not None]
    assert all(p == pytest.approx(0.4) for p in kept)
    assert len(kept) / len(risky) == pytest.approx(0.4, abs=0.03)


def test_invalid_rate_is_rejected() -> None:
    with pytest.raises(ValueError):
        Sampler(1.5)


class _Recalibrating:
    """An adjuster that recalibrates upwards while it screens: its answer exceeds the
    ceiling the drop was decided with."""

    def ceiling(self, rate: float) -> float:
        return 0.2

    def adjust(self, interaction: Interaction, rate: float) -> float:
        return 0.6


def test_stamped_probability_never_exceeds_the_ceiling_the_drop_used() -> None:
    sampler = Sampler(0.1, adjuster=_Recalibrating())
    stamped = [_kept(_decide(sampler, _interaction(i))) for i in range(3000)]
    kept = [p for p in stamped if p is not None]
    # the real inclusion probability is 0.2 (u >= 0.2 was dropped unbuilt): stamp exactly that
    assert kept and set(kept) == {0.2}
    assert len(kept) / 3000 == pytest.approx(0.2, abs=0.03)


def test_risk_adjuster_from_settings_prefers_invented_numbers() -> None:
    from monitor.config import Settings
    from monitor.risk import build_adjuster

    adjuster = build_adjuster(Settings(risk_sampling=True))
    context = "Receipts are required for expenses over $100."
    supported = Interaction(
        id="a",
        user_input="q",
        retrieved_contexts=[context],
        response="Receipts are required for expenses over $100.",
    )
    invented = Interaction(
        id="b",
        user_input="q",
        retrieved_contexts=[context],
        response="Receipts are required for expenses over $700.",
    )
    # the screen is the local judge's answer probability, read off the event loop
    assert adjuster.screen(invented) > adjuster.screen(supported)
