"""``rag-monitor migrate`` and ``rag-monitor backlog stats|export|import|discard``.

The annotation loop::

    rag-monitor backlog export --status pending --format jsonl --out todo.jsonl
    # people add "reference" to the lines they can answer (JSONL, or CSV with id,reference)
    rag-monitor backlog import todo.jsonl      # pending/annotated rows -> annotated
    rag-monitor offline                        # annotated rows -> evaluated, with a report

`import` checks every line on its own: unknown ids, rows in the wrong status
(evaluated rows need ``--force``) and broken JSON/CSV lines are reported with
their line numbers and skipped; the exit code is 1 if any line was rejected.
A line may also carry reviewer ``verdicts`` (a JSON list of
``{"interaction_id"?, "reason", "verdict"}``, in a CSV column of that name too)
and a ``note``; CSV rows with neither a reference nor verdicts are skipped and
counted, not rejected (a filled-in export leaves most rows blank).

`stats` also prints the calibrated hallucination rate (`monitor.review.calibration`).

Exit codes: 0 done, 1 some input rejected (import lines, unknown ids to
discard), 2 usage or settings, 3 Postgres unreachable or a migration failed,
4 the backlog schema is missing migrations (run ``rag-monitor migrate``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import csv
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO, cast

from monitor.config import Settings, load_settings
from monitor.review.calibration import Calibration
from monitor.sinks import SinkError
from monitor.sinks.backlog import (
    EVALUATING,
    EXPORT_FORMATS,
    STATUSES,
    VERDICTS,
    BacklogSink,
    ExportFormat,
    ImportReport,
    ImportRow,
    MigrationError,
    VerdictInput,
)
from monitor.sinks.schema import SchemaBehind, check_schema

EXIT_OK = 0
EXIT_REJECTED = 1
EXIT_USAGE = 2
EXIT_UNAVAILABLE = 3
EXIT_SCHEMA = 4


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    migrate = subparsers.add_parser(
        "migrate", help="apply the Postgres migrations of the golden-set backlog"
    )
    migrate.set_defaults(handler=_migrate)

    backlog = subparsers.add_parser("backlog", help="inspect, export and annotate the backlog")
    sub = backlog.add_subparsers(dest="backlog_command", required=True, metavar="ACTION")

    stats = sub.add_parser("stats", help="rows per status")
    stats.add_argument("--json", action="store_true", help="one JSON object instead of a table")
    stats.set_defaults(handler=_stats)

    export = sub.add_parser("export", help="write rows as JSON lines, CSV or a Ragas dataset")
    export.add_argument("--status", choices=STATUSES, default="pending")
    export.add_argument("--format", dest="fmt", choices=EXPORT_FORMATS, default="jsonl")
    export.add_argument("--out", metavar="FILE", help="write here instead of stdout")
    export.set_defaults(handler=_export)

    imp = sub.add_parser(
        "import", help='add references from JSON lines {"id", "reference"} or CSV id,reference'
    )
    imp.add_argument("file", metavar="FILE", help="JSONL, or CSV (by .csv extension or --format)")
    imp.add_argument("--format", dest="fmt", choices=("auto", "jsonl", "csv"), default="auto")
    imp.add_argument(
        "--force", action="store_true", help="also replace references of evaluated rows"
    )
    imp.set_defaults(handler=_import_handler)

    discard = sub.add_parser("discard", help="mark rows as discarded (not worth a reference)")
    discard.add_argument("ids", nargs="+", metavar="ID")
    discard.set_defaults(handler=_discard)


# --- reading annotation files (pure)


def read_annotations(path: Path, fmt: str = "auto") -> list[ImportRow]:
    """The rows of an annotation file; unreadable lines become rows with ``error`` set."""
    text = path.read_text(encoding="utf-8-sig", errors="strict")
    if fmt == "auto":
        fmt = "csv" if path.suffix.lower() == ".csv" else "jsonl"
    return list(parse_csv(text) if fmt == "csv" else parse_jsonl(text))


def parse_jsonl(text: str) -> Iterator[ImportRow]:
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            yield ImportRow(line=number, error=f"broken JSON: {exc.msg} at column {exc.colno}")
            continue
        if not isinstance(data, dict):
            yield ImportRow(line=number, error="not a JSON object")
            continue
        yield _row(
            number, data.get("id"), data.get("reference"), data.get("verdicts"), data.get("note")
        )


def parse_csv(text: str) -> Iterator[ImportRow]:
    reader = csv.reader(text.splitlines(keepends=True), strict=True)
    start = 1
    try:
        header = next(reader)
    except StopIteration:
        return
    except csv.Error as exc:
        yield ImportRow(line=1, error=f"broken CSV header: {exc}")
        return
    columns = [h.strip().lower() for h in header]
    if "id" not in columns or "reference" not in columns:
        yield ImportRow(line=1, error="CSV header must name the columns id and reference")
        return
    id_at, ref_at = columns.index("id"), columns.index("reference")
    verdicts_at = columns.index("verdicts") if "verdicts" in columns else None
    note_at = columns.index("note") if "note" in columns else None
    start = reader.line_num + 1
    while True:
        try:
            fields = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            yield ImportRow(line=start, error=f"broken CSV row: {exc}")
            start = reader.line_num + 1
            continue
        line, start = start, reader.line_num + 1
        if not any(f.strip() for f in fields):
            continue
        if len(fields) != len(columns):
            yield ImportRow(
                line=line, error=f"broken CSV row: {len(fields)} fields, header has {len(columns)}"
            )
            continue
        verdicts_text = fields[verdicts_at].strip() if verdicts_at is not None else ""
        if not fields[ref_at].strip() and not verdicts_text:
            yield ImportRow(line=line, id=fields[id_at].strip() or None, blank=True)
            continue
        verdicts: object = None
        if verdicts_text:
            try:
                verdicts = json.loads(verdicts_text)
            except json.JSONDecodeError as exc:
                problem = f"verdicts: broken JSON: {exc.msg}"
                yield ImportRow(line=line, id=fields[id_at], error=problem)
                continue
        note = fields[note_at] if note_at is not None and fields[note_at].strip() else None
        yield _row(line, fields[id_at], fields[ref_at] or None, verdicts, note)


def _row(
    line: int, rid: object, reference: object, verdicts: object = None, note: object = None
) -> ImportRow:
    if not isinstance(rid, str) or not rid.strip():
        return ImportRow(line=line, error="missing id (a non-empty string)")
    if reference is not None and not isinstance(reference, str):
        return ImportRow(line=line, id=rid, error="reference must be a string")
    if note is not None and not isinstance(note, str):
        return ImportRow(line=line, id=rid, error="note must be a string")
    parsed: list[VerdictInput] = []
    if verdicts is not None:
        if not isinstance(verdicts, list):
            return ImportRow(line=line, id=rid, error="verdicts must be a list")
        for i, item in enumerate(verdicts):
            problem = verdict_problem(item)
            if problem is not None:
                return ImportRow(line=line, id=rid, error=f"verdicts[{i}]: {problem}")
            parsed.append(
                VerdictInput(
                    reason=item["reason"],
                    verdict=item["verdict"],
                    interaction_id=item.get("interaction_id"),
                )
            )
    return ImportRow(
        line=line, id=rid, reference=reference, verdicts=tuple(parsed), note=note
    )


def verdict_problem(item: object) -> str | None:
    """Why ``item`` is not a verdict object (None: it is one)."""
    if not isinstance(item, dict):
        return "not an object"
    for key in ("reason", "verdict"):
        if not isinstance(item.get(key), str) or not item[key]:
            return f"{key} must be a non-empty string"
    if item["verdict"] not in VERDICTS:
        return f"verdict must be one of {', '.join(VERDICTS)}"
    answer = item.get("interaction_id")
    if answer is not None and not isinstance(answer, str):
        return "interaction_id must be a string"
    return None


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


def _settings(args: argparse.Namespace) -> Settings:
    return load_settings(cast(str | None, args.config))


def _dsn(settings: Settings) -> str | None:
    if settings.pg_dsn is None:
        print("rag-monitor: set RAG_MONITOR_PG_DSN (or pg_dsn in --config)", file=sys.stderr)
        return None
    return settings.pg_dsn.get_secret_value()


def _run(args: argparse.Namespace, action: str) -> int:
    settings = _settings(args)
    dsn = _dsn(settings)
    if dsn is None:
        return EXIT_USAGE
    try:
        return asyncio.run(_with_sink(dsn, settings, args, action))
    except SinkError as exc:
        print(f"rag-monitor: {exc}", file=sys.stderr)
        return EXIT_UNAVAILABLE
    except MigrationError as exc:
        print(f"rag-monitor: {exc}", file=sys.stderr)
        return EXIT_UNAVAILABLE
    except SchemaBehind as exc:
        print(f"rag-monitor: {exc}", file=sys.stderr)
        return EXIT_SCHEMA


async def _with_sink(dsn: str, settings: Settings, args: argparse.Namespace, action: str) -> int:
    sink = BacklogSink(dsn, settings, stats_interval=0)
    await sink.start()
    try:
        if action == "migrate":
            applied = await sink.migrate()
            print(f"applied {', '.join(applied)}" if applied else "schema is up to date")
            return EXIT_OK
        await check_schema(sink)
        if action == "stats":
            return await _print_stats(sink, bool(args.json))
        if action == "export":
            return await _write_export(sink, args.status, cast(ExportFormat, args.fmt), args.out)
        if action == "import":
            return await _import_file(sink, Path(args.file), args.fmt, bool(args.force))
        return await _discard_rows(sink, list(dict.fromkeys(args.ids)))
    finally:
        await sink.close()


async def _discard_rows(sink: BacklogSink, ids: list[str]) -> int:
    """Discard ``ids``; name those not in the backlog and those being evaluated (kept)."""
    rows = {rid: await sink.get(rid) for rid in ids}
    unknown = [rid for rid, row in rows.items() if row is None]
    busy = [rid for rid, row in rows.items() if row is not None and row.status == EVALUATING]
    changed = await sink.discard([rid for rid in ids if rid not in unknown])
    print(f"{changed} row(s) discarded")
    if unknown:
        print(f"rag-monitor: no backlog row with id {', '.join(unknown)}", file=sys.stderr)
    if busy:
        print(f"rag-monitor: being evaluated, not discarded: {', '.join(busy)}", file=sys.stderr)
    return EXIT_OK if changed == len(ids) else EXIT_REJECTED


async def _print_stats(sink: BacklogSink, as_json: bool) -> int:
    stats = await sink.stats()
    calibration: Calibration | None = await sink.calibration()
    oldest = stats.oldest_pending.isoformat() if stats.oldest_pending else None
    if as_json:
        print(
            json.dumps(
                {
                    "counts": stats.counts,
                    "rows": stats.rows,
                    "interactions": stats.interactions,
                    "seen_total": stats.seen_total,
                    "oldest_pending": oldest,
                    "calibration": calibration.as_json() if calibration else None,
                }
            )
        )
        return EXIT_OK
    for status, n in stats.counts.items():
        print(f"{status:<11} {n:>8}")
    print(f"{'rows':<11} {stats.rows:>8}")
    print(f"{'interactions':<11} {stats.interactions:>7}")
    if oldest:
        print(f"oldest pending row: {oldest}")
    for line in calibration_lines(calibration) if calibration else []:
        print(line)
    return EXIT_OK


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def calibration_lines(cal: Calibration) -> list[str]:
    """The calibration as text lines (for ``backlog stats`` and the demo report)."""
    lines = [f"hallucination rate, raw (judge):       {_pct(cal.raw_rate)}"]
    if cal.calibrated_rate is None:
        lines.append("hallucination rate, calibrated:        n/a (" + "; ".join(cal.missing) + ")")
    else:
        lines.append(
            f"hallucination rate, calibrated:        {_pct(cal.calibrated_rate)}"
            f"  (95% interval {_pct(cal.lower)}-{_pct(cal.upper)})"
        )
    for reason, value in cal.flag_precision.items():
        lines.append(
            f"flag precision {reason + ':':<22} {_pct(value)}"
            f"  ({cal.reviewed.get(reason, 0)} reviewed)"
        )
    lines.append(
        f"control answers that hallucinate:      {_pct(cal.control_hallucination_share)}"
        f"  ({cal.reviewed.get('control', 0)} reviewed)"
    )
    return lines


async def _write_export(sink: BacklogSink, status: str, fmt: ExportFormat, out: str | None) -> int:
    if out is None:
        async for line in sink.export(status, fmt):
            sys.stdout.write(line)
        sys.stdout.flush()
        return EXIT_OK
    target = Path(out)
    # write next to the target and rename: a failed export never leaves half a file
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            count = 0
            async for line in sink.export(status, fmt):
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


async def _import_file(sink: BacklogSink, path: Path, fmt: str, force: bool) -> int:
    try:
        rows = read_annotations(path, fmt)
    except (OSError, UnicodeDecodeError) as exc:
        print(f"rag-monitor: cannot read {path}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    report = await sink.import_references(rows, force=force)
    print_report(report, sys.stdout, sys.stderr)
    return EXIT_REJECTED if report.rejected else EXIT_OK


def _migrate(args: argparse.Namespace) -> int:
    return _run(args, "migrate")


def _stats(args: argparse.Namespace) -> int:
    return _run(args, "stats")


def _export(args: argparse.Namespace) -> int:
    return _run(args, "export")


def _import_handler(args: argparse.Namespace) -> int:
    return _run(args, "import")


def _discard(args: argparse.Namespace) -> int:
    return _run(args, "discard")

