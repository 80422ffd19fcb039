"""The hallucination rate of all traffic, corrected by reviewer verdicts, with its interval. Pure.

See docs/review.md, "The calibrated hallucination rate" (the estimate and its assumptions).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from monitor.flags import CONTROL, HALLUCINATION, NO_CONTEXT

CONFIRMED = "confirmed"
FALSE_ALARM = "false_alarm"
UNSURE = "unsure"
VERDICTS = (CONFIRMED, FALSE_ALARM, UNSURE)

DRAWS = 20_000
SEED = 20261201

#: what each rate means, in one line (for every place that shows them)
RAW_MEANING = (
    "the judge's flags as they are; any interval on it is sampling error only, not the judge's"
)
CALIBRATED_MEANING = (
    "the judge's flags corrected by reviewer verdicts; its interval covers the judge's error too"
)


def judge_error(
    precision: float | None, reviewed: int, control: float | None, control_reviewed: int
) -> str:
    """What bounds the judge's error, in words: the hallucination flags' precision and the
    control answers' hallucination share, each with the reviews it rests on."""

    def pct(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.1%}"

    return (
        f"flag precision {pct(precision)} ({reviewed} reviews), "
        f"control answers hallucinating {pct(control)} ({control_reviewed} reviews)"
    )


def at_edge(
    rate: float | None,
    lower: float | None,
    upper: float | None,
    precision: float | None,
    control: float | None,
    control_reviewed: int,
) -> str | None:
    """Why the calibrated rate sits on an end of its own interval, in words; None when inside.

    The point is the plain estimate (each proportion as reviewed); the interval comes from
    posteriors that never put all their weight on 0 % or 100 %. When a proportion was
    reviewed at 0 % (no reviewed control answer hallucinated, say), every draw lies above
    the point: the interval is then reported from the point up (the boundary case of the
    Jeffreys interval), so the point is its lower end, and the other way round at 100 %.
    """
    if rate is None or lower is None or upper is None:
        return None
    tolerance = 1e-12
    if rate - lower <= tolerance:
        if control == 0.0:
            return (
                f"at the interval's lower end: none of the {control_reviewed} reviewed control "
                "answers was a hallucination, so the estimate counts no misses among unflagged "
                "answers; the interval allows for the misses more reviews could find"
            )
        return (
            "at the interval's lower end: a reviewed share is 0 %, which the interval "
            "allows to be higher"
        )
    if upper - rate <= tolerance:
        if precision == 1.0 or control == 1.0:
            return (
                "at the interval's upper end: every reviewed answer of a stratum was a "
                "hallucination, which the interval allows to be lower"
            )
        return "at the interval's upper end: a reviewed share is 100 %"
    return None


@dataclass(frozen=True)
class Cell:
    """Answers with the same reasons and the same latest verdicts (per reason)."""

    reasons: tuple[str, ...]
    verdicts: Mapping[str, str]
    #: how many answers
    n: int
    #: sum over the answers of their weight (sum of 1/pi of their interactions)
    weight: float
    #: sum over the answers of the sum of 1/pi^2 of their interactions
    weight_squares: float
    #: sum over the answers of weight^2 (an answer is the unit a verdict covers)
    answer_weight_squares: float
    #: the answers have a faithfulness score (only those count towards the rate)
    faithfulness_scored: bool = True
    #: the LLM judge, the local judge flagged the answers a hallucination
    #: (`monitor.backlog.rows.judge_flags`)
    llm_flagged: bool = False
    local_flagged: bool = False

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Cell:
        return cls(
            reasons=tuple(data["reasons"]),
            verdicts=dict(data.get("verdicts") or {}),
            n=int(data["n"]),
            weight=float(data["weight"]),
            weight_squares=float(data["weight_squares"]),
            answer_weight_squares=float(data["answer_weight_squares"]),
            faithfulness_scored=bool(data.get("faithfulness_scored", True)),
            llm_flagged=bool(data.get("llm_flagged", False)),
            local_flagged=bool(data.get("local_flagged", False)),
        )

    @property
    def hallucination_verdict(self) -> str | None:
        """The reviewers' latest word on whether the answers hold a hallucination: the
        verdict on their hallucination flag, or for a control answer on the control (was
        it a hallucination after all?); None when neither was asked (another flag only)."""
        for reason in (HALLUCINATION, CONTROL):
            if reason in self.reasons:
                return self.verdicts.get(reason)
        return None


