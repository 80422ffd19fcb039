"""The review pages as HTML strings. Pure: every stored text goes through `esc`.

See docs/review.md, "The review page".
"""

from __future__ import annotations

import html
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import quote, urlencode

from monitor.backlog.calibration import (
    CALIBRATED_MEANING,
    MIN_JUDGE_VERDICTS,
    RAW_MEANING,
    VERDICTS,
    Calibration,
    JudgePrecision,
    judge_error,
)
from monitor.backlog.rows import (
    STATUSES,
    Answer,
    BacklogRow,
    JudgeCount,
    QueueItem,
    describe_judge,
)
from monitor.flags import CONTROL, HALLUCINATION
from monitor.metrics.faithfulness import HALLUCINATION_PROBABILITY
from monitor.review import decisive

SHORTCUTS_QUEUE = (("j / k", "next / previous row"), ("Enter or o", "open the row"))
SHORTCUTS_ROW = (
    ("j / k", "next / previous row (unsaved input is lost)"),
    ("1 / 2 / 3", "confirmed / false alarm / unsure for the current verdict, then the next"),
    ("e", "edit the reference"),
    ("Ctrl-Enter", "save"),
    ("Esc", "leave the text field"),
)
VERDICT_LABELS = {"confirmed": "confirmed", "false_alarm": "false alarm", "unsure": "unsure"}


def esc(value: object) -> str:
    """Text or attribute value, HTML-escaped (quotes too)."""
    return html.escape("" if value is None else str(value), quote=True)


def url(segment: str) -> str:
    return quote(segment, safe="")


_ON = ' class="on"'


def _tags(reasons: Iterable[str]) -> str:
    return "".join(f'<span class="tag">{esc(r)}</span>' for r in reasons)


def _judges(judges: Sequence[JudgeCount], lead: str) -> str:
    """Who produced the flags, in one line: each judge with its answers."""
    if not judges:
        return f'<p class="judges">{esc(lead)}: no answer scored yet</p>'
    named = "; ".join(
        f"<b>{esc(j.describe())}</b> ({j.answers} answer{'' if j.answers == 1 else 's'})"
        for j in judges
    )
    return f'<p class="judges">{esc(lead)}: {named}</p>'


def _page(title: str, body: str, *, body_attrs: str = "") -> str:
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)} · rag-monitor review</title>"
        '<link rel="stylesheet" href="/static/review.css">'
        '<script src="/static/review.js" defer></script>'
        f"</head><body{body_attrs}>"
        '<header><a href="/" class="brand">rag-monitor review</a>'
        '<a href="/calibration">judge accuracy</a></header>'
        f"<main>{body}</main></body></html>\n"
    )


def _shortcuts(items: Iterable[tuple[str, str]]) -> str:
    rows = "".join(f"<dt><kbd>{esc(k)}</kbd></dt><dd>{esc(v)}</dd>" for k, v in items)
    return f'<aside class="shortcuts"><h2>Keyboard</h2><dl>{rows}</dl></aside>'


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f} %"


def _query(params: Mapping[str, str | None]) -> str:
    kept = {k: v for k, v in params.items() if v}
    return "?" + urlencode(kept) if kept else ""


# --- queue


