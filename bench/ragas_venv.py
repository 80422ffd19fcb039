"""Run a function in the interpreter that has Ragas installed (the benches' ``--ragas-python``).

Ragas 0.4.3 and its LangChain stack live in their own venv (``.ci/run`` makes
/tmp/rag-monitor-ragas-venv), not beside `monitor`. A bench hands `run_child`
a self-contained function (stdlib and what that venv has; no `monitor`) and a
JSON job: the function's source runs as ``PATH -c SOURCE JOB_FILE RESULT_FILE``,
reads the job from ``sys.argv[1]`` and writes its result as JSON to
``sys.argv[2]``; `run_child` returns that result.
"""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

#: Ragas's usage analytics and LangChain's tracing would post over HTTP
QUIET = {
    "RAGAS_DO_NOT_TRACK": "true",
    "LANGCHAIN_TRACING_V2": "false",
    "LANGSMITH_TRACING": "false",
}


def run_child(
    python: str,
    child: Callable[[], None],
    job: Mapping[str, Any],
    *,
    timeout: float,
    env: Mapping[str, str] | None = None,
    show_stderr: bool = False,
) -> dict[str, Any]:
    """Run ``child`` in ``python`` on ``job``; its result. `RuntimeError` when it fails.

    ``env`` is added to this process's environment (secrets go here, never in the
    job file). With ``show_stderr`` the child's stderr (a progress bar) goes to
    ours; otherwise it is kept for the error message.
    """
    source = inspect.getsource(child) + f"\n{child.__name__}()\n"
    environment = os.environ | QUIET | dict(env or {})
    with tempfile.TemporaryDirectory(prefix="rag-monitor-ragas-") as tmp:
        job_path, result_path = Path(tmp) / "job.json", Path(tmp) / "result.json"
        job_path.write_text(json.dumps(job, ensure_ascii=False), encoding="utf-8")
        done = subprocess.run(
            [python, "-c", source, str(job_path), str(result_path)],
            stdout=subprocess.DEVNULL,
            stderr=None if show_stderr else subprocess.PIPE,
            text=True,
            env=environment,
            timeout=timeout,
            check=False,
        )
        if done.returncode != 0 or not result_path.is_file():
            tail = (done.stderr or "").strip()[-3000:] or "(its stderr is above)"
            raise RuntimeError(f"{python} exited with {done.returncode}:\n{tail}")
        result: dict[str, Any] = json.loads(result_path.read_text(encoding="utf-8"))
    return result
