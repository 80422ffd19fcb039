"""The demo's golden-set phases, after the sidecar: the backlog annotated from the traffic
set's references, the reviewer played from its labels, the calibration read back, the
offline run, and what the backlog then holds; each with the code its command runs.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from monitor.config import Settings
from monitor.demo import DemoError
from monitor.demo.report import DemoReport
from monitor.demo.steps import until
from monitor.demo.traffic import TrafficRecord, played_verdict
from monitor.telemetry import Exporter


async def rows_to_leave(settings: Settings, dsn: str, count: int) -> set[str]:
    """The ``count`` newest backlog rows: left pending, with no verdict, for a person to
    review on the review page (the played reviewer and the annotation skip them).

    A row is passed over when leaving it would leave no verdict at all for one of its
    answers' reasons (the calibration needs some on the flagged and on the controls).
    """
    if count <= 0:
        return set()
    from monitor.backlog.store import BacklogStore

    store = BacklogStore(dsn, settings)
    try:
        await store.start()
        rows = [row async for row in store.rows()]  # oldest first
    finally:
        await store.close()
    return choose_left(
        [(row.id, {r for answer in row.answers for r in answer.reasons}) for row in rows], count
    )


def choose_left(rows: Sequence[tuple[str, set[str]]], count: int) -> set[str]:
    """Up to ``count`` of ``rows`` (id, its answers' reasons; oldest first), newest first,
    passing over a row whose leaving would take the last row of one of its reasons."""
    reviewed = Counter(reason for _, reasons in rows for reason in reasons)
    leave: set[str] = set()
    for row_id, reasons in reversed(rows):
        if len(leave) == count:
            break
        if all(reviewed[reason] > 1 for reason in reasons):
            leave.add(row_id)
            reviewed.subtract(reasons)
    return leave


async def annotate(
    settings: Settings,
    dsn: str,
    traffic: Sequence[TrafficRecord],
    workdir: Path,
    report: DemoReport,
    stop: asyncio.Event,
    *,
    leave: frozenset[str] = frozenset(),
) -> None:
    """Write references.jsonl for the pending rows (but ``leave``), then import it like
    `backlog import`."""
    from monitor.backlog.annotations import read_annotations
    from monitor.backlog.rows import PENDING
    from monitor.backlog.store import BacklogStore

    references = {r.id: r.reference for r in traffic if r.reference}
    path = workdir / "references.jsonl"
    store = BacklogStore(dsn, settings)
    try:
        await until(store.start(), stop, what="connecting to Postgres")
        lines = [
            json.dumps({"id": row.id, "reference": references[row.id]}, ensure_ascii=False)
            async for row in store.rows(PENDING)
            if row.id in references and row.id not in leave
        ]
        path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        imported = await until(
            store.import_references(read_annotations(path)), stop, what="importing references"
        )
    finally:
        await store.close()
    if imported.rejected:
        line, rid, reason = imported.rejected[0]
        raise DemoError(f"{path} line {line}: {rid}: {reason}")
    report.annotated = len(imported.changed)


async def play_reviewer(
    settings: Settings,
    dsn: str,
    traffic: Sequence[TrafficRecord],
    report: DemoReport,
    stop: asyncio.Event,
    *,
    leave: frozenset[str] = frozenset(),
) -> None:
    """Save a verdict on every reason of every answer (of the rows not in ``leave``), from the
    labels, then calibrate.

    The verdicts are `played_verdict`'s.
    """
    from monitor.backlog.reviews import VerdictInput
    from monitor.backlog.store import BacklogStore
    from monitor.flags import CONTROL

    labels = {r.id: r.label for r in traffic}
    store = BacklogStore(dsn, settings)
    try:
        await until(store.start(), stop, what="connecting to Postgres")
        rows = [row async for row in store.rows() if row.id not in leave]
        for row in rows:
            verdicts = []
            for answer in row.answers:
                label = labels.get(answer.interaction_id)
                if label is None:
                    continue
                report.review_answers += 1
                for reason in answer.reasons:
                    verdict = played_verdict(reason, label)
                    verdicts.append(VerdictInput(reason, verdict, answer.interaction_id))
            if verdicts:
                await until(
                    store.review(row.id, version=row.version, reviewer="demo", verdicts=verdicts),
                    stop,
                    what="saving verdicts",
                )
                report.review_verdicts += len(verdicts)
        calibration = await until(store.calibration(), stop, what="calibrating")
    finally:
        await store.close()
    report.flag_precision = dict(calibration.flag_precision)
    report.flag_reviewed = {
        r: n for r, n in calibration.reviewed.items() if r in calibration.flag_precision
    }
    report.calibrated_rate = calibration.calibrated_rate
    report.calibrated_low = calibration.lower
    report.calibrated_high = calibration.upper
    report.calibration_missing = list(calibration.missing)
    report.control_hallucination_share = calibration.control_hallucination_share
    report.control_reviewed = calibration.reviewed.get(CONTROL, 0)


async def offline(
    settings: Settings, report: DemoReport, stop: asyncio.Event, *, within: float
) -> None:
    """The offline metrics on the annotated rows (the code of `rag-monitor offline`)."""
    from monitor.offline import run_offline

    result = await until(
        run_offline(settings, progress=False),
        stop,
        what="the offline run",
        within=within,
    )
    report.offline_evaluated = result.evaluated
    report.offline_means = result.means()
    report.offline_findings = result.diagnoses()
    report.offline_tokens = result.usage.total_tokens


async def backlog_summary(settings: Settings, dsn: str, report: DemoReport) -> None:
    """What the backlog holds at the end: rows, interactions, statuses, redacted rows."""
    from monitor.backlog.store import BacklogStore
    from monitor.flags import CONTROL

    store = BacklogStore(dsn, settings)
    try:
        await store.start()
        stats = await store.stats()
        report.backlog_rows = stats.rows
        report.backlog_interactions = stats.interactions
        report.backlog_status = dict(stats.counts)
        report.backlog_controls = stats.interactions_by_reason.get(CONTROL, 0)
        report.redacted_rows = sum([1 async for row in store.rows() if row.redactions])
    finally:
        await store.close()


async def refresh_series(settings: Settings, dsn: str, exporter: Exporter) -> None:
    """The exporter's backlog series (rows per status, the calibration) read again from
    Postgres with the sidecar's own code, after the phases that changed it.

    The sidecar's sink stops with the sidecar, before the backlog is annotated, reviewed
    and evaluated: without this, /metrics would go on serving the sizes and the
    calibration it last read, while the report describes the backlog as it is now.
    """
    from monitor.backlog.gauges import BacklogGauges
    from monitor.backlog.store import BacklogStore

    store = BacklogStore(dsn, settings)
    gauges = BacklogGauges(store, exporter)
    try:
        await store.start()
        await gauges.refresh_stats()
        await gauges.refresh_calibration()
    finally:
        await store.close()