def queue_page(
    items: Sequence[QueueItem],
    counts: Mapping[str, int],
    *,
    status: str | None,
    reason: str | None,
    route: str | None,
    order: str,
    next_cursor: str | None,
    reasons: Sequence[str],
    judges: Sequence[JudgeCount] = (),
) -> str:
    filters = {"status": status, "reason": reason, "route": route, "order": order}
    tabs = "".join(
        f'<a href="/{_query({**filters, "status": s})}"'
        f"{_ON if s == status else ''}>{esc(s)} <b>{counts.get(s, 0)}</b></a>"
        for s in STATUSES
    )
    all_tab = (
        f'<a href="/{_query({**filters, "status": None})}"'
        f"{_ON if status is None else ''}>all <b>{sum(counts.values())}</b></a>"
    )
    reason_opts = "".join(
        f'<option value="{esc(r)}"{" selected" if r == reason else ""}>{esc(r)}</option>'
        for r in reasons
    )
    order_opts = "".join(
        f'<option value="{o}"{" selected" if o == order else ""}>{label}</option>'
        for o, label in (
            ("risk", "likeliest hallucination first"),
            ("newest", "newest first"),
            ("seen", "most seen first"),
        )
    )
    form = (
        '<form class="filters" method="get" action="/">'
        f'<input type="hidden" name="status" value="{esc(status)}">'
        f'<label>reason <select name="reason"><option value="">any</option>{reason_opts}'
        "</select></label>"
        f'<label>route <input name="route" value="{esc(route)}" size="10"></label>'
        f'<label>order <select name="order">{order_opts}</select></label>'
        '<button type="submit">filter</button></form>'
    )
    row_query = _query({"status": status})
    rows = "".join(
        f'<tr data-href="/rows/{url(i.id)}{row_query}">'
        f'<td><a href="/rows/{url(i.id)}{row_query}">{esc(i.question)}</a></td>'
        f"<td>{_tags(i.reasons)}</td>"
        f"<td>{_flagged_badge(i)}</td>"
        f'<td class="num">{f"{i.risk:.2f}" if i.risk >= 0 else "–"}</td>'
        f'<td>{esc(i.route or "")}</td><td class="num">{i.seen_count}</td>'
        f'<td class="num">{i.answers}</td><td class="num">{i.verdicts}</td>'
        f'<td><span class="status {esc(i.status)}">{esc(i.status)}</span></td>'
        f"<td><time>{esc(i.created_at.strftime('%Y-%m-%d %H:%M'))}</time></td></tr>"
        for i in items
    )
    table = (
        '<table class="queue"><thead><tr><th>question</th><th>reasons</th>'
        f'<th title="{esc(FLAGGED_BY_TITLE)}">flagged by</th>'
        "<th title=\"the local judge's probability that an answer of the row holds a claim its "
        "context does not support (the highest of its answers; – where the judge gives "
        'none)">p(hallucinated)</th><th>route</th>'
        "<th>seen</th><th>answers</th><th>verdicts</th><th>status</th><th>queued</th>"
        f"</tr></thead><tbody>{rows}</tbody></table>"
        if items
        else '<p class="empty">Nothing in this queue.</p>'
    )
    more = (
        f'<p class="more"><a rel="next" href="/{_query({**filters, "cursor": next_cursor})}">'
        "older rows →</a></p>"
        if next_cursor
        else ""
    )
    body = (
        f'<nav class="tabs">{all_tab}{tabs}</nav>'
        f"{_judges(judges, 'Flags and scores by')}{form}{table}{more}" + _shortcuts(SHORTCUTS_QUEUE)
    )
    return _page("queue", body, body_attrs=' data-page="queue"')


#: what the queue's "flagged by" column means, on its header
FLAGGED_BY_TITLE = (
    "which judges flagged an answer of the row a hallucination: both (the same answer), "
    "LLM, local, or none; the local judge's flag on an LLM judge's answer comes from its "
    "risk screen. In the default order the rows both judges flagged come first"
)


def _flagged_badge(item: QueueItem) -> str:
    word = item.flagged_by()
    # the badge's class is one of a fixed set, never stored text
    kind = {"both": "both", "none": "none"}.get(word, "one")
    return f'<span class="flagged-by {kind}">{esc(word)}</span>'


# --- row


def highlight(response: str, statements: Sequence[Mapping[str, Any]]) -> tuple[str, list[str]]:
    """``response`` escaped, each statement marked in it by its verdict.

    A statement found verbatim is marked as it is. One the claim splitter reworded (a
    pronoun resolved, a capital or a full stop added, a clause cut) is marked on the span
    of the answer that shares most of its words (`_reworded_span`), with the class
    ``reworded`` and the claim as the judge read it in the mark's title. Returns the
    markup and the escaped list items of the supported (or unjudged) statements the page
    lists under the answer: the reworded ones (so their wording is visible, not only on
    hover) and any that no span matches; the unsupported ones are all listed, as read, by
    `unsupported_claims`.
    """
    marks: list[tuple[int, int, Mapping[str, Any], bool]] = []
    unplaced: list[str] = []
    pending: list[Mapping[str, Any]] = []
    pos = 0
    for st in statements:  # verbatim first, in order, so a rewording cannot take their place
        text = str(st.get("statement", ""))
        at = response.find(text, pos) if text else -1
        if at < 0:
            at = response.find(text) if text else -1
            if at < 0 or _overlaps(marks, at, at + len(text)):
                pending.append(st)
                continue
        marks.append((at, at + len(text), st, False))
        pos = at + len(text)
    for st in pending:
        span = _reworded_span(response, str(st.get("statement", "")), marks)
        if span is not None:
            marks.append((*span, st, True))
        if _verdict_class(st) != "unsupported":
            unplaced.append(_statement_item(st, reworded=span is not None))
    marks.sort(key=lambda m: m[0])
    out: list[str] = []
    cursor = 0
    for start, end, st, reworded in marks:
        out.append(esc(response[cursor:start]))
        reason = str(st.get("reason") or "")
        title = f"read as: {st.get('statement')} — {reason}" if reworded else reason
        css = _verdict_class(st) + (" reworded" if reworded else "")
        out.append(f'<mark class="{css}" title="{esc(title)}">{esc(response[start:end])}</mark>')
        cursor = end
    out.append(esc(response[cursor:]))
    return "".join(out), unplaced