@dataclass(frozen=True)
class Traffic:
    """What the sidecar scored, in total (one row in Postgres, kept by the backlog sink).

    Over records with a faithfulness score, as ``rag_monitor_scored_weight_total`` and
    ``rag_monitor_hallucination_weight_total`` count them.
    """

    #: records with a faithfulness score, and those the judge flagged hallucination
    scored: int = 0
    hallucinations: int = 0
    #: the same, weighted (sum of 1/p)
    scored_weight: float = 0.0
    hallucination_weight: float = 0.0

    def __add__(self, other: Traffic) -> Traffic:
        return Traffic(
            self.scored + other.scored,
            self.hallucinations + other.hallucinations,
            self.scored_weight + other.scored_weight,
            self.hallucination_weight + other.hallucination_weight,
        )

    def __sub__(self, other: Traffic) -> Traffic:
        return Traffic(
            self.scored - other.scored,
            self.hallucinations - other.hallucinations,
            self.scored_weight - other.scored_weight,
            self.hallucination_weight - other.hallucination_weight,
        )

    @property
    def raw_rate(self) -> float | None:
        """The judge's hallucination rate: flagged weight over scored weight."""
        if self.scored_weight <= 0:
            return None
        return self.hallucination_weight / self.scored_weight


@dataclass(frozen=True)
class Proportion:
    """A weighted share of ``confirmed`` among the reviewed answers of a group."""

    reviewed: int
    confirmed_weight: float
    reviewed_weight: float
    reviewed_weight_squares: float
    #: the whole group's weight (reviewed or not): for the finite population correction
    total_weight: float

    @property
    def value(self) -> float | None:
        if self.reviewed == 0 or self.reviewed_weight <= 0:
            return None
        return self.confirmed_weight / self.reviewed_weight

    @property
    def effective_n(self) -> float:
        """Kish's effective sample size, corrected for the share of the group reviewed."""
        if self.reviewed_weight_squares <= 0:
            return 0.0
        kish = self.reviewed_weight**2 / self.reviewed_weight_squares
        # the share of the stratum's interactions (estimated: its weighted total) reviewed
        share = min(self.reviewed / self.total_weight, 1.0) if self.total_weight > 0 else 0.0
        return kish / max(1.0 - share, 1e-6)


#: the informative verdicts a judge's flag precision needs before it is shown: fewer give
#: an interval too wide to tell the judges apart (at 10, a precision of 70 % spans about
#: 40 % - 90 %)
MIN_JUDGE_VERDICTS = 10
#: the judges whose flag precision is reported ("both": the answers both flagged), in words
JUDGE_NAMES = {"llm": "the LLM judge", "local": "the local judge", "both": "both judges"}


@dataclass(frozen=True)
class JudgePrecision:
    """The weighted share of confirmed hallucinations among the reviewed answers one judge
    (``llm``, ``local``) or both judges (``both``: the same answer) flagged."""

    judge: str
    #: informative verdicts (confirmed or false alarm) on the answers it flagged
    reviewed: int
    #: the share and its 95 % interval; None below `MIN_JUDGE_VERDICTS` (not enough to say)
    precision: float | None = None
    lower: float | None = None
    upper: float | None = None

    @property
    def name(self) -> str:
        return JUDGE_NAMES[self.judge]

    def as_json(self) -> dict[str, Any]:
        return {**asdict(self), "needed": MIN_JUDGE_VERDICTS}


def _flagged_by(cell: Cell, judge: str) -> bool:
    if judge == "both":
        return cell.llm_flagged and cell.local_flagged
    return cell.llm_flagged if judge == "llm" else cell.local_flagged


def judge_precision(
    cells: Iterable[Cell], *, draws: int = DRAWS, seed: int = SEED
) -> dict[str, JudgePrecision]:
    """Flag precision of the LLM judge, of the local judge, and of the two together.

    The verdict that counts is the one on whether the answer holds a hallucination
    (`Cell.hallucination_verdict`): an answer only the local judge flagged carries no
    hallucination flag (the judge that scored it decides the flags), so it reaches the
    backlog as a control answer, and its control verdict checks the local flag. Weighted like
    `estimate`'s shares (each answer by its 1/pi), so the precision is over all traffic the
    judge flagged, not over the sample the reviewers saw.
    """
    cells = list(cells)
    found: dict[str, JudgePrecision] = {}
    for offset, judge in enumerate(JUDGE_NAMES):
        group = [c for c in cells if _flagged_by(c, judge)]
        share = _share(group, lambda c: c.hallucination_verdict, sum(c.weight for c in group))
        if share.reviewed < MIN_JUDGE_VERDICTS or share.value is None:
            found[judge] = JudgePrecision(judge, share.reviewed)
            continue
        rng = np.random.default_rng(seed + offset)
        lower, upper = np.quantile(_beta_draws(rng, share, draws), [0.025, 0.975])
        point = share.value
        found[judge] = JudgePrecision(
            judge, share.reviewed, point, float(min(lower, point)), float(max(upper, point))
        )
    return found


