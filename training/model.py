"""The evidence model: the probability that a window supports a statement, from its evidence.

A logistic regression over the measurements of `training.evidence` (standardised,
then weighted, then divided by a temperature fitted on a validation split), fitted
by `training.fit` and saved as JSON (its features, standardisation, weights, seed
and mix), with the file's sha256 beside it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt


class ModelFileError(RuntimeError):
    """A weights file for other measurements, or malformed."""


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
            raise ModelFileError("features, mean, scale and weights differ in length")
        if self.temperature <= 0:
            raise ModelFileError("the temperature must be positive")

    def logits(self, evidence: npt.NDArray[np.float32]) -> npt.NDArray[np.float64]:
        """Calibrated logits of support, one per row of ``evidence`` (features in order)."""
        z = (evidence.astype(np.float64) - np.asarray(self.mean)) / np.asarray(self.scale)
        return (z @ np.asarray(self.weights) + self.bias) / self.temperature

    def probabilities(self, evidence: npt.NDArray[np.float32]) -> npt.NDArray[np.float64]:
        return 1.0 / (1.0 + np.exp(-self.logits(evidence)))


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def parse(document: dict[str, Any]) -> SupportModel:
    from training.evidence import FEATURES

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
        raise ModelFileError(f"fitted on {model.features}, this code measures {FEATURES}")
    return model


def load(path: Path) -> SupportModel:
    return parse(json.loads(path.read_text(encoding="utf-8")))


def write(model: SupportModel, path: Path, *, seed: int, mix: dict[str, int]) -> str:
    """Save the weights (and their sha256 beside them, ``PATH.sha256``); the sha256."""
    document = {"model": asdict(model), "seed": seed, "mix": mix}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    digest = sha256_of(path)
    path.with_name(path.name + ".sha256").write_text(f"{digest}  {path.name}\n", encoding="utf-8")
    return digest
