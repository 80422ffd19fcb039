"""The support model: the probability that a window supports a statement, from its evidence.

A logistic regression over the measurements of `monitor.judges.local.evidence`
(standardised, then weighted, then divided by a temperature fitted on a
validation split), fitted by ``training/fit.py`` and shipped as
``support_model.json`` beside this module. The file's sha256 is pinned in
``support_model.sha256``: a weights file that does not match is refused, not
used. The card (data, licences, sizes, seed, evaluation) is docs/model.md.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

HERE = Path(__file__).resolve().parent
WEIGHTS = HERE / "support_model.json"
PINNED = HERE / "support_model.sha256"


class ModelFileError(RuntimeError):
    """The shipped weights are missing, altered or for other measurements."""


@dataclass(frozen=True)
class SupportModel:
    features: tuple[str, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    weights: tuple[float, ...]
    bias: float
    temperature: float

    def __post_init__(self) -> None:
        n = len(self.features)
        if not (len(self.mean) == len(self.scale) == len(self.weights) == n):
            raise ModelFileError("support model: features, mean, scale and weights differ in length")
        if self.temperature <= 0:
            raise ModelFileError("support model: temperature must be positive")

    def logits(self, evidence: npt.NDArray[np.float32]) -> npt.NDArray[np.float64]:
        """Calibrated logits of support, one per row of ``evidence`` (features in order)."""
        z = (evidence.astype(np.float64) - np.asarray(self.mean)) / np.asarray(self.scale)
        return (z @ np.asarray(self.weights) + self.bias) / self.temperature

    def probabilities(self, evidence: npt.NDArray[np.float32]) -> npt.NDArray[np.float64]:
        return 1.0 / (1.0 + np.exp(-self.logits(evidence)))


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@lru_cache(maxsize=1)
def shipped() -> SupportModel:
    """The packaged model, checked against its pinned sha256."""
    try:
        pinned = PINNED.read_text(encoding="utf-8").split()[0]
        actual = sha256_of(WEIGHTS)
    except OSError as exc:
        raise ModelFileError(f"support model file missing: {exc}") from exc
    if actual != pinned:
        raise ModelFileError(
            f"support model {WEIGHTS.name}: sha256 {actual} is not the pinned {pinned}"
        )
    return parse(json.loads(WEIGHTS.read_text(encoding="utf-8")))


def parse(document: dict[str, Any]) -> SupportModel:
    from monitor.judges.local.evidence import FEATURES

    m = document["model"]
    model = SupportModel(
        features=tuple(m["features"]),
        mean=tuple(m["mean"]),
        scale=tuple(m["scale"]),
        weights=tuple(m["weights"]),
        bias=float(m["bias"]),
        temperature=float(m["temperature"]),
    )
    if model.features != FEATURES:
        raise ModelFileError(
            f"support model was fitted on {model.features}, this code measures {FEATURES}"
        )
    return model


def write(model: SupportModel, *, seed: int, mix: dict[str, int]) -> None:
    """Write the weights and pin their sha256 (``training/fit.py --write``)."""
    document = {"model": asdict(model), "seed": seed, "mix": mix}
    WEIGHTS.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    PINNED.write_text(f"{sha256_of(WEIGHTS)}  {WEIGHTS.name}\n", encoding="utf-8")
    shipped.cache_clear()
