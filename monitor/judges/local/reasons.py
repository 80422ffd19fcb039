"""How the local judge's reasons name what a claim was checked against and quote it."""

from __future__ import annotations

from collections.abc import Iterable

from monitor.judges.steps import VerifySource

#: What the claims of a ``verify`` are checked against, as reasons name it.
WHERE: dict[VerifySource, str] = {
    "context": "the context",
    "reference": "the reference",
    "response": "the response",
}


def excerpt(text: str, limit: int = 160) -> str:
    """``text`` quoted for a reason, cut at ``limit`` characters."""
    text = " ".join(text.split())
    return f"“{text if len(text) <= limit else text[: limit - 1].rstrip() + '…'}”"


def quote(items: Iterable[str], limit: int = 3) -> str:
    """Up to ``limit`` words, each in single quotes, and how many more."""
    listed = list(items)
    shown = ", ".join(f"'{w}'" for w in listed[:limit])
    return shown + (f" and {len(listed) - limit} more" if len(listed) > limit else "")
