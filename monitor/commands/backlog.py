"""``rag-monitor backlog stats|export|import|discard``, and ``rag-monitor migrate``'s store.

See docs/review.md, "The backlog" (the annotation loop and the exit codes).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import TextIO, cast

from monitor.backlog.annotations import read_annotations
from monitor.backlog.calibration import (
    CALIBRATED_MEANING,
    MIN_JUDGE_VERDICTS,
    RAW_MEANING,
    Calibration,
    JudgePrecision,
    at_edge,
)
from monitor.backlog.export import EXPORT_FORMATS, ExportFormat, export_rows
from monitor.backlog.migrations import MigrationError, SchemaBehind, check_schema
from monitor.backlog.reviews import ImportReport
from monitor.backlog.rows import EVALUATING, STATUSES
from monitor.backlog.store import BacklogStore, StoreError
from monitor.commands import backlog_dsn, command_settings, fail
from monitor.commands.exits import EXIT_OK, EXIT_SCHEMA, EXIT_UNAVAILABLE, EXIT_USAGE
from monitor.config import Settings
from monitor.flags import CONTROL, HALLUCINATION

#: some input rejected (the rest done)
EXIT_REJECTED = 1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(
        dest="backlog_command", required=True, metavar="ACTION", help="what to do (one of these)"
    )

    stats = sub.add_parser(
        "stats",
        help="count the rows per status, with the calibrated hallucination rate",
        description="Count the backlog's rows per status and print the hallucination rate, "
        "raw and calibrated by the reviewers' verdicts.",
    )
    stats.add_argument(
        "--json", action="store_true", help="print one JSON object instead of a table"
    )

    export = sub.add_parser(
        "export",
        help="write rows as JSON lines, CSV or a Ragas dataset",
        description="Write the backlog rows of one status as JSON lines, CSV or a Ragas "
        "evaluation dataset, to stdout or to a file written whole or not at all.",
    )
    export.add_argument(
        "--status",
        choices=STATUSES,
        default="pending",
        help="export the rows in this status (default: pending)",
    )
    export.add_argument(
        "--format",
        dest="fmt",
        choices=EXPORT_FORMATS,
        default="jsonl",
        help="jsonl: one row per line; csv: a sheet to fill in; ragas: a Ragas evaluation "
        "dataset (default: jsonl)",
    )
    export.add_argument(
        "--out", metavar="FILE", help="write to FILE instead of stdout (whole or not at all)"
    )

    imp = sub.add_parser(
        "import",
        help='add references from JSON lines {"id", "reference"} or CSV id,reference',
        description="Add the references (and reviewer verdicts) of a filled-in export to "
        "their rows, which become annotated. Each line is checked on its own: a rejected line "
        "is reported with its number and the others are still imported.",
    )
    imp.add_argument(
        "file",
        metavar="FILE",
        help="the annotated file: JSON lines, or CSV (by its .csv name or --format)",
    )
    imp.add_argument(
        "--format",
        dest="fmt",
        choices=("auto", "jsonl", "csv"),
        default="auto",
        help="read FILE as this (default auto: CSV when its name ends in .csv, else JSON lines)",
    )
    imp.add_argument(
        "--force", action="store_true", help="also replace the references of evaluated rows"
    )

    discard = sub.add_parser(
        "discard",
        help="mark rows as discarded (not worth a reference)",
        description="Mark backlog rows as discarded, so nobody is asked for their reference; "
        "rows being evaluated are kept.",
    )
    discard.add_argument("ids", nargs="+", metavar="ID", help="the id of a backlog row")


def print_report(report: ImportReport, out: TextIO, err: TextIO) -> None:
    for line, rid, before in report.changed:
        print(f"line {line}: {rid}: {before} -> annotated", file=out)
    for line, rejected_id, reason in report.rejected:
        who = f"{rejected_id}: " if rejected_id is not None else ""
        print(f"line {line}: rejected: {who}{reason}", file=err)
    summary = f"{len(report.changed)} row(s) annotated, {len(report.rejected)} line(s) rejected"
    if report.verdicts:
        summary += f", {report.verdicts} verdict(s) recorded"
    if report.skipped:
        summary += f", {len(report.skipped)} blank row(s) skipped"
    print(summary, file=out)


# --- handlers


def handle(args: argparse.Namespace) -> int:
    return run_action(args, args.backlog_command)


def run_action(args: argparse.Namespace, action: str) -> int:
    """Run ``action`` (migrate, or a backlog action) on the backlog's store."""
    settings = command_settings(args)
    dsn = backlog_dsn(settings)
    if dsn is None:
        return EXIT_USAGE
    try:
        return asyncio.run(_with_store(dsn, settings, args, action))
    except (StoreError, MigrationError) as exc:
        return fail(exc, EXIT_UNAVAILABLE)
    except SchemaBehind as exc:
        return fail(exc, EXIT_SCHEMA)


async def _with_store(dsn: str, settings: Settings, args: argparse.Namespace, action: str) -> int:
    store = BacklogStore(dsn, settings)
    await store.start()
    try:
        if action == "migrate":
            applied = await store.migrate()
            print(f"applied {', '.join(applied)}" if applied else "schema is up to date")
            return EXIT_OK
        await check_schema(store)
        if action == "stats":
            return await _print_stats(store, bool(args.json))
        if action == "export":
            return await _write_export(store, args.status, cast(ExportFormat, args.fmt), args.out)
        if action == "import":
            return await _import_file(store, Path(args.file), args.fmt, bool(args.force))
        return await _discard_rows(store, list(dict.fromkeys(args.ids)))
    finally:
        await store.close()


