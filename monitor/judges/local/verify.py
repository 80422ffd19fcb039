"""The rule judge's verify step: each statement checked against the context by rules 1–7.

See docs/local-judge.md, "The verify rules (rule judge)".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from monitor.judges.local.contexts import Context, segments_of
from monitor.judges.local.embedder import MiniLMEmbedder
from monitor.judges.local.lexical.clauses import Claim
from monitor.judges.local.lexical.names import NAME_PARTS, names
from monitor.judges.local.lexical.quantities import Quantity, quantities
from monitor.judges.local.lexical.thesaurus import COMPARISONS, SAME_COMPARISON, negated_word
from monitor.judges.local.lexical.vocabulary import Vocabulary
from monitor.judges.local.lexical.wordforms import fold, stem
from monitor.judges.local.reasons import WHERE, excerpt, quote, source_says
from monitor.judges.local.support import Vector, Windows, best_window, rank_windows, word_vectors
from monitor.judges.local.swaps import counterpart, name_specific, number_specific, swapped
from monitor.judges.local.thresholds import LocalThresholds
from monitor.judges.steps import VerifySource
from monitor.text.sentences import clauses, sentences, strip_particle


@dataclass(frozen=True)
class Check:
    """The local verdict on one statement, with the evidence."""

    verdict: int
    reason: str
    #: continuous support in [0, 1] (1 = fully supported), for ranking and risk screens
    support: float
    window_coverage: float = 0.0
    #: the context window that best supports the statement (index into the prepared context)
    window: int | None = None
    #: the rule that decided: number, name, words, negation, comparison, swap, window,
    #: restated
    rule: str = ""


def checks(
    statements: Sequence[str],
    ctx: Context,
    embedder: MiniLMEmbedder,
    t: LocalThresholds,
    *,
    semantic: bool = True,
    source: VerifySource = "context",
) -> list[Check]:
    """The `Check` of every statement against ``ctx`` (see the module docstring); the MiniLM
    words of all of them in one embed call."""
    first = [lexical_check(s, ctx, t, semantic, source) for s in statements]
    pending = [(w, ctx) for p in first if isinstance(p, list) for w in p]
    vectors = word_vectors(pending, embedder, t) if semantic else {}
    checked = [
        p
        if isinstance(p, Check)
        else [window_check(w, ctx, vectors, embedder, t, semantic, source) for w in p]
        for p in first
    ]
    if semantic:
        break_ties(first, checked, ctx, embedder, t)
    # a statement is as supported as its weakest clause
    return [
        c if isinstance(c, Check) else min(c, key=lambda x: (x.verdict, x.support)) for c in checked
    ]


def break_ties(
    first: Sequence[Check | list[Windows]],
    checked: list[Check | list[Check]],
    ctx: Context,
    embedder: MiniLMEmbedder,
    t: LocalThresholds,
) -> None:
    """Rule 7: a clause just short of passing passes when MiniLM says it restates
    its best window (sentence cosine ≥ ``sentence_similarity``); in place."""
    close = [
        (k, i)
        for k, per_clause in enumerate(checked)
        if isinstance(per_clause, list)
        for i, c in enumerate(per_clause)
        if c.rule == "window"
        and c.verdict == 0
        and c.window is not None
        and t.tie_coverage <= c.window_coverage
    ]
    if not close:
        return
    pairs = []
    for k, i in close:
        windows, per_clause = first[k], checked[k]
        assert isinstance(windows, list) and isinstance(per_clause, list)
        window = per_clause[i].window
        assert window is not None
        pairs.append((windows[i].claim.text, ctx.windows[window]))
    texts = list(dict.fromkeys(x for pair in pairs for x in pair))
    vectors = dict(zip(texts, embedder.embed(texts), strict=True))
    for (k, i), (claim, window_text) in zip(close, pairs, strict=True):
        per_clause = checked[k]
        assert isinstance(per_clause, list)
        cosine = float(vectors[claim] @ vectors[window_text])
        if cosine >= t.sentence_similarity:
            c = per_clause[i]
            per_clause[i] = Check(
                1,
                f"{c.window_coverage:.0%} of the content words in one passage, "
                f"which it restates (MiniLM cosine {cosine:.2f}): {excerpt(window_text)}",
                max(c.support, t.support),
                c.window_coverage,
                c.window,
                "restated",
            )


def lexical_check(
    statement: str, ctx: Context, t: LocalThresholds, semantic: bool, source: VerifySource
) -> Check | list[Windows]:
    """Rules 1–3 and the word counts of rule 4; `Windows` (per clause) when windows decide."""
    where = WHERE[source]
    claim = strip_particle(statement)
    known = ctx.vocabulary.numbers
    counted = quantities(claim, reach=1)
    missing_numbers = [q for q in counted if not q.number.values & known]
    if missing_numbers:
        first = missing_numbers[0].number
        more = f" (and {len(missing_numbers) - 1} more)" if len(missing_numbers) > 1 else ""
        absent = number_specific(missing_numbers[0])
        other = counterpart(claim, absent, ctx)
        if other:
            return Check(
                0,
                f"answer says '{absent.said(other)}', {source_says(source)} "
                f"'{other}' ({first.kind} not in {where}){more}",
                0.0,
                rule="number",
            )
        return Check(0, f"{first.kind} '{first.surface}' not in {where}{more}", 0.0, rule="number")
    wrong_unit = miscounted(counted, ctx)
    if wrong_unit is not None:
        return Check(
            0,
            f"number '{wrong_unit.surface}' not in {where} (it has other numbers of that unit)",
            0.0,
            rule="number",
        )
    missing_names = [name for name in names(claim) if not has_name(name, ctx)]
    if missing_names:
        other = counterpart(claim, name_specific(missing_names[0]), ctx)
        if other:
            return Check(
                0,
                f"answer says '{missing_names[0]}', {source_says(source)} '{other}'",
                0.0,
                rule="name",
            )
        return Check(0, f"name {quote(missing_names)} not in {where}", 0.0, rule="name")

    per_clause: list[Windows] = []
    for clause in (c for sentence in sentences(claim) for c in clauses(sentence)):
        parsed = Claim.of(clause)
        if not parsed.words:
            continue
        missing = parsed.missing(ctx.vocabulary)
        anywhere = 1.0 - len(missing) / len(parsed.words)
        if not semantic and anywhere < t.min_coverage:
            return Check(
                0, f"words {quote(missing)} not in {where}", anywhere / 2, anywhere, rule="words"
            )
        per_clause.append(rank_windows(parsed, ctx))
    if not per_clause:
        return Check(1, "no content words to check", 1.0, 1.0, rule="words")
    return per_clause


def miscounted(claimed: Sequence[Quantity], ctx: Context) -> Quantity | None:
    """A quantity of a claim ("3 days", from ``quantities(claim, reach=1)``) whose unit the
    context counts only with other numbers ("3 times", "14 days"): the number is there,
    but not of that unit."""
    counted = ctx.vocabulary.quantities
    units = {unit for _, unit in counted}
    for q in claimed:
        if (
            q.units
            and q.units[0] in units
            and not any((v, q.units[0]) in counted for v in q.number.values)
        ):
            return q
    return None


def has_name(name: str, ctx: Context) -> bool:
    """Every part of ``name`` is in the context (a hyphenated one as written), or
    ``name`` is an acronym of a phrase there."""
    vocabulary = ctx.vocabulary
    compounds = [fold(w) for w in name.split() if "-" in w]
    if all(vocabulary.has_word(fold(w)) for w in NAME_PARTS.split(name) if w) and all(
        c in vocabulary.compounds for c in compounds
    ):
        return True
    return name.isupper() and fold(name) in vocabulary.acronyms


def window_check(
    windows: Windows,
    ctx: Context,
    vectors: dict[str, Vector],
    embedder: MiniLMEmbedder,
    t: LocalThresholds,
    semantic: bool = True,
    source: VerifySource = "context",
) -> Check:
    """Rules 4–6 for one clause, against its best window."""
    where = WHERE[source]
    best, share, unmatched, reworded = best_window(windows, ctx, vectors, t)
    if best is None:
        return Check(0, f"{quote(windows.claim.words)} not in {where}", 0.0, rule="words")
    closest = excerpt(ctx.windows[best])
    if windows.claim.negated and not ctx.window_negated[best]:
        return Check(
            0,
            f"negation not in the closest {where} passage: {closest}",
            0.0,
            share,
            best,
            "negation",
        )
    denied = denied_words(windows.claim, ctx, best, t)
    if denied:
        return Check(0, f"{where} negates {quote(denied)}", 0.0, share, best, "negation")
    passage = ctx.window_vocabularies[best]
    flipped = flipped_word(windows.claim, passage, ctx.window_negated[best])
    if flipped is not None:
        said, other = flipped
        return Check(
            0,
            f"answer says '{said}', {source_says(source)} '{other}': {closest}",
            0.0,
            share,
            best,
            "negation",
        )
    comparisons = [
        w for w in unmatched if w in COMPARISONS and not passage.has_word(SAME_COMPARISON.get(w, w))
    ]
    if comparisons:
        return Check(
            0,
            f"comparison {quote(comparisons)} not in the closest {where} passage: {closest}",
            0.0,
            share,
            best,
            "comparison",
        )
    needed = t.support if semantic and reworded else t.window_coverage
    # a close passage (the clause would pass) that says its name or number of another thing
    swap = (
        swapped(windows.claim.text, windows.claim, segments_of(ctx), embedder, t, semantic)
        if share >= needed
        else None
    )
    if swap is not None:
        specific, other, part = swap
        return Check(
            0,
            f"answer says '{specific.said(other)}', {source_says(source)} "
            f"'{other}': {excerpt(part.text)}",
            0.0,
            share,
            best,
            "swap",
        )
    if share >= needed:
        how = "all" if not unmatched else f"{share:.0%} of the"
        return Check(1, f"{how} content words in one {where} passage", share, share, best, "window")
    absent = [w for w in unmatched if not ctx.vocabulary.has_word(w)]
    said = (
        f"words {quote(absent)} not in {where}"
        if absent
        else f"{quote(unmatched)} not said together with the rest in any {where} passage"
    )
    return Check(
        0, f"{said} (support {share:.2f}); closest: {closest}", share / 2, share, best, "window"
    )


def flipped_word(
    claim: Claim, passage: Vocabulary, passage_negated: bool
) -> tuple[str, str] | None:
    """A word of ``claim`` negated by its prefix where the passage has the plain word
    ("unpaid" for "paid"), or, in a claim without a negation, the reverse: (the claim's
    word, the passage's)."""
    for w in claim.words:
        if (
            negated_word(w)
            and not passage_negated
            and passage.has_word(w[2:])
            and not passage.has_word(w)
        ):
            return w, w[2:]
        if not claim.negated and not passage.has_word(w) and passage.has_word("un" + w):
            return w, "un" + w
    return None


def denied_words(claim: Claim, ctx: Context, best: int | None, t: LocalThresholds) -> list[str]:
    """Rule 5, the other way: words ``claim`` asserts (it has no negation) that a sentence
    of its best window denies, when that sentence holds at least ``min_coverage`` of the
    claim's weight ("SMS codes are allowed" vs "SMS codes are not allowed")."""
    if best is None or claim.negated:
        return []
    for denied, vocabulary in ctx.window_denials[best]:
        words = [w for w in claim.words if stem(w) in denied]
        if words and claim.share(claim.missing(vocabulary)) >= t.min_coverage:
            return words
    return []
