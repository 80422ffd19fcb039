"""Does a hallucination spike page? The shipped judge's flags, composed into three days of
traffic, fed through the shipped alert rules by promtool.

1. **Verdicts.** Every answer of a labelled pool is scored as a user scores a file
   (``python -m monitor score FILE --judge local --metrics faithfulness``, a child process):
   its verdict is whether the sidecar flags it ``hallucination``, under each of the local
   judge's decisions (``claim``, as ``score`` flags it with ``RAG_MONITOR_LOCAL_DECISION=claim``;
   ``answer``, the default, the answer's ``hallucination_probability`` at or above the shipped
   cut, which is what the default decision flags). Pools: the demo traffic,
   the long-answer twins' report half (`bench.twins`; ``--long PATH``, else ``data/`` under
   ``$RAGMON_DEV_DATA``, `scripts.devdata`: left out, saying so, when neither is there and
   ``--pools`` is not given) and the realistic holdout; only
   faithful and hallucinated answers are drawn (an evasive answer is unscoreable, the demo's
   off-topic ones are neither).
2. **Traffic.** ``--per-minute`` scored answers a minute, drawn with replacement from the
   pool: a day at ``--base`` hallucinated (5 %), a spike at ``--spike`` (25 %) for
   ``--spike-hours`` (2), the rest of that day at the base rate, then a control day at the
   base rate. The sidecar's counters for it (``rag_monitor_hallucination_weight_total``,
   ``rag_monitor_scored_weight_total``, ``rag_monitor_records_scored_total``, every record
   weighing 1) are written a sample a minute.
3. **The rules.** promtool evaluates ``dashboards/alerts.yaml`` over those samples every
   minute (``promtool test rules``, one expectation of silence a minute: each failure is a
   minute ``RagMonitorHallucinationSpike`` fired). Reported per pool and seed: the judge's
   flag rates on faithful and hallucinated answers, the raw rate's ratio (spike hour against
   base), minutes from the spike's start to the alert firing, and the minutes it fired on
   the control day (false fires).

    python -m bench.spike                                   # every pool, 3 seeds
    python -m bench.spike --pools demo --seeds 1 --out /tmp/spike   # keep the verdicts

With ``--out PREFIX`` the verdicts are kept in ``PREFIX.POOL.verdicts.json`` and read back by
a later run (``--verdicts-only`` stops after them).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.harness import DEMO, FAITHFUL, HALLUCINATED, ROOT, load_dataset, within_reach
from monitor.flags import HALLUCINATION
from monitor.judges.local.answer import AnswerModel
from monitor.metrics.faithfulness import HALLUCINATION_PROBABILITY

RULES = ROOT / "dashboards" / "alerts.yaml"
ALERT = "RagMonitorHallucinationSpike"
#: the local judge's decisions (``RAG_MONITOR_LOCAL_DECISION``), each a row of the table
DECISIONS = ("claim", "answer")
#: the pools and the data set each is drawn from
POOLS = {"demo": "demo", "long-report": "long-report", "realistic-holdout": "realistic-holdout"}
DAY = 24 * 60
#: labels of the composed series (one deployment, one replica, the local judge)
_LABELS = 'job="rag-monitor",namespace="bench",instance="a",route="chat",judge="local"'
_FAILED = re.compile(r"alertname:\s*" + ALERT + r",\s*time:\s*([0-9dhms]+)")


@dataclass(frozen=True)
class Verdicts:
    """The judge's verdict on each drawable answer of a pool: flagged or not."""

    faithful: list[bool]
    hallucinated: list[bool]

    @property
    def false_flags(self) -> float:
        return sum(self.faithful) / len(self.faithful)

    @property
    def recall(self) -> float:
        return sum(self.hallucinated) / len(self.hallucinated)

    def raw_rate(self, share: float) -> float:
        """The flagged share of traffic with ``share`` hallucinated answers."""
        return (1 - share) * self.false_flags + share * self.recall


@dataclass(frozen=True)
class Plan:
    per_minute: int = 30
    base: float = 0.05
    spike: float = 0.25
    spike_hours: float = 2.0

    @property
    def spike_start(self) -> int:
        return DAY

    @property
    def spike_end(self) -> int:
        return DAY + round(self.spike_hours * 60)

    @property
    def minutes(self) -> int:
        return 3 * DAY


