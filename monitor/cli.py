"""The `rag-monitor` command line.

Each command lives in `monitor/commands/<name>.py`: ``add_arguments(parser)`` adds its
arguments, ``handle(args)`` runs it and returns the exit code; `COMMANDS` holds what its
help page says. Signal handling lives in what runs long jobs (`monitor.app.serve`, the
`demo` command), never in constructors.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from monitor import __version__
from monitor.config import ConfigError
from monitor.logging import configure_logging

#: stdout was closed by its reader (128 + SIGPIPE, what a shell reports for `yes | head`)
EXIT_BROKEN_PIPE = 141

#: the log level until a command has read its settings (their ``log_level`` then wins)
LOG_LEVEL_ENV = "RAG_MONITOR_LOG_LEVEL"
_LEVELS = ("debug", "info", "warning", "error")


@dataclass(frozen=True)
class Command:
    """What ``rag-monitor COMMAND --help`` says of a command: the one line that lists it,
    its description and its epilog (the exit codes)."""

    help: str
    description: str
    epilog: str


#: every command, as ``rag-monitor --help`` lists it: its module under monitor.commands
#: (of the same name) adds its arguments (``add_arguments(parser)``) and runs it
#: (``handle(args)``, which returns the exit code)
COMMANDS = {
    "run": Command(
        help="the sidecar: consume Kafka, score a sample within the token budget, export metrics",
        description="Consume interactions from Kafka, score a sample of them within the token "
        "budget and export the scores on /metrics; with RAG_MONITOR_PG_DSN set, flagged "
        "records also go to the Postgres backlog. SIGTERM or Ctrl-C stops it cleanly: records "
        "in flight get RAG_MONITOR_SHUTDOWN_GRACE_SECONDS to finish, then their offsets are "
        "committed. A broker that goes away while it runs is retried until it is back.",
        epilog="Exit codes: 0 stopped cleanly, 2 invalid settings, 3 Kafka unreachable at start "
        "(or it refused the budget's ledger topic).",
    ),
    "score": Command(
        help="score a JSON-lines file of interactions (same scorer as the sidecar)",
        description="Score a JSON-lines file of interactions with the sidecar's scorer and "
        "write one JSON line per input line, in input order, to stdout (or --out): "
        '"id"; "scores", each metric\'s value from 0 to 1, null where it could not be scored; '
        '"flags", the reasons the sidecar would queue the record for review (hallucination, '
        "low_relevancy, low_utility: a score below its threshold in RAG_MONITOR_THRESHOLDS; "
        'no_context: no retrieved context; noncommittal: an evasive answer); "details", per '
        "metric what the judge decided and why (each "
        "statement's verdict and reason, the generated questions, each context's verdict); "
        '"usage", the judge\'s calls and tokens; and "error" when the judge failed or the line '
        "is not a valid record (the run goes on). On stderr: a progress bar, then a summary: "
        "each metric's mean, how many records were scored, invalid and flagged (per reason), "
        "each invalid line's error, and what the judge spent.",
        epilog="Exit codes: 0 at least one record scored, 1 none was (the cause in the last line "
        "on stderr), 2 unusable input (unreadable, or no non-empty line), arguments or settings.",
    ),
    "migrate": Command(
        help="apply the Postgres migrations of the golden-set backlog",
        description="Apply the backlog's pending Postgres migrations to the database of "
        "RAG_MONITOR_PG_DSN, each once; a schema that is up to date is left as it is.",
        epilog="Exit codes: 0 done, 2 invalid settings, 3 Postgres unreachable or a migration "
        "failed.",
    ),
    "backlog": Command(
        help="inspect, export and annotate the backlog",
        description="Inspect the golden-set backlog in Postgres, export its rows for "
        "annotation, import the references and verdicts people wrote, or discard rows.",
        epilog="Exit codes: 0 done, 1 some input rejected, 2 usage or settings, 3 Postgres "
        "unreachable, 4 the backlog schema is behind (run rag-monitor migrate).",
    ),
    "offline": Command(
        help="score annotated backlog rows with the reference-based metrics",
        description="Score the annotated rows of the backlog with the reference-based metrics "
        "and print a report; progress goes to stderr, the report to stdout. Several runners "
        "may work side by side: each claims rows of its own. The judge has its own token "
        "budget, RAG_MONITOR_OFFLINE_TOKEN_BUDGET (unlimited by default).",
        epilog="Exit codes: 0 done, 2 invalid options or settings, 3 Postgres unreachable, "
        "4 the backlog schema is behind (run rag-monitor migrate).",
    ),
    "review": Command(
        help="the web page for reviewing and annotating the golden-set backlog",
        description="Serve the review pages over the backlog, where reviewers read flagged "
        "answers, record verdicts and write references, until Ctrl-C or SIGTERM. On an address "
        "other than loopback it needs RAG_MONITOR_REVIEW_TOKENS; the backlog must be migrated.",
        epilog="Exit codes: 0 stopped, 2 invalid settings or tokens, 3 Postgres unreachable.",
    ),
    "demo": Command(
        help="run everything embedded (broker, Postgres, judge) on a bundled traffic set",
        description="Run the whole product on embedded parts: start a Kafka-protocol broker and "
        "a Postgres of its own, produce the bundled traffic set, run the sidecar on it with a "
        "live progress line, annotate the backlog from the set's reference answers, run the "
        "offline metrics and print a report. Ctrl-C, SIGTERM or a closed terminal (SIGHUP) "
        "stops everything cleanly; "
        "nothing is left behind unless --keep-dir is given.",
        epilog="Exit codes: 0 done, 1 the demo failed (also when the judge failed on every "
        "record), 2 invalid options, settings, traffic file or a taken port, 130 interrupted.",
    ),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rag-monitor",
        description="Production monitor for RAG services: score live interactions from Kafka, "
        "export the scores to Prometheus and keep a golden-set backlog in Postgres.",
        epilog="Settings come from RAG_MONITOR_* environment variables or a --config file; "
        "rag-monitor COMMAND --help describes each command.",
    )
    parser.add_argument(
        "--version", action="version", version=f"rag-monitor {__version__}",
        help="print the version and exit",
    )  # fmt: skip
    parser.add_argument(
        "--config",
        metavar="FILE",
        help="read settings from this YAML file (RAG_MONITOR_* variables win over it)",
    )
    sub = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", help="what to do (one of these)"
    )
    # imported here, not at the top: what only reads `COMMANDS` imports no command (each
    # imports what it runs: the app, the demo, the review server)
    from monitor.commands import backlog, demo, migrate, offline, review, run, score

    commands = (run, score, migrate, backlog, offline, review, demo)
    modules = {module.__name__.rpartition(".")[2]: module for module in commands}
    for name, command in COMMANDS.items():
        module = modules[name]
        add_arguments: Callable[[argparse.ArgumentParser], None] = module.add_arguments
        handle: Callable[[argparse.Namespace], int] = module.handle
        command_parser = sub.add_parser(
            name, help=command.help, description=command.description, epilog=command.epilog
        )
        add_arguments(command_parser)
        command_parser.set_defaults(handler=handle)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Callable[[argparse.Namespace], int] = args.handler
    # before anything logs: JSON lines on stderr, never on stdout (score's JSON lines,
    # `backlog stats --json`); a command that reads its settings applies their level
    level = os.environ.get(LOG_LEVEL_ENV, "").strip().lower()
    configure_logging(level if level in _LEVELS else "info")
    try:
        code = handler(args)
        sys.stdout.flush()  # inside the try: a reader that left shows up here, not at exit
        return code
    except BrokenPipeError:
        # the reader went away (`… | head`): stop quietly, as a command killed by SIGPIPE
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except ConfigError as exc:
        print(f"rag-monitor: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:
        damaged = _model_file_error(exc)
        if damaged is None:
            raise
        # a shipped model file missing or changed: the installation, not the input, is wrong
        print(f"rag-monitor: {damaged}; reinstall rag-monitor to restore it", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("rag-monitor: interrupted", file=sys.stderr)
        return 130


def _model_file_error(exc: BaseException) -> BaseException | None:
    """The local judge's `ModelFileError` that ``exc`` is or was raised from, if any.

    Only a judge that loaded its model files can raise it: the module is imported here
    only then, so a command that never ran the local judge does not pay for numpy.
    """
    if "monitor.judges.local.embedder" not in sys.modules:
        return None
    from monitor.judges.local.embedder import ModelFileError

    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, ModelFileError):
            return cause
        cause = cause.__cause__
    return None


if __name__ == "__main__":
    sys.exit(main())