#: the least word overlap (F1 of the two bags of words) for a span to stand for a claim
REWORDED_MATCH = 0.6


def _overlaps(marks: Sequence[tuple[int, int, Any, bool]], start: int, end: int) -> bool:
    return any(a < end and start < b for a, b, _, _ in marks)


def _reworded_span(
    response: str, claim: str, marks: Sequence[tuple[int, int, Any, bool]]
) -> tuple[int, int] | None:
    """The span of ``response`` (outside ``marks``) whose words best match ``claim``'s, by
    the F1 of the two bags of lower-cased words, when it reaches `REWORDED_MATCH`."""
    wanted = Counter(w.lower() for w in re.findall(r"\w+", claim))
    n = sum(wanted.values())
    if not n:
        return None
    words = [(m.group().lower(), m.start(), m.end()) for m in re.finditer(r"\w+", response)]
    best: tuple[float, int, int] | None = None
    for i in range(len(words)):
        have: Counter[str] = Counter()
        shared = 0
        for j in range(i, min(len(words), i + 2 * n)):
            word = words[j][0]
            have[word] += 1
            if have[word] <= wanted[word]:
                shared += 1
            score = 2 * shared / (n + j - i + 1)
            start, end = words[i][1], words[j][2]
            if (best is None or score > best[0]) and not _overlaps(marks, start, end):
                best = (score, start, end)
    if best is None or best[0] < REWORDED_MATCH:
        return None
    return best[1], best[2]


def unsupported_claims(statements: Sequence[Mapping[str, Any]]) -> str:
    """Every statement the judge found unsupported, with its reason as visible text beside
    it and the words that decided marked in both (`monitor.review.decisive`)."""
    items = []
    for st in statements:
        if _verdict_class(st) != "unsupported":
            continue
        claim = str(st.get("statement") or "")
        reason = str(st.get("reason") or "")
        found = decisive.terms(reason, claim)
        why = (
            decisive.mark(reason, decisive.quoted_places(reason, found))
            if reason
            else "(the judge gave no reason)"
        )
        items.append(
            f'<li><q class="claim">{decisive.mark(claim, decisive.places(claim, found))}</q>'
            f' <span class="why">— {why}</span></li>'
        )
    if not items:
        return ""
    return (
        "<h3>Not supported by the contexts, and why</h3>"
        f'<ol class="unsupported-claims">{"".join(items)}</ol>'
    )


def _verdict_class(st: Mapping[str, Any]) -> str:
    verdict = st.get("verdict")
    return "supported" if verdict == 1 else "unsupported" if verdict == 0 else "unknown"


def _statement_item(st: Mapping[str, Any], *, reworded: bool = False) -> str:
    reason = st.get("reason")
    why = f' <span class="why">— {esc(reason)}</span>' if reason else ""
    read = '<span class="read-as">read as</span> ' if reworded else ""
    return f'<li class="{_verdict_class(st)}">{read}{esc(st.get("statement"))}{why}</li>'


def _scores(scores: Mapping[str, Any]) -> str:
    cells = "".join(
        f'<tr><th>{esc(k)}</th><td class="num">'
        f"{'—' if v is None else esc(f'{float(v):.3f}')}</td></tr>"
        for k, v in scores.items()
    )
    return f'<table class="scores">{cells}</table>'


def _contexts(contexts: Sequence[Mapping[str, Any]]) -> str:
    items = "".join(
        f'<li><span class="rank">#{n}</span>'
        f'<span class="score">{"" if c.get("score") is None else esc(c.get("score"))}</span>'
        f"{'<code>' + esc(c.get('id')) + '</code>' if c.get('id') else ''}"
        f"<p>{esc(c.get('text'))}</p></li>"
        for n, c in enumerate(contexts, start=1)
    )
    return f'<ol class="contexts">{items}</ol>'


