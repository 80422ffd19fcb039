"""Which records get scored: `Sampler`, a deterministic hash-based decision per record. No I/O.

See docs/design.md, "Budget and sampling".
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from monitor.config import SampleRule
from monitor.records import Interaction

_HASH_SPACE = float(1 << 64)


def unit_hash(unit: bytes) -> float:
    """A stable number in [0, 1) for ``unit`` (blake2b, 64 bits): the same on every machine."""
    digest = hashlib.blake2b(unit, digest_size=8, person=b"rag-monitor").digest()
    return int.from_bytes(digest, "big") / _HASH_SPACE


class RateAdjuster(Protocol):
    """A hook that changes a record's rate from its Interaction (risk-based sampling).

    ``ceiling(rate)`` bounds what ``adjust`` can return for *any* record with
    that base rate; the sampler uses it to drop records before building them.
    ``adjust`` answers at once, or with a future when its screen runs elsewhere
    (`monitor.risk.RiskScreen`): the record's decision then waits for it (`Sampler.settle`).
    """

    def ceiling(self, rate: float) -> float: ...

    def adjust(self, interaction: Interaction, rate: float) -> float | asyncio.Future[Screened]: ...


class Throttle(Protocol):
    """What scales the sampler's rates down (`monitor.budget.AdaptiveRate`): the factor now,
    in (0, 1], and the rate each record was offered at with the factor at 1."""

    def scale(self) -> float: ...

    def offered(self, weight: float) -> None: ...


#: a record the configured rate keeps but the budget's scale dropped (counted as skipped)
BUDGET_THINNED = "budget_thinned"


@dataclass(frozen=True)
class Screened:
    """What a risk screen found for one record: its probability, and the risk it rests on."""

    probability: float
    #: the screen's risk (the local judge's probability of an unsupported claim); None
    #: when the record was not screened
    risk: float | None = None
    #: whether that risk reaches the local judge's cut (it would flag the answer); None when
    #: the record was not screened or the screen has no cut
    flagged: bool | None = None


@dataclass(frozen=True)
class Kept:
    """A record the sampler keeps: its Interaction and inclusion probability."""

    interaction: Interaction
    probability: float
    #: the risk screen's risk for it (`Screened.risk`), None when it was not screened
    risk: float | None = None
    #: whether the local judge flags it (`Screened.flagged`), None when not known
    flagged: bool | None = None


@dataclass(frozen=True)
class Screening:
    """A record within reach of being kept whose probability the risk screen has yet to give."""

    interaction: Interaction
    #: the record's unit hash, and the ceiling its drop was decided with
    u: float
    ceiling: float
    #: whether a drop counts as `BUDGET_THINNED`
    thinned: bool
    screened: asyncio.Future[Screened]


@dataclass(frozen=True)
class Decision:
    """`Sampler.decide`'s answer for one record."""

    #: the rate the record is offered at with the budget's scale at 1 (its rule's, else
    #: the configured rate): what the throttle is told (`Throttle.offered`)
    offered: float
    #: the kept record; None when it is dropped
    kept: Kept | None = None
    #: why a dropped record counts as skipped (`BUDGET_THINNED`); None when it is kept or
    #: simply sampled out
    skipped: str | None = None
    #: the record waits for the risk screen: `Sampler.settle` gives the decision
    screening: Screening | None = None


class Sampler:
    """Configured rate + metadata rules (first match wins) + the throttle's scale → keep or
    drop. The throttle (the token budget's) is told of every record decided."""

    def __init__(
        self,
        rate: float,
        rules: Sequence[SampleRule] = (),
        *,
        adjuster: RateAdjuster | None = None,
        throttle: Throttle | None = None,
    ) -> None:
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"sample rate {rate} is not within [0, 1]")
        self.rate = rate
        self.rules = tuple(rules)
        self.adjuster = adjuster
        self.throttle = throttle

    def scale(self) -> float:
        """What every rate is multiplied by now: the throttle's scale, 1 without one."""
        return self.throttle.scale() if self.throttle is not None else 1.0

    def scaled_rate(self) -> float:
        """The configured rate at the current scale (``rag_monitor_sample_rate``)."""
        return self.rate * self.scale()

    def decide(
        self,
        unit: bytes,
        metadata: Mapping[str, Any] | None,
        interaction: Interaction | None,
    ) -> Decision:
        """Keep or drop one record: the only sampling decision a record gets.

        ``unit`` is the record's sampling unit (its key, else its id); ``metadata`` its
        metadata; ``interaction`` the record as read. A record its source left unread
        (`drops_unread`) has neither: it is decided on ``unit`` alone. The rate is scaled by
        the throttle's current `scale`, which is then told the rate the record was offered at.

        A risk adjuster that recalibrates while it screens the record cannot raise the
        stamped probability above the ceiling the drop was decided with: a record with
        ``u`` at or above it was dropped unscreened. An adjuster whose screen answers later
        gives a `Decision` with ``screening`` set: `settle` finishes it.
        """
        u = unit_hash(unit)
        offered = self.rate_for(metadata) if metadata is not None else self.rate
        scale = self.scale()
        if self.throttle is not None:
            self.throttle.offered(offered)
        rate = _clamp(offered * scale)
        ceiling = rate if self.adjuster is None else _clamp(self.adjuster.ceiling(rate))
        thinned = scale < 1.0 and u < offered
        if u < ceiling:
            if interaction is None:
                raise ValueError("a record the sampler may keep was left unread")
            if self.adjuster is not None:
                adjusted = self.adjuster.adjust(interaction, rate)
                if isinstance(adjusted, asyncio.Future):
                    waiting = Screening(interaction, u, ceiling, thinned, adjusted)
                    return Decision(offered, screening=waiting)
                rate = min(_clamp(adjusted), ceiling)
            if u < rate:
                return Decision(offered, Kept(interaction, rate))
        return Decision(offered, skipped=BUDGET_THINNED if thinned else None)

    @staticmethod
    async def settle(decision: Decision) -> Decision:
        """``decision`` once its risk screen has answered (itself when it waits for none)."""
        screening = decision.screening
        if screening is None:
            return decision
        screened = await screening.screened
        rate = min(_clamp(screened.probability), screening.ceiling)
        if screening.u < rate:
            kept = Kept(screening.interaction, rate, screened.risk, screened.flagged)
            return Decision(decision.offered, kept)
        return Decision(decision.offered, skipped=BUDGET_THINNED if screening.thinned else None)

    def drops_unread(self, unit: bytes) -> bool:
        """Whether `decide` drops every record with this ``unit``, whatever it holds and
        whatever the budget's scale: so a source need not read it.

        Only without metadata rules and a risk adjuster: then every record has the same
        rate, which the budget only ever scales down (the adjuster's ceiling moves as it
        recalibrates).
        """
        if self.rules or self.adjuster is not None:
            return False
        return unit_hash(unit) >= self.rate

    def rate_for(self, metadata: Mapping[str, Any]) -> float:
        """The configured rate, or the first matching rule's rate.

        A rule matches when every one of its keys holds exactly that string in the metadata.
        """
        rate = self.rate
        for rule in self.rules:
            if all(metadata.get(k) == v for k, v in rule.match.items()):
                rate = rule.rate
                break
        return _clamp(rate)


def _clamp(rate: float) -> float:
    return min(1.0, max(0.0, rate))
