from __future__ import annotations

import json
import random

import pytest

from monitor.config import SampleRule
from monitor.records import Interaction
from monitor.sampling import Sampler, unit_hash


def _interaction(i: int, **metadata: str) -> Interaction:
    return Interaction(
        id=f"id-{i}", user_input="q", retrieved_contexts=(), response="a", metadata=metadata
    )


def _raw(i: int, **metadata: str) -> bytes:
    body = {"id": f"id-{i}", "user_input": "q", "retrieved_contexts": [], "response": "a"}
    return json.dumps({**body, "metadata": metadata}).encode()


def test_hash_is_stable_and_in_unit_interval() -> None:
    assert unit_hash(b"abc") == unit_hash(b"abc")
    assert unit_hash(b"abc") != unit_hash(b"abd")
    # a fixed value: the decision must agree across machines and releases
    assert unit_hash(b"rec-1") == pytest.approx(unit_hash(b"rec-1"))
    values = [unit_hash(str(i).encode()) for i in range(20_000)]
    assert all(0.0 <= v < 1.0 for v in values)
    assert sum(values) / len(values) == pytest.approx(0.5, abs=0.01)


@pytest.mark.parametrize("rate", [0.0, 0.01, 0.2, 0.5, 1.0])
def test_kept_fraction_matches_rate_and_is_deterministic(rate: float) -> None:
    sampler = Sampler(rate)
    kept = 0
    n = 20_000
    for i in range(n):
        key = f"key-{i}".encode()
        first = sampler.precheck(key, None)
        again = Sampler(rate).precheck(key, None)  # another replica, a redelivery
        assert first == again
        if not first.drop and sampler.admit(_interaction(i), first.u) is not None:
            kept += 1
    assert kept / n == pytest.approx(rate, abs=0.01)


def test_rule_rate_is_the_inclusion_probability() -> None:
    sampler = Sampler(0.1, [SampleRule(match={"feedback": "negative"}, rate=1.0),
                            SampleRule(match={"route": "search"}, rate=0.2)])  # fmt: skip
    assert sampler.admit(_interaction(1, feedback="negative")) == 1.0
    probabilities = {sampler.admit(_interaction(i, route="search"), None) for i in range(2000)} - {
        None
    }
    assert probabilities == {0.2}
    assert sampler.rate_for({"route": "chat"}) == 0.1
    assert sampler.rate_for({"route": "search"}, scale=0.5) == 0.1


def test_precheck_never_drops_a_record_a_rule_would_keep() -> None:
    rules = [SampleRule(match={"feedback": "negative"}, rate=1.0)]
    sampler = Sampler(0.05, rules)
    rng = random.Random(7)
    dropped_unparsed = 0
    for i in range(5000):
        metadata = {"feedback": rng.choice(["negative", "positive"])}
        raw = _raw(i, **metadata)
        if rng.random() < 0.1:  # the same string written with a \\u escape
            raw = raw.replace(b"negative", b"\\u006eegative")
        key = f"k{i}".encode()
        pre = sampler.precheck(key, raw)
        parsed = Interaction.model_validate_json(raw)
        exact = sampler.admit(parsed, pre.u)
        if pre.drop:
            dropped_unparsed += 1
            assert exact is None, (raw, metadata)
        if parsed.metadata["feedback"] == "negative":
            assert exact == 1.0
    assert dropped_unparsed > 1500  # most positive-feedback records are never parsed


def test_no_key_hashes_the_id() -> None:
    sampler = Sampler(0.5)
    pre = sampler.precheck(None, b"{}")
    assert pre.u is None and not pre.drop
    kept = sampler.admit(_interaction(3))
    assert (kept is not None) == (unit_hash(b"id-3") < 0.5)


class _Boost:
    def ceiling(self, rate: float) -> float:
        return min(1.0, rate * 4)

    def adjust(self, interaction: Interaction, rate: float) -> float:
        return min(1.0, rate * 4) if interaction.metadata.get("risky") == "yes" else rate


def test_adjuster_hook_raises_rates_exactly() -> None:
    sampler = Sampler(0.1, adjuster=_Boost())
    risky = [sampler.admit(_interaction(i, risky="yes")) for i in range(4000)]
    kept = [p for p in risky if p is not None]
    assert all(p == pytest.approx(0.4) for p in kept)
    assert len(kept) / len(risky) == pytest.approx(0.4, abs=0.03)


def test_invalid_rate_is_rejected() -> None:
    with pytest.raises(ValueError):
        Sampler(1.5)


class _Recalibrating:
    """An adjuster whose ceiling rises between the precheck and the admit step."""

    def __init__(self) -> None:
        self.level = 0.2

    def ceiling(self, rate: float) -> float:
        return self.level

    def adjust(self, interaction: Interaction, rate: float) -> float:
        return self.level


def test_stamped_probability_never_exceeds_the_precheck_ceiling() -> None:
    adjuster = _Recalibrating()
    sampler = Sampler(0.1, adjuster=adjuster)
    stamped = []
    for i in range(3000):
        key = f"rec-{i}".encode()
        pre = sampler.precheck(key, None)
        adjuster.level = 0.6  # recalibrated after the precheck
        if not pre.drop:
            p = sampler.admit(_interaction(i), pre.u, 1.0, pre.ceiling)
            if p is not None:
                stamped.append(p)
        adjuster.level = 0.2
    # the real inclusion probability is 0.2 (the precheck dropped u >= 0.2): stamp exactly that
    assert stamped and set(stamped) == {0.2}
    assert len(stamped) / 3000 == pytest.approx(0.2, abs=0.03)


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
    assert adjuster.adjust(invented, 0.1) > adjuster.adjust(supported, 0.1)