def _verdict_inputs(index: int, answer: Answer, chosen: Mapping[tuple[str, str], str]) -> str:
    current = {v.reason: v for v in answer.verdicts}
    groups = []
    for reason in answer.reasons:
        picked = chosen.get((answer.interaction_id, reason)) or (
            current[reason].verdict if reason in current else ""
        )
        name = f"verdict-{index}-{reason}"
        options = "".join(
            f'<label><input type="radio" name="{esc(name)}" value="{v}"'
            f"{' checked' if v == picked else ''}> <kbd>{n}</kbd> {VERDICT_LABELS[v]}</label>"
            for n, v in enumerate(VERDICTS, start=1)
        )
        none = (
            f'<label><input type="radio" name="{esc(name)}" value=""'
            f"{' checked' if not picked else ''}> none</label>"
        )
        who = (
            f'<span class="who">last: {esc(VERDICT_LABELS.get(current[reason].verdict))}'
            f" by {esc(current[reason].reviewer)}</span>"
            if reason in current
            else ""
        )
        question = (
            "is this answer a hallucination after all?"
            if reason == "control"
            else f"is the {esc(reason)} flag right?"
        )
        groups.append(
            f'<fieldset class="verdict" data-group="{esc(name)}">'
            f'<legend><span class="tag">{esc(reason)}</span> {question} {who}</legend>'
            f"{options}{none}</fieldset>"
        )
    return (
        f'<input type="hidden" name="answer-{index}" value="{esc(answer.interaction_id)}">'
        + "".join(groups)
    )


def _answer(
    index: int, answer: Answer, chosen: Mapping[tuple[str, str], str], *, show_contexts: bool
) -> str:
    statements = answer.statements()
    marked, unplaced = highlight(answer.response, statements)
    unplaced_html = f'<ul class="statements">{"".join(unplaced)}</ul>' if unplaced else ""
    reworded = (
        ' <mark class="reworded">dotted: a claim the judge read in other words</mark>'
        if ' reworded"' in marked
        else ""
    )
    probability = (
        '<p class="legend probability"><b>p</b>: how likely the judge finds it that the '
        "contexts support the claim, the figure its verdict rests on; <b>model</b>: the "
        "trained support model's own probability for the claim's closest passage, before "
        "the check for words, numbers and names that no passage states"
        + (
            "; <b>answer p</b>: how likely the judge finds it that the answer holds at least "
            "one unsupported claim: at or above the <b>cut</b> its weak claims are not "
            "supported, below it every claim counts as supported</p>"
            if any("answer p=" in str(st.get("reason") or "") for st in statements)
            else "</p>"
        )
        if any("(p=" in str(st.get("reason") or "") for st in statements)
        else ""
    )
    contexts = _contexts(answer.contexts)
    context_block = (
        f"<h3>Contexts, in rank order</h3>{contexts}"
        if show_contexts
        else f"<details><summary>its contexts</summary>{contexts}</details>"
    )
    return (
        f'<section class="answer" id="answer-{index}">'
        f"<h2>Answer {index + 1} <code>{esc(answer.interaction_id)}</code>"
        f' <span class="seen">seen {answer.seen_count}×</span> '
        f"{_tags(answer.reasons)}</h2>"
        f'<p class="response">{marked}</p>'
        '<p class="legend"><mark class="supported">supported</mark> '
        '<mark class="unsupported">not supported by the contexts</mark> '
        '<mark class="decisive">the words that decided</mark>'
        f"{reworded} "
        f'<span class="judge">judged by {esc(describe_judge(answer.judge, answer.judge_model))}'
        f"</span> {_judges_said(answer)}</p>{probability}"
        f"{unsupported_claims(answer.statements())}{unplaced_html}"
        f"{_scores(answer.online_scores)}{context_block}"
        f"{_verdict_inputs(index, answer, chosen)}</section>"
    )


def _judges_said(answer: Answer) -> str:
    """Which judges flagged the answer, and the local judge's probability where it read an
    answer another judge scored (its own shows in its reasons)."""
    if answer.judge is None:
        return ""  # more than one judge scored it: whose flag it carries is not known
    said = f'<span class="flagged-by-line">flagged by {esc(answer.flagged_by.describe())}'
    faithfulness = answer.online_details.get("faithfulness")
    p = faithfulness.get(HALLUCINATION_PROBABILITY) if isinstance(faithfulness, dict) else None
    if answer.judge != "local" and isinstance(p, int | float) and not isinstance(p, bool):
        said += f"; the local judge's p(hallucinated) {p:.2f}"
    return said + "</span>"


