"""The answer's probability: how likely an answer holds at least one unsupported claim.

The local judge gives every claim a support probability (`combiner`). An answer of many
claims has many chances of one misread claim, so "any claim below 0.5" flags long faithful
answers far too often. The answer is read as a whole instead: a few features of its
claims' probabilities (`FEATURES`) go through a logistic fit on dev data
(``python -m training.answer``, shipped as ``model/answer.json``, sha256 pinned), which gives
the probability that the answer holds an unsupported claim. The judge says an answer holds
one when that probability reaches the fitted ``cut``, chosen so that at most 5 % of the
faithful answers of every dev set it was fitted on are flagged. See docs/model.md, "The
answer's probability".
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from monitor.judges.local.embedder import ModelFileError, read_pinned

ANSWER_PATH = Path(__file__).with_name("model") / "answer.json"
ANSWER_SHA256 = "99b1b0bd4041bc7e9d3d1c4e7bf43c3eab83780124a00fdae637893acefdc700"
#: a claim's probability is kept this far from 0 and 1 before its logit is taken
_EDGE = 1e-4
#: the features, in the order of the weights: the logit of the weakest claim's support, of
#: the second weakest (the weakest again for a one-claim answer), the claims' mean support,
#: the log of their number, and the log of the product of their supports
FEATURES = ("weakest_logit", "second_logit", "mean_support", "log_claims", "log_all_supported")


def _logit(p: float) -> float:
    p = min(1.0 - _EDGE, max(_EDGE, p))
    return math.log(p / (1.0 - p))


def features(probabilities: Sequence[float]) -> tuple[float, ...]:
    """The answer's features from its claims' support probabilities (at least one)."""
    if not probabilities:
        raise ValueError("an answer without claims has no probability")
    ordered = sorted(probabilities)
    weakest = ordered[0]
    second = ordered[1] if len(ordered) > 1 else weakest
    return (
        _logit(weakest),
        _logit(second),
        sum(ordered) / len(ordered),
        math.log(len(ordered)),
        sum(math.log(min(1.0, max(_EDGE, p))) for p in ordered),
    )


@dataclass(frozen=True)
class AnswerModel:
    """``sigmoid(bias + weights · features)``, and the cut at and above which it flags."""

    weights: tuple[float, ...]
    bias: float
    cut: float

    def __post_init__(self) -> None:
        if len(self.weights) != len(FEATURES):
            raise ValueError(f"the answer model needs {len(FEATURES)} weights")
        if not 0.0 < self.cut < 1.0:
            raise ValueError("the cut is a probability in (0, 1)")

    def probability(self, probabilities: Sequence[float]) -> float:
        """The probability that an answer whose claims have these support probabilities
        holds at least one unsupported claim."""
        x = self.bias + sum(
            w * f for w, f in zip(self.weights, features(probabilities), strict=True)
        )
        return 1.0 / (1.0 + math.exp(-max(-50.0, min(50.0, x))))

    def flags(self, probability: float) -> bool:
        return probability >= self.cut

    def save(self, path: Path) -> None:
        data = {"features": list(FEATURES), "weights": list(self.weights), "bias": self.bias}
        path.write_text(json.dumps({**data, "cut": self.cut}, indent=1) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: Path = ANSWER_PATH, digest: str | None = ANSWER_SHA256) -> AnswerModel:
        """The shipped weights and cut (``digest`` None: any file, for training and tests)."""
        data = json.loads(read_pinned(path, digest))
        if list(data["features"]) != list(FEATURES):
            raise ModelFileError(f"{path} weighs other features: {data['features']}")
        return cls(
            tuple(float(w) for w in data["weights"]), float(data["bias"]), float(data["cut"])
        )