def score_pool(
    name: str, halueval: Path | None, demo: Path, long: Path | None
) -> dict[str, Verdicts]:
    """Score the pool's answers with the shipped local judge, as ``rag-monitor score`` does:
    its verdicts under each decision (`DECISIONS`)."""
    cut = AnswerModel.load().cut
    items = [
        i
        for i in load_dataset(POOLS[name], halueval, demo, long)
        if i.kind in (FAITHFUL, HALLUCINATED)
    ]
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "pool.jsonl"
        with source.open("w", encoding="utf-8") as f:
            for n, item in enumerate(items):
                fields = ("user_input", "retrieved_contexts", "response")
                f.write(json.dumps({"id": f"r{n}", **{k: item.record[k] for k in fields}}) + "\n")
        # the claims' own verdicts; the answer's probability, written either way, gives the other
        env = {**os.environ, "PYTHONPATH": str(ROOT), "RAG_MONITOR_LOCAL_DECISION": "claim"}
        done = subprocess.run(
            [sys.executable, "-m", "monitor", "score", str(source), "--judge", "local",
             "--metrics", "faithfulness"],
            capture_output=True, text=True, env=env, cwd=ROOT, check=False,
        )  # fmt: skip
    if done.returncode not in (0, 1):
        raise SystemExit(f"rag-monitor score failed ({done.returncode}): {done.stderr[-2000:]}")
    lines = {}
    for line in done.stdout.splitlines():
        row = json.loads(line)
        lines[row["id"]] = row
    out = {decision: Verdicts([], []) for decision in DECISIONS}
    for n, item in enumerate(items):
        row = lines[f"r{n}"]
        probability = row.get(HALLUCINATION_PROBABILITY)
        flagged = {
            # each claim on its own (the flag as `score` wrote it, deciding so)
            "claim": HALLUCINATION in row.get("flags", []),
            # RAG_MONITOR_LOCAL_DECISION=answer flags exactly the answers at or above the cut
            "answer": probability is not None and probability >= cut,
        }
        for decision, verdicts in out.items():
            side = verdicts.hallucinated if item.kind == HALLUCINATED else verdicts.faithful
            side.append(flagged[decision])
    return out


def compose(verdicts: Verdicts, plan: Plan, seed: int) -> tuple[list[int], list[int]]:
    """Cumulative (flagged, scored) counts at the end of each minute."""
    rng = random.Random(seed)
    flagged, scored = [], []
    total_flagged = total = 0
    for minute in range(plan.minutes):
        share = plan.spike if plan.spike_start <= minute < plan.spike_end else plan.base
        for _ in range(plan.per_minute):
            pool = verdicts.hallucinated if rng.random() < share else verdicts.faithful
            total_flagged += rng.choice(pool)
            total += 1
        flagged.append(total_flagged)
        scored.append(total)
    return flagged, scored


def _duration(text: str) -> int:
    """promtool's ``1d2h3m`` (or ``26h5m``) as minutes."""
    minutes = 0
    for value, unit in re.findall(r"(\d+)([dhms])", text):
        minutes += int(value) * {"d": DAY, "h": 60, "m": 1, "s": 0}[unit]
    return minutes


def fired_minutes(
    flagged: Sequence[int], scored: Sequence[int], rules: Path = RULES, step: int = 1
) -> list[int]:
    """The minutes (every ``step``-th, from the second day on) at which promtool finds the
    spike alert firing over these counters."""
    start = DAY
    checks = list(range(start, len(scored), step))
    test = {
        "rule_files": [str(rules)],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [
                    {
                        "series": f"rag_monitor_hallucination_weight_total{{{_LABELS}}}",
                        "values": " ".join(map(str, flagged)),
                    },
                    {
                        "series": f"rag_monitor_scored_weight_total{{{_LABELS}}}",
                        "values": " ".join(map(str, scored)),
                    },
                    {
                        "series": "rag_monitor_records_scored_total"
                        '{job="rag-monitor",namespace="bench",instance="a"}',
                        "values": " ".join(map(str, scored)),
                    },
                ],
                "alert_rule_test": [
                    {"eval_time": f"{m}m", "alertname": ALERT, "exp_alerts": []} for m in checks
                ],
            }
        ],
    }
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "spike.json"  # promtool reads YAML, of which JSON is a subset
        path.write_text(json.dumps(test), encoding="utf-8")
        done = subprocess.run(
            [promtool(), "test", "rules", str(path)], capture_output=True, text=True, check=False
        )
    found = sorted({_duration(t) for t in _FAILED.findall(done.stdout + done.stderr)})
    if done.returncode != 0 and not found:
        raise SystemExit(f"promtool failed: {(done.stdout + done.stderr)[-2000:]}")
    return found