def row_page(
    row: BacklogRow,
    *,
    csrf: str,
    status_filter: str | None,
    newer: str | None,
    older: str | None,
    reviewer: str,
    banner: str | None = None,
    banner_kind: str = "info",
    draft_reference: str | None = None,
    draft_note: str | None = None,
    chosen: Mapping[tuple[str, str], str] | None = None,
) -> str:
    chosen = chosen or {}
    q = _query({"status": status_filter})
    older_href = f"/rows/{url(older)}{q}" if older else f"/{q}"
    newer_href = f"/rows/{url(newer)}{q}" if newer else f"/{q}"
    answers = "".join(
        _answer(i, a, chosen, show_contexts=i == 0) for i, a in enumerate(row.answers)
    )
    reference = draft_reference if draft_reference is not None else (row.reference or "")
    note = draft_note if draft_note is not None else (row.review_note or "")
    redactions = ", ".join(f"{esc(r.get('kind'))} ×{esc(r.get('count'))}" for r in row.redactions)
    banner_html = (
        f'<div class="banner {esc(banner_kind)}" id="banner" role="status">{banner}</div>'
        if banner
        else '<div class="banner" id="banner" role="status" hidden></div>'
    )
    body = (
        f"{banner_html}"
        f'<nav class="rownav"><a href="{esc(newer_href)}" id="prev">← newer</a>'
        f'<a href="/{q}">queue</a><a href="{esc(older_href)}" id="next">older →</a></nav>'
        f'<h1 class="question">{esc(row.user_input)}</h1>'
        f'<p class="meta"><span class="status {esc(row.status)}">{esc(row.status)}</span> '
        f"{_tags(row.reasons)} "
        f"route <b>{esc(row.route or '—')}</b> · seen {row.seen_count}× · "
        f'{len(row.answers)} answer(s) · version <b id="version-shown">{row.version}</b>'
        f"{' · redacted: ' + redactions if redactions else ''}</p>"
        f'<form method="post" action="/rows/{url(row.id)}{q}" id="review"'
        f' data-api="/api/rows/{url(row.id)}/review" data-next="{esc(older_href)}">'
        f'<input type="hidden" name="csrf" value="{esc(csrf)}">'
        f'<input type="hidden" name="version" value="{row.version}">'
        f"{answers}"
        '<section class="annotate"><h2>Reference answer</h2>'
        '<textarea name="reference" id="reference" rows="4"'
        ' placeholder="What the right answer is (leave empty if you cannot tell)">'
        f"{esc(reference)}</textarea>"
        f'<label>Note <input name="note" id="note" value="{esc(note)}"></label>'
        '<div class="buttons"><button type="submit" name="action" value="save"'
        ' class="primary">Save <kbd>Ctrl-Enter</kbd></button>'
        '<button type="submit" name="action" value="discard" formnovalidate>Discard</button>'
        f'<a href="{esc(older_href)}" class="skip">Skip</a>'
        f'<span class="who">saving as <b>{esc(reviewer)}</b></span></div></section></form>'
        + _shortcuts(SHORTCUTS_ROW)
    )
    attrs = f' data-page="row" data-row="{esc(row.id)}"'
    return _page(row.user_input[:60] or row.id, body, body_attrs=attrs)


def conflict_banner(row: BacklogRow) -> str:
    """The 409 banner: someone saved first; what the row holds now."""
    verdicts = "; ".join(
        f"answer {i + 1} {esc(v.reason)}: {esc(VERDICT_LABELS.get(v.verdict))} by {esc(v.reviewer)}"
        for i, a in enumerate(row.answers)
        for v in a.verdicts
    )
    return (
        "<b>Conflict: another reviewer saved this row first.</b> The page now shows the"
        f" newer state (version {row.version}); your input is kept in the form. Reference now:"
        f" <q>{esc(row.reference or '(none)')}</q>. Verdicts now: {verdicts or '(none)'}."
        " Save again to replace them with yours."
    )


#: what each row of the per-judge precision table counts
JUDGE_COUNTS = {
    "llm": "answers the LLM judge flagged",
    "local": "answers the local judge flagged (its own, or its risk screen's flag on an LLM "
    "judge's answer)",
    "both": "answers both judges flagged",
}