async def _discard_rows(store: BacklogStore, ids: list[str]) -> int:
    """Discard ``ids``; name those not in the backlog and those being evaluated (kept)."""
    rows = {rid: await store.get(rid) for rid in ids}
    unknown = [rid for rid, row in rows.items() if row is None]
    busy = [rid for rid, row in rows.items() if row is not None and row.status == EVALUATING]
    changed = await store.discard([rid for rid in ids if rid not in unknown])
    print(f"{changed} row(s) discarded")
    if unknown:
        print(f"rag-monitor: no backlog row with id {', '.join(unknown)}", file=sys.stderr)
    if busy:
        print(f"rag-monitor: being evaluated, not discarded: {', '.join(busy)}", file=sys.stderr)
    return EXIT_OK if changed == len(ids) else EXIT_REJECTED


async def _print_stats(store: BacklogStore, as_json: bool) -> int:
    stats = await store.stats()
    calibration: Calibration | None = await store.calibration()
    oldest = stats.oldest_pending.isoformat() if stats.oldest_pending else None
    if as_json:
        print(
            json.dumps(
                {
                    "counts": stats.counts,
                    "rows": stats.rows,
                    "interactions": stats.interactions,
                    "interactions_by_reason": stats.interactions_by_reason,
                    "seen_total": stats.seen_total,
                    "oldest_pending": oldest,
                    "calibration": calibration.as_json() if calibration else None,
                    "hallucination_rule": store.hallucination_rule,
                }
            )
        )
        return EXIT_OK
    for status, n in stats.counts.items():
        print(f"{status:<11} {n:>8}")
    print(f"{'rows':<11} {stats.rows:>8}")
    print(f"{'interactions':<11} {stats.interactions:>7}")
    if stats.interactions_by_reason:
        by_reason = ", ".join(f"{r} {n}" for r, n in sorted(stats.interactions_by_reason.items()))
        print(f"  queued for: {by_reason} (an interaction can have several reasons)")
    if oldest:
        print(f"oldest pending row: {oldest}")
    for line in calibration_lines(calibration, store.hallucination_rule) if calibration else []:
        print(line)
    return EXIT_OK


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def _edge(cal: Calibration) -> str | None:
    return at_edge(cal.calibrated_rate, cal.lower, cal.upper,
                   cal.flag_precision.get(HALLUCINATION), cal.control_hallucination_share,
                   cal.reviewed.get(CONTROL, 0))  # fmt: skip


def calibration_lines(cal: Calibration, rule: str = "") -> list[str]:
    """The calibration as text lines (for ``backlog stats``): the calibrated rate first, the
    raw rate with what bounds the judge's error (flag precision, with the reviews behind
    it), each rate with its meaning."""
    raw = f"hallucination rate, raw (judge):       {_pct(cal.raw_rate)}"
    if cal.traffic is not None:
        t = cal.traffic
        raw += f"  ({t.hallucinations} of {t.scored} records with a faithfulness score)"
    else:
        raw += "  (estimated from the backlog's answers: no traffic totals)"
    if cal.calibrated_rate is None:
        calibrated = [
            "hallucination rate, calibrated:        n/a (" + "; ".join(cal.missing) + ")",
            raw,
            f"  {RAW_MEANING}",
        ]
    else:
        edge = [f"  {text}"] if (text := _edge(cal)) is not None else []
        calibrated = [
            f"hallucination rate, calibrated:        {_pct(cal.calibrated_rate)}"
            f"  (95% interval {_pct(cal.lower)}-{_pct(cal.upper)})",
            f"  {CALIBRATED_MEANING}",
            *edge,
            raw,
            f"  {RAW_MEANING}",
        ]
    lines = [*calibrated, f"  counted: {rule}"] if rule else calibrated
    for reason, value in cal.flag_precision.items():
        lines.append(
            f"flag precision {reason + ':':<22} {_pct(value)}"
            f"  ({cal.reviewed.get(reason, 0)} reviewed)"
        )
    lines.append(
        f"control answers that hallucinate:      {_pct(cal.control_hallucination_share)}"
        f"  ({cal.reviewed.get(CONTROL, 0)} reviewed)"
    )
    return lines + [_judge_line(judge) for judge in cal.judge_precision.values()]


def _judge_line(judge: JudgePrecision) -> str:
    """One judge's flag precision (docs/review.md, "Both judges"), or why it is not shown."""
    label = f"flag precision, {judge.name}:"
    if judge.precision is None:
        return f"{label:<38} not enough verdicts ({judge.reviewed} of {MIN_JUDGE_VERDICTS} needed)"
    return (
        f"{label:<38} {_pct(judge.precision)}  (95% interval {_pct(judge.lower)}-"
        f"{_pct(judge.upper)}, {judge.reviewed} reviewed)"
    )


async def _write_export(
    store: BacklogStore, status: str, fmt: ExportFormat, out: str | None
) -> int:
    if out is None:
        async for line in export_rows(store.rows(status), fmt):
            sys.stdout.write(line)
        sys.stdout.flush()
        return EXIT_OK
    target = Path(out)
    # write next to the target and rename: a failed export never leaves half a file
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            count = 0
            async for line in export_rows(store.rows(status), fmt):
                fh.write(line)
                count += 1
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    rows = count - 1 if fmt == "csv" else count
    print(f"exported {rows} {status} row(s) to {target}", file=sys.stderr)
    return EXIT_OK


async def _import_file(store: BacklogStore, path: Path, fmt: str, force: bool) -> int:
    try:
        rows = read_annotations(path, fmt)
    except (OSError, UnicodeDecodeError) as exc:
        return fail(f"cannot read {path}: {exc}")
    report = await store.import_references(rows, force=force)
    print_report(report, sys.stdout, sys.stderr)
    return EXIT_REJECTED if report.rejected else EXIT_OK
