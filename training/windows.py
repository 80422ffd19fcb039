"""A labelled answer as the local judge's screen reads it: the claims it cuts the answer into,
each as the support model reads it (as the answer wrote it) with the windows it is read
against. Every step is the judge's own (`claims.claims_or_text`,
`readings.Reader.pairs`); only the model differs: the trainer reads these pairs with the
model it trains (`training.cross_encoder`), and `best` picks a claim's score from its
windows as `SupportModel` does."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypedDict

if TYPE_CHECKING:  # imported where used: `best` runs where the monitor's runtime is not
    from monitor.judges.local.judge import LocalJudge


class Claim(TypedDict):
    """One claim as the support model reads it, and what it reads it against."""

    #: the claim, as the answer wrote it
    statement: str
    #: the windows it is read against, in the judge's order (`best`)
    windows: list[str]
    #: its two nearest windows joined, read only when no window alone supports it
    joined: list[str]


def texts(contexts: Sequence[Any]) -> list[str]:
    """A record's retrieved contexts as text (plain strings or ``{"text": ...}``)."""
    return [c if isinstance(c, str) else str(c["text"]) for c in contexts]


class Windows:
    def __init__(self, judge: LocalJudge | None = None) -> None:
        from monitor.judges.local.embedder import MiniLMEmbedder
        from monitor.judges.local.judge import LocalJudge

        self.judge = judge or LocalJudge(embedder=MiniLMEmbedder(threads=1), threads=1)

    def candidates(self, record: dict[str, Any]) -> list[Claim]:
        """``record``'s claims as `LocalJudge.screen` reads them (its answer's claims, the
        whole answer when it has none) against its retrieved contexts."""
        contexts = texts(record["retrieved_contexts"])
        from monitor.judges.local.claims import claims_or_text

        question = str(record.get("user_input") or "")
        said = claims_or_text(str(record["response"]), question)
        return [
            Claim(statement=s, windows=list(c.windows), joined=list(c.joined))
            for s, c in self.judge.reader.pairs(said, contexts)
        ]


#: The logit at and above which a claim's later windows are not read
#: (`monitor.judges.local.entailment.SURE`; tests/training/test_windows.py holds the two equal).
SURE = 3.0


def flat(said: Sequence[Claim]) -> list[tuple[str, str]]:
    """Every (statement, window) pair of ``said`` in order: each claim's windows, then its
    joined ones."""
    return [(c["statement"], w) for c in said for w in (*c["windows"], *c["joined"])]


def weakest(said: Sequence[Claim], logits: Sequence[float]) -> float:
    """The logit of the answer's weakest claim (the claim the judge's screen rates the
    answer by), ``logits`` being the model's for `flat` (said), in order."""
    low, k = math.inf, 0
    for c in said:
        n, m = len(c["windows"]), len(c["joined"])
        low = min(low, best(logits[k : k + n], logits[k + n : k + n + m]))
        k += n + m
    return low


def best(alone: Sequence[float], joined: Sequence[float]) -> float:
    """A claim's logit from its windows' (``alone``, in the order the judge reads them: its
    best window by words, then its nearest) and its joined windows' (``joined``): the
    windows are read up to the first that is `SURE`, the claim's logit is the best one
    read, and the joined ones are read only when no window alone supports the claim (logit
    below 0), as `monitor.judges.local.entailment.SupportModel` reads them (-inf without
    windows). Written out here, not imported: the trainer runs on a machine without the
    monitor's runtime (tests/training/test_windows.py holds the two equal)."""
    read = list(alone[: next((k + 1 for k, z in enumerate(alone) if z >= SURE), len(alone))])
    if not read:
        return -math.inf
    top = max(read)
    return max(top, *joined) if top < 0 and joined else top
