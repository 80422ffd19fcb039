"""The `rag-monitor` command line.

Each command lives in `monitor/commands/<name>.py` with a ``register(subparsers)``
function that adds its parser and sets ``handler`` to a callable taking the
parsed arguments and returning an exit code. Signal handling lives in what
runs long jobs (`monitor.app.serve`, the `demo` command), never in constructors.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence

from monitor import __version__
from monitor.config import ConfigError
from monitor.logging import configure_logging

#: stdout was closed by its reader (128 + SIGPIPE, what a shell reports for `yes | head`)
EXIT_BROKEN_PIPE = 141

#: the log level until a command has read its settings (their ``log_level`` then wins)
LOG_LEVEL_ENV = "RAG_MONITOR_LOG_LEVEL"
_LEVELS = ("debug", "info", "warning", "error")

#: command name -> module under monitor.commands
COMMANDS = {
    "run": "run",
    "score": "score",
    "migrate": "backlog",
    "backlog": "backlog",
    "offline": "offline",
    "review": "review",
    "demo": "demo",
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
    registered: set[str] = set()
    for module_name in dict.fromkeys(COMMANDS.values()):
        module = importlib.import_module(f"monitor.commands.{module_name}")
        register: Callable[[argparse._SubParsersAction[argparse.ArgumentParser]], None]
        register = module.register
        register(sub)
        registered.add(module_name)
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