def _judge_precision(found: Mapping[str, JudgePrecision]) -> str:
    """Flag precision per judge and of the two together, each with its verdicts and interval;
    below `MIN_JUDGE_VERDICTS` it says so instead of showing a figure."""
    rows = []
    for key, counts in JUDGE_COUNTS.items():
        judge = found.get(key, JudgePrecision(key, 0))
        if judge.precision is None:
            figure = (
                f'<td class="too-few" colspan="2">not enough verdicts ({judge.reviewed} of '
                f"{MIN_JUDGE_VERDICTS} needed)</td>"
            )
        else:
            figure = (
                f'<td class="num">{_pct(judge.precision)}</td>'
                f'<td class="num">{_pct(judge.lower)} – {_pct(judge.upper)}</td>'
            )
        rows.append(
            f'<tr data-judge="{key}"><th>{esc(judge.name)}</th>{figure}'
            f'<td class="num">{judge.reviewed}</td><td>{esc(counts)}</td></tr>'
        )
    return (
        "<h2>Flag precision by judge</h2>"
        '<table class="scores judges-precision"><tr><th>judge</th><th>confirmed</th>'
        "<th>95 % interval</th><th>reviewed</th><th>over</th></tr>"
        f"{''.join(rows)}</table>"
        '<p class="legend">Confirmed: the weighted share of the reviewed answers the judge '
        "flagged that reviewers found to hold a hallucination (the verdict on the "
        "hallucination flag, or on a control answer). An answer only the local judge "
        "flagged reaches the queue as a control answer.</p>"
    )


def calibration_page(cal: Calibration, judges: Sequence[JudgeCount] = (), rule: str = "") -> str:
    precision = "".join(
        f'<tr><th>{esc(r)}</th><td class="num">{_pct(v)}</td>'
        f'<td class="num">{cal.reviewed.get(r, 0)}</td></tr>'
        for r, v in cal.flag_precision.items()
    )
    interval = (
        f" (95 % interval {_pct(cal.lower)} – {_pct(cal.upper)})"
        if cal.calibrated_rate is not None
        else ""
    )
    error = judge_error(
        cal.flag_precision.get(HALLUCINATION),
        cal.reviewed.get(HALLUCINATION, 0),
        cal.control_hallucination_share,
        cal.reviewed.get(CONTROL, 0),
    )
    missing = (
        f'<p class="banner info">Not calibrated yet: {esc("; ".join(cal.missing))}.</p>'
        if cal.missing
        else ""
    )
    body = (
        "<h1>Judge accuracy</h1>"
        f"{_judges(judges, 'The verdicts check the flags of')}"
        f"{missing}"
        + (f'<p class="rule">Counted: {esc(rule)}.</p>' if rule else "")
        + '<table class="scores">'
        f"<tr><th>hallucination rate, calibrated by the verdicts</th>"
        f'<td class="num">{_pct(cal.calibrated_rate)}{interval}</td>'
        f"<td>{esc(CALIBRATED_MEANING)}</td></tr>"
        f"<tr><th>hallucination rate, raw (the judge's flags)</th>"
        f'<td class="num">{_pct(cal.raw_rate)}</td><td>{esc(RAW_MEANING)}</td></tr>'
        f"<tr><th>what bounds the judge's error</th><td></td><td>{esc(error)}</td></tr>"
        f"<tr><th>control answers that were hallucinations</th>"
        f'<td class="num">{_pct(cal.control_hallucination_share)}</td></tr>'
        f"<tr><th>verdicts (latest per answer and reason)</th>"
        f'<td class="num">{cal.verdicts}</td></tr></table>'
        '<h2>Flag precision</h2><table class="scores"><tr><th>reason</th><th>confirmed</th>'
        f"<th>reviewed</th></tr>{precision}</table>"
        f"{_judge_precision(cal.judge_precision)}"
        "<p>How it is computed: docs/review.md, section The calibrated hallucination rate. "
        "The JSON is at "
        '<a href="/api/calibration">/api/calibration</a>.</p>'
    )
    return _page("judge accuracy", body)


def login_page(csrf: str, error: str | None = None) -> str:
    problem = f'<p class="banner error">{esc(error)}</p>' if error else ""
    body = (
        f'<h1>Sign in</h1>{problem}<form method="post" action="/login">'
        f'<input type="hidden" name="csrf" value="{esc(csrf)}">'
        '<label>Review token <input type="password" name="token" autocomplete="off">'
        '</label> <button type="submit" class="primary">sign in</button></form>'
        "<p>The token is one of <code>RAG_MONITOR_REVIEW_TOKENS</code>; scripts send it as"
        " <code>Authorization: Bearer</code> instead.</p>"
    )
    return _page("sign in", body)


def error_page(status: int, message: str) -> str:
    return _page(str(status), f"<h1>{status}</h1><p>{esc(message)}</p>")