@dataclass(frozen=True)
class Calibration:
    #: share of (weighted) traffic flagged as hallucination by the judge (None: unknown:
    #: no traffic totals and no control answers)
    raw_rate: float | None
    #: the corrected rate and its 95 % interval (None: not enough verdicts to say)
    calibrated_rate: float | None
    lower: float | None
    upper: float | None
    #: per flag reason, the weighted share of reviewed answers confirmed (None: no verdicts)
    flag_precision: dict[str, float | None]
    #: among reviewed control answers, the weighted share that were hallucinations
    control_hallucination_share: float | None
    #: informative verdicts (confirmed or false_alarm) behind each reason
    reviewed: dict[str, int]
    #: latest verdicts of every kind (unsure included)
    verdicts: int
    #: estimated weighted totals of the strata
    flagged_weight: float
    other_weight: float
    control_weight: float
    #: why calibrated_rate is None, when it is
    missing: list[str] = field(default_factory=list)
    #: the traffic totals the rates are over (None: estimated from the answers instead)
    traffic: Traffic | None = None
    #: flag precision per judge and of both together (`judge_precision`)
    judge_precision: dict[str, JudgePrecision] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {
            "raw_rate": self.raw_rate,
            "calibrated_rate": self.calibrated_rate,
            "lower": self.lower,
            "upper": self.upper,
            "flag_precision": self.flag_precision,
            "control_hallucination_share": self.control_hallucination_share,
            "reviewed": self.reviewed,
            "verdicts": self.verdicts,
            "strata": {
                "flagged": self.flagged_weight,
                "other_flags": self.other_weight,
                "unflagged": self.control_weight,
            },
            "missing": self.missing,
            "traffic": None if self.traffic is None else asdict(self.traffic),
            "judge_precision": {k: v.as_json() for k, v in self.judge_precision.items()},
        }


def stratum(reasons: Sequence[str]) -> str:
    """``flagged`` (hallucination), ``control`` or ``other`` (another flag reason only)."""
    if HALLUCINATION in reasons:
        return "flagged"
    if CONTROL in reasons:
        return "control"
    return "other"


def _proportion(cells: Iterable[Cell], reason: str, total: float) -> Proportion:
    return _share(cells, lambda cell: cell.verdicts.get(reason), total)


def _share(
    cells: Iterable[Cell], verdict_of: Callable[[Cell], str | None], total: float
) -> Proportion:
    """The weighted share confirmed among ``cells``, each by the verdict ``verdict_of`` reads."""
    reviewed = 0
    confirmed = rw = rw2 = 0.0
    for cell in cells:
        verdict = verdict_of(cell)
        if verdict not in (CONFIRMED, FALSE_ALARM):
            continue
        reviewed += cell.n
        rw += cell.weight
        rw2 += cell.answer_weight_squares
        if verdict == CONFIRMED:
            confirmed += cell.weight
    return Proportion(reviewed, confirmed, rw, rw2, total)


def _beta_draws(rng: np.random.Generator, share: Proportion, size: int) -> np.ndarray[Any, Any]:
    value = share.value
    assert value is not None
    n = share.effective_n
    return rng.beta(value * n + 0.5, (1.0 - value) * n + 0.5, size)


def _total_draws(
    rng: np.random.Generator, total: float, variance: float, size: int
) -> np.ndarray[Any, Any]:
    """A weighted total: exact when every interaction was certain to be queued, else Gamma."""
    if total <= 0:
        return np.zeros(size)
    if variance <= total * 1e-9:
        return np.full(size, total)
    shape = total**2 / variance
    return rng.gamma(shape, variance / total, size)


