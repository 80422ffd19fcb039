"""A labelled answer as the support model reads it: each claim (as the local judge cuts it)
with its nearest windows."""

from __future__ import annotations

from typing import Any

from monitor.judges.local.claims import claims
from monitor.judges.local.embedder import MiniLMEmbedder
from monitor.judges.local.windows import nearest, windows_of


class Windows:
    def __init__(self) -> None:
        self.embedder = MiniLMEmbedder(threads=1)

    def candidates(self, record: dict[str, Any]) -> list[tuple[str, list[str]]]:
        contexts = [
            c if isinstance(c, str) else str(c["text"]) for c in record["retrieved_contexts"]
        ]
        question = str(record.get("user_input") or "")
        said = claims(str(record["response"]), question) or [str(record["response"])]
        found = windows_of(contexts)
        return [
            (s, [found[i] for i in idx])
            for s, idx in zip(said, nearest(self.embedder, said, found), strict=True)
        ]
