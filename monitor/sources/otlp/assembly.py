"""One trace's spans → an interaction record: which retrieval and which model call count.

OpenInference or OTel GenAI conventions; the mapping, and which calls count when a trace
holds several: docs/opentelemetry.md, "From spans to an interaction".
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from monitor.sources.otlp.spans import (
    DOCUMENTS,
    ENVIRONMENT,
    GENAI_DOCUMENTS,
    GENAI_INPUT,
    GENAI_MODEL,
    GENAI_OPERATION,
    GENAI_OUTPUT,
    INPUT_MIME,
    INPUT_VALUE,
    LLM_INPUT,
    LLM_MODEL,
    LLM_OUTPUT,
    METADATA,
    OUTPUT_MIME,
    OUTPUT_VALUE,
    SERVICE,
    SPAN_KIND,
    AttrValue,
    Span,
)

#: GenAI operations that are a model call
_GENAI_LLM = frozenset({"chat", "text_completion", "generate_content"})
_ROOT_KINDS = frozenset({"CHAIN", "AGENT"})


class IncompleteTrace(Exception):
    """A trace that cannot become an interaction. `reason` is a short, bounded label."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class _Retrieval:
    span: Span
    documents: list[dict[str, Any]]


def _kind(span: Span) -> str | None:
    """``retriever``, ``llm``, or None; OpenInference's kind first, then GenAI's operation."""
    kind = span.attributes.get(SPAN_KIND)
    if isinstance(kind, str):
        upper = kind.upper()
        if upper == "RETRIEVER":
            return "retriever"
        if upper == "LLM":
            return "llm"
        return None
    operation = span.attributes.get(GENAI_OPERATION)
    if operation == "retrieval":
        return "retriever"
    if operation in _GENAI_LLM:
        return "llm"
    return None


def assemble(spans: Iterable[Span], *, route_attribute: str | None = None) -> dict[str, Any]:
    """One trace's spans → a record of the interaction schema (``id`` = the trace id).

    Raises `IncompleteTrace` with ``no_llm`` (no model call), ``no_retrieval`` (no
    retrieval before the answering call), ``no_question`` or ``no_answer``.
    """
    spans = sorted(spans, key=lambda s: (s.end_ns, s.start_ns, s.span_id))
    if not spans:
        raise IncompleteTrace("no_llm")
    llms = [s for s in spans if _kind(s) == "llm"]
    if not llms:
        raise IncompleteTrace("no_llm")
    answering = llms[-1]  # ended last (ties: started last)
    rounds = _last_round(spans, llms, answering)
    if not rounds:
        raise IncompleteTrace("no_retrieval")
    root = next((s for s in spans if s.is_root), None)
    chain = _top_chain(spans)
    question = _question(chain, root, answering)
    if question is None:
        raise IncompleteTrace("no_question")
    answer = _answer(chain, answering)
    if answer is None:
        raise IncompleteTrace("no_answer")
    contexts = _merge(r.documents for r in rounds)
    anchor = root or chain or answering  # the span a score links to
    record: dict[str, Any] = {
        "id": anchor.trace_id,
        "trace_id": anchor.trace_id,
        "span_id": anchor.span_id,
        "user_input": question,
        "retrieved_contexts": contexts,
        "response": answer,
        "timestamp": _iso(min(s.start_ns for s in spans)),
        "metadata": _metadata(spans, chain or anchor, anchor, answering, route_attribute),
    }
    return record


def _last_round(spans: list[Span], llms: list[Span], answering: Span) -> list[_Retrieval]:
    before = [s for s in spans if _kind(s) == "retriever" and s.end_ns <= answering.start_ns]
    if not before:
        return []
    last = before[-1]
    earlier_llm_end = max(
        (s.end_ns for s in llms if s is not answering and s.end_ns <= last.start_ns), default=None
    )
    chosen = [s for s in before if earlier_llm_end is None or s.end_ns > earlier_llm_end]
    out = [_Retrieval(s, _documents(s)) for s in chosen]
    return [r for r in out if r.documents] or out[-1:]


def _documents(span: Span) -> list[dict[str, Any]]:
    """OpenInference's flattened ``retrieval.documents.N.document.*``, or GenAI's list."""
    found: dict[int, dict[str, Any]] = {}
    for key, value in span.attributes.items():
        if not key.startswith(DOCUMENTS):
            continue
        index, _, name = key[len(DOCUMENTS) :].partition(".document.")
        if not index.isdigit():
            continue
        doc = found.setdefault(int(index), {})
        if name == "content" and isinstance(value, str):
            doc["text"] = value
        elif name == "id" and isinstance(value, str | int):
            doc["id"] = str(value)
        elif name == "score" and isinstance(value, int | float) and not isinstance(value, bool):
            doc["score"] = float(value)
    if found:
        return [found[i] for i in sorted(found) if "text" in found[i]]
    raw = _structured(span.attributes.get(GENAI_DOCUMENTS))
    docs: list[dict[str, Any]] = []
    if isinstance(raw, list | tuple):
        for item in raw:
            if not isinstance(item, dict):
                continue
            text = item.get("content", item.get("text"))
            if not isinstance(text, str):
                continue
            entry: dict[str, Any] = {"text": text}
            if isinstance(item.get("id"), str | int):
                entry["id"] = str(item["id"])
            score = item.get("score")
            if isinstance(score, int | float) and not isinstance(score, bool):
                entry["score"] = float(score)
            docs.append(entry)
    return docs


