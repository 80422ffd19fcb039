"""The combiner: one support probability per claim from the model's logit and the lexical gaps.

A logistic combination of a few features (`FEATURES`), with weights fitted by
``python -m training.combiner`` on data outside every evaluation set and shipped
as ``model/combiner.json`` (sha256 pinned with the other model files). See
docs/model.md, "The combiner".
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from monitor.judges.local.embedder import ModelFileError, read_pinned
from monitor.judges.local.evidence import Gaps

COMBINER_PATH = Path(__file__).with_name("model") / "combiner.json"
COMBINER_SHA256 = "359bfcc369c5877966c6df0afe0236d7d27a895f72e9bbf38d8916e9c865eff4"
#: The model's logit is clipped to this range before it is weighed (a saturated logit says
#: no more than a confident one).
LOGIT_RANGE = 8.0
#: The features, in the order of the weights: the model's logit; the share of the claim's
#: content words, and whether a number or a name of it, that no context states; whether the
#: claim is a phrase answer read after its question; whether its words are copied from a
#: context.
FEATURES = ("logit", "missing_share", "missing_number", "missing_name", "phrase", "copied")


def features(logit: float, gaps: Gaps, *, phrase: bool = False) -> tuple[float, ...]:
    """The combiner's inputs for one claim, in `FEATURES` order."""
    return (
        max(-LOGIT_RANGE, min(LOGIT_RANGE, logit)),
        gaps.missing_share,
        float(bool(gaps.missing_numbers)),
        float(bool(gaps.missing_names)),
        float(phrase),
        float(gaps.copied),
    )


@dataclass(frozen=True)
class Combiner:
    """``sigmoid(bias + weights · features)``."""

    weights: tuple[float, ...]
    bias: float

    def __post_init__(self) -> None:
        if len(self.weights) != len(FEATURES):
            raise ValueError(f"the combiner needs {len(FEATURES)} weights")

    def probability(self, logit: float, gaps: Gaps, *, phrase: bool = False) -> float:
        """The probability that the claim is supported."""
        found = features(logit, gaps, phrase=phrase)
        x = self.bias + sum(w * f for w, f in zip(self.weights, found, strict=True))
        return 1.0 / (1.0 + math.exp(-x))

    @classmethod
    def load(cls, path: Path = COMBINER_PATH, digest: str | None = COMBINER_SHA256) -> Combiner:
        """The shipped weights (``digest`` None: any file, for training and tests)."""
        data = json.loads(read_pinned(path, digest))
        if list(data["features"]) != list(FEATURES):
            raise ModelFileError(f"{path} weighs other features: {data['features']}")
        return cls(tuple(float(w) for w in data["weights"]), float(data["bias"]))