def estimate(
    cells: Iterable[Cell],
    traffic: Traffic | None = None,
    *,
    draws: int = DRAWS,
    seed: int = SEED,
) -> Calibration:
    """The calibrated hallucination rate, flag precision per reason, and their counts.

    With ``traffic`` (and any scored weight in it), the totals are the traffic's;
    without, they are estimated from the answers.
    """
    cells = list(cells)
    known = traffic if traffic is not None and traffic.scored_weight > 0 else None
    by_stratum: dict[str, list[Cell]] = {"flagged": [], "control": [], "other": []}
    for cell in cells:
        # the rate is over records with a faithfulness score and a context
        if cell.faithfulness_scored and NO_CONTEXT not in cell.reasons:
            by_stratum[stratum(cell.reasons)].append(cell)
    totals = {k: sum(c.weight for c in v) for k, v in by_stratum.items()}
    # Horvitz-Thompson variance of a total under independent inclusion: sum(1/pi^2 - 1/pi)
    variances = {
        k: max(sum(c.weight_squares - c.weight for c in v), 0.0) for k, v in by_stratum.items()
    }
    if known is not None:
        # the totals are counted, not estimated: the flagged weight, and all the rest
        # (flagged for another reason or not at all) as one unflagged stratum
        unflagged = max(known.scored_weight - known.hallucination_weight, 0.0)
        totals = {"flagged": known.hallucination_weight, "other": 0.0, "control": unflagged}
        variances = dict.fromkeys(totals, 0.0)

    reasons = sorted({r for c in cells for r in c.reasons if r != CONTROL})
    precision: dict[str, float | None] = {}
    reviewed: dict[str, int] = {}
    for reason in [*reasons, CONTROL]:
        group = [c for c in cells if reason in c.reasons]
        share = _proportion(group, reason, sum(c.weight for c in group))
        reviewed[reason] = share.reviewed
        if reason != CONTROL:
            precision[reason] = share.value
    verdicts = sum(c.n * len(c.verdicts) for c in cells)

    flagged = _proportion(by_stratum["flagged"], HALLUCINATION, totals["flagged"])
    control = _proportion(by_stratum["control"], CONTROL, totals["control"])
    grand = sum(totals.values())
    missing: list[str] = []
    has_controls = sum(c.weight for c in by_stratum["control"]) > 0
    if grand <= 0:  # nothing scored: no share is to blame
        missing.append("no scored answers yet")
    elif not has_controls:
        missing.append(
            "no control answers: no unflagged answer has been queued for review yet (each one "
            "is, at the control share's odds), so the judge's misses are unknown"
        )
    if known is not None:
        raw = known.raw_rate
    else:
        raw = totals["flagged"] / grand if grand > 0 and has_controls else None
    if totals["flagged"] > 0 and flagged.value is None:
        missing.append("no verdicts on answers flagged hallucination")
    if has_controls and control.value is None:
        missing.append("no verdicts on control answers")
    base = Calibration(
        raw_rate=raw,
        calibrated_rate=None,
        lower=None,
        upper=None,
        flag_precision=precision,
        control_hallucination_share=control.value,
        reviewed=reviewed,
        verdicts=verdicts,
        flagged_weight=totals["flagged"],
        other_weight=totals["other"],
        control_weight=totals["control"],
        missing=missing,
        traffic=known,
        judge_precision=judge_precision(cells, draws=draws, seed=seed),
    )
    if missing:
        return base

    p_flagged = flagged.value if flagged.value is not None else 0.0
    p_control = control.value
    assert p_control is not None
    unflagged = totals["other"] + totals["control"]
    point = (totals["flagged"] * p_flagged + unflagged * p_control) / grand

    rng = np.random.default_rng(seed)
    w_f = _total_draws(rng, totals["flagged"], variances["flagged"], draws)
    w_o = _total_draws(rng, totals["other"], variances["other"], draws)
    w_c = _total_draws(rng, totals["control"], variances["control"], draws)
    p_f = _beta_draws(rng, flagged, draws) if flagged.value is not None else np.zeros(draws)
    p_c = _beta_draws(rng, control, draws)
    rates = (w_f * p_f + (w_o + w_c) * p_c) / np.maximum(w_f + w_o + w_c, 1e-12)
    lower, upper = np.quantile(rates, [0.025, 0.975])
    return Calibration(
        **{
            **base.__dict__,
            "calibrated_rate": point,
            "lower": float(min(lower, point)),
            "upper": float(max(upper, point)),
        }
    )
