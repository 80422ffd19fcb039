"""Which records get scored: a deterministic, hash-based sampler. Pure, no I/O.

Every record gets a stable number ``u`` in [0, 1): a hash of its *sampling
unit* — the Kafka key when the record has one, else the interaction id. The
record is kept when ``u < rate``, where ``rate`` is the configured rate, or
the rate of the first matching metadata rule, times the budget scale (see
`budget.AdaptiveRate`). Because ``u`` depends only on the record, every
replica and every redelivery takes the same decision, and because ``u`` is
uniform and independent of the metadata, the record's inclusion probability
is exactly ``rate``; it is stamped on the scored record (weight ``1/p``).

The decision is taken in two steps so that most records never become an
`Interaction` (the pipeline validates every record before it asks: a malformed
record goes to the dead-letter topic whatever the sampler would decide):

1. `Sampler.precheck` (raw bytes only): when ``u`` is at or above the highest
   rate any rule could give *this* record, it is dropped. Whether a
   rule could match is decided from the raw JSON bytes: a rule's values must
   appear literally (JSON-escaped) in the record, unless the record uses
   ``\\u`` or ``\\/`` escapes, in which case the rule is assumed possible.
   That test never misses a real match, so the drop is exact.
2. `Sampler.admit` (after parsing): the exact rate from the metadata; kept
   when ``u < rate``.
"""

from __future__ import annotations

import hashlib
import json
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
    """A hook that changes a record's rate after parsing (risk-based sampling).

    ``ceiling(rate)`` bounds what ``adjust`` can return for *any* record with
    that base rate; the sampler uses it to drop records before parsing.
    """

    def ceiling(self, rate: float) -> float: ...

    def adjust(self, interaction: Interaction, rate: float) -> float: ...


@dataclass(frozen=True)
class Precheck:
    """The first step's answer. ``u`` is None when the record has no key (hash the id later)."""

    drop: bool
    u: float | None
    #: the ceiling the decision used; `Sampler.admit` never stamps a probability above it,
    #: since a record with ``u`` at or above it was already dropped
    ceiling: float = 1.0


def _needle(value: str) -> bytes:
    return json.dumps(value, ensure_ascii=False)[1:-1].encode("utf-8")


class Sampler:
    """Configured rate + metadata rules (first match wins) + budget scale → keep or drop."""

    def __init__(
        self,
        rate: float,
        rules: Sequence[SampleRule] = (),
        *,
        adjuster: RateAdjuster | None = None,
    ) -> None:
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"sample rate {rate} is not within [0, 1]")
        self.rate = rate
        self.rules = tuple(rules)
        self.adjuster = adjuster
        self._needles = tuple(
            tuple(_needle(k) for k in rule.match) + tuple(_needle(v) for v in rule.match.values())
            for rule in self.rules
        )

    # --- step 1: raw bytes

    def precheck(self, key: bytes | None, value: bytes | None, scale: float = 1.0) -> Precheck:
        if not key:
            return Precheck(drop=False, u=None)
        u = unit_hash(key)
        ceiling = self.ceiling(value, scale)
        return Precheck(drop=u >= ceiling, u=u, ceiling=ceiling)

    def ceiling(self, value: bytes | None, scale: float = 1.0) -> float:
        """The highest rate this record could get once parsed (never below the true rate)."""
        highest = self.rate
        if value is not None and self.rules:
            escaped = b"\\u" in value or b"\\/" in value
            for rule, needles in zip(self.rules, self._needles, strict=True):
                if rule.rate > highest and (escaped or all(n in value for n in needles)):
                    highest = rule.rate
        highest = _clamp(highest * scale)
        if self.adjuster is not None:
            highest = _clamp(self.adjuster.ceiling(highest))
        return highest

    # --- step 2: parsed record

    def rate_for(self, metadata: Mapping[str, Any], scale: float = 1.0) -> float:
        """The configured rate, or the first matching rule's rate, times ``scale``.

        A rule matches when every one of its keys holds exactly that string in the metadata.
        """
        rate = self.rate
        for rule in self.rules:
            if all(metadata.get(k) == v for k, v in rule.match.items()):
                rate = rule.rate
                break
        return _clamp(rate * scale)

    def admit(
        self,
        interaction: Interaction,
        u: float | None = None,
        scale: float = 1.0,
        ceiling: float = 1.0,
    ) -> float | None:
        """The inclusion probability when the record is kept, None when it is not.

        ``u`` is the precheck's hash of the key; without a key the id is hashed.
        ``ceiling`` is the precheck's: an adjuster that recalibrated between the
        two steps cannot raise the stamped probability above what the precheck let through.
        """
        if u is None:
            u = unit_hash(interaction.id.encode("utf-8"))
        rate = self.rate_for(interaction.metadata, scale)
        if self.adjuster is not None:
            rate = _clamp(self.adjuster.adjust(interaction, rate))
        rate = min(rate, ceiling)
        return rate if u < rate else None


def _clamp(rate: float) -> float:
    return min(1.0, max(0.0, rate))