def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        raise SystemExit("promtool not found: install Debian's prometheus package")
    return found


@dataclass(frozen=True)
class Outcome:
    #: minutes from the spike's start to the alert's first firing (None: it never fired)
    to_fire: int | None
    #: minutes it fired on the control day
    false_fires: int


def run(verdicts: Verdicts, plan: Plan, seed: int, rules: Path = RULES) -> Outcome:
    flagged, scored = compose(verdicts, plan, seed)
    fired = fired_minutes(flagged, scored, rules)
    during = [m for m in fired if plan.spike_start <= m < 2 * DAY]
    control = [m for m in fired if m >= 2 * DAY]
    return Outcome(during[0] - plan.spike_start if during else None, len(control))


def _table(rows: Mapping[str, tuple[Verdicts, list[Outcome]]], plan: Plan) -> list[str]:
    lines = [
        "| pool, decision | faithful / hallucinated | faithful flagged | recall | raw-rate ratio "
        "| minutes to fire (per seed) | control-day minutes fired |",
        "|---|---:|---:|---:|---:|---|---:|",
    ]
    for name, (v, outcomes) in rows.items():
        ratio = v.raw_rate(plan.spike) / max(v.raw_rate(plan.base), 1e-9)
        fires = ", ".join("never" if o.to_fire is None else str(o.to_fire) for o in outcomes)
        lines.append(
            f"| {name} | {len(v.faithful)} / {len(v.hallucinated)} | {v.false_flags:.1%} "
            f"| {v.recall:.1%} | {ratio:.2f}× | {fires} | {sum(o.false_fires for o in outcomes)} |"
        )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.spike",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--pools", help=f"default: {','.join(POOLS)}")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--per-minute", type=int, default=Plan.per_minute)
    parser.add_argument("--base", type=float, default=Plan.base)
    parser.add_argument("--spike", type=float, default=Plan.spike)
    parser.add_argument("--spike-hours", type=float, default=Plan.spike_hours)
    parser.add_argument("--rules", type=Path, default=RULES, metavar="PATH")
    dev = "default: data/ under $RAGMON_DEV_DATA"
    parser.add_argument("--halueval", type=Path, metavar="PATH", help=dev)
    parser.add_argument("--demo", type=Path, default=DEMO, metavar="PATH")
    parser.add_argument("--long", type=Path, metavar="PATH", help=dev)
    parser.add_argument("--out", metavar="PREFIX", help="keep the verdicts, read them back")
    parser.add_argument("--verdicts-only", action="store_true")
    args = parser.parse_args(argv)
    plan = Plan(args.per_minute, args.base, args.spike, args.spike_hours)
    if args.pools is None:
        reached = within_reach(list(POOLS.values()), args.halueval, args.long)
        pools = [p for p, dataset in POOLS.items() if dataset in reached]
    else:
        pools = [p for p in args.pools.split(",") if p]
    unknown = sorted(set(pools) - set(POOLS))
    if unknown:
        parser.error(f"unknown pool {unknown[0]!r}; one of {', '.join(POOLS)}")
    rows: dict[str, tuple[Verdicts, list[Outcome]]] = {}
    for name in pools:
        kept = Path(f"{args.out}.{name}.verdicts.json") if args.out else None
        if kept is not None and kept.is_file():
            found = json.loads(kept.read_text(encoding="utf-8"))
            by_decision = {d: Verdicts(**found[d]) for d in DECISIONS}
        else:
            print(f"{name}: scoring the pool", file=sys.stderr)
            by_decision = score_pool(name, args.halueval, args.demo, args.long)
            if kept is not None:
                found = {d: v.__dict__ for d, v in by_decision.items()}
                kept.write_text(json.dumps(found), encoding="utf-8")
        for decision, verdicts in by_decision.items():
            outcomes = []
            for seed in range(0 if args.verdicts_only else args.seeds):
                print(f"{name} ({decision}): seed {seed}: promtool", file=sys.stderr)
                outcomes.append(run(verdicts, plan, seed, args.rules))
            rows[f"{name}, {decision}"] = (verdicts, outcomes)
    print(
        f"{plan.per_minute} scored answers a minute; {plan.base:.0%} hallucinated, "
        f"{plan.spike:.0%} for {plan.spike_hours:g} h after a day, then a control day"
    )
    print("\n".join(_table(rows, plan)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