def _merge(groups: Iterable[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    seen: set[tuple[str, str]] = set()
    out: list[dict[str, Any]] = []
    for docs in groups:
        for doc in docs:
            key = ("id", doc["id"]) if "id" in doc else ("text", doc["text"])
            if key not in seen:
                seen.add(key)
                out.append(doc)
    return out


def _top_chain(spans: list[Span]) -> Span | None:
    """The outermost CHAIN or AGENT span (the earliest to start; the longest on a tie)."""
    chains = [s for s in spans if str(s.attributes.get(SPAN_KIND, "")).upper() in _ROOT_KINDS]
    return min(chains, key=lambda s: (s.start_ns, -s.end_ns), default=None)


def _question(chain: Span | None, root: Span | None, answering: Span) -> str | None:
    if chain is not None:
        text = _plain(chain, INPUT_VALUE, INPUT_MIME)
        if text:
            return text
    if root is not None and root is not answering and SPAN_KIND not in root.attributes:
        text = _last_message(_genai_messages(root.attributes.get(GENAI_INPUT)), "user")
        if text:
            return text
    return _llm_text(answering, INPUT_VALUE, INPUT_MIME, LLM_INPUT, GENAI_INPUT, "user")


def _answer(chain: Span | None, answering: Span) -> str | None:
    if chain is not None:
        text = _plain(chain, OUTPUT_VALUE, OUTPUT_MIME)
        if text:
            return text
    return _llm_text(answering, OUTPUT_VALUE, OUTPUT_MIME, LLM_OUTPUT, GENAI_OUTPUT, "assistant")


def _llm_text(
    span: Span, key: str, mime_key: str, messages_prefix: str, genai_key: str, role: str
) -> str | None:
    """The LLM span's text on one side: its plain ``key`` attribute, else its last ``role``
    message in OpenInference's flattened messages, else in GenAI's."""
    return (
        _plain(span, key, mime_key)
        or _last_message(_flat_messages(span, messages_prefix), role)
        or _last_message(_genai_messages(span.attributes.get(genai_key)), role)
    )


def _plain(span: Span, key: str, mime_key: str) -> str | None:
    """A text attribute, unless its mime type says it is JSON (a serialised invocation)."""
    value = span.attributes.get(key)
    if not isinstance(value, str) or not value.strip():
        return None
    if span.attributes.get(mime_key) == "application/json":
        return None
    return value


def _flat_messages(span: Span, prefix: str) -> list[tuple[str, str]]:
    """OpenInference's ``llm.input_messages.N.message.role/content`` → [(role, text)]."""
    found: dict[int, dict[str, str]] = {}
    for key, value in span.attributes.items():
        if not key.startswith(prefix) or not isinstance(value, str):
            continue
        index, _, name = key[len(prefix) :].partition(".message.")
        if index.isdigit() and name in ("role", "content"):
            found.setdefault(int(index), {})[name] = value
    return [(m.get("role", ""), m["content"]) for _, m in sorted(found.items()) if "content" in m]


def _genai_messages(value: AttrValue | None) -> list[tuple[str, str]]:
    """GenAI's ``[{"role", "parts": [{"type": "text", "content"}]}]`` → [(role, text)]."""
    raw = _structured(value)
    out: list[tuple[str, str]] = []
    if not isinstance(raw, list | tuple):
        return out
    for message in raw:
        if not isinstance(message, dict):
            continue
        parts = message.get("parts")
        texts: list[str] = []
        if isinstance(parts, list | tuple):
            texts = [
                p["content"]
                for p in parts
                if isinstance(p, dict)
                and p.get("type") == "text"
                and isinstance(p.get("content"), str)
            ]
        elif isinstance(message.get("content"), str):
            texts = [message["content"]]
        if texts:
            out.append((str(message.get("role", "")), "\n".join(texts)))
    return out


def _structured(value: AttrValue | None) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return None
    return value


def _last_message(messages: list[tuple[str, str]], role: str) -> str | None:
    for who, text in reversed(messages):
        if who == role and text.strip():
            return text
    return None


def _metadata(
    spans: list[Span], chain: Span, anchor: Span, answering: Span, route_attribute: str | None
) -> dict[str, Any]:
    own = _structured(chain.attributes.get(METADATA))
    meta: dict[str, Any] = dict(own) if isinstance(own, dict) else {}
    service = anchor.resource.get(SERVICE)
    if isinstance(service, str):
        meta["service"] = service
    for name in ENVIRONMENT:
        environment = anchor.resource.get(name)
        if isinstance(environment, str):
            meta["environment"] = environment
            break
    if route_attribute:
        ordered = [anchor, *(s for s in spans if s is not anchor)]
        for span in ordered:
            route = span.attributes.get(route_attribute, span.resource.get(route_attribute))
            if isinstance(route, str):
                meta["route"] = route
                break
    model = answering.attributes.get(LLM_MODEL, answering.attributes.get(GENAI_MODEL))
    if isinstance(model, str):
        meta["model"] = model
    return meta


def _iso(unix_ns: int) -> str | None:
    if unix_ns <= 0:
        return None
    return datetime.fromtimestamp(unix_ns / 1e9, UTC).isoformat()
