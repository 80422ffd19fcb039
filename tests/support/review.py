"""Texts that would run script if the review page failed to escape them, and a backlog
record that carries them in every text a page shows."""

from __future__ import annotations

from monitor.records import ScoredRecord
from tests.support.backlog import scored

XSS_SCRIPT = "<script>document.title='pwned'</script>"
XSS_IMG = "<img src=x onerror=\"document.title='pwned'\">"


def xss_record(rid: str) -> ScoredRecord:
    """A record with a payload in its question, answer, context, route and judge reason."""
    return scored(
        rid,
        f"Question {XSS_SCRIPT}",
        response=f"Answer {XSS_IMG} {XSS_SCRIPT}",
        contexts=(f"context {XSS_IMG}",),
        metadata={"route": XSS_SCRIPT},
        details={"statements": [{"statement": XSS_IMG, "verdict": 0, "reason": XSS_SCRIPT}]},
    )
