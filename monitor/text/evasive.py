"""Whether an answer only declines: the one rule both judges and faithfulness share.

See docs/metrics.md, "How the scores are computed" (faithfulness).
"""

from __future__ import annotations

import re

from monitor.text.numerals import numbers
from monitor.text.sentences import clauses, sentences, strip_particle, words

#: Phrases that make a response noncommittal (matched on lower case, accents kept).
NONCOMMITTAL = re.compile(
    r"\b(?:i\s+(?:do\s+not|don't|don’t)\s+know|i(?:\s+am|'m|’m)\s+not\s+(?:sure|certain|able)"
    r"|not\s+sure|no\s+(?:information|data|details|answer|idea|mention|record)"
    r"|(?:do\s+not|don't|don’t)\s+have\s+(?:that|this|the|any|enough)\s+information"
    r"|(?:cannot|can't|can’t|unable\s+to|not\s+able\s+to)\s+"
    r"(?:answer|say|tell|determine|find|provide|help|confirm|know|give|share|disclose|discuss"
    r"|comment)"
    r"|(?:does|do)\s+not\s+(?:mention|say|specify|contain|provide|state|cover)"
    r"|(?:doesn't|don't|doesn’t|don’t)\s+(?:mention|say|specify|contain|provide|state|cover)"
    r"|(?:don't|don’t|do\s+not)\s+have\s+(?:enough\s+)?(?:details|data|information)"
    r"|not\s+(?:mentioned|specified|stated|provided|available|enough\s+information)"
    r"|insufficient\s+information|unknown|unclear|no\s+way\s+to\s+know"
    r"|(?:it|that)\s+(?:depends|varies|(?:may|might|can)\s+vary)"
    r"|(?:can|may|might|could|will)\s+(?:depend|differ|vary)"
    r"|(?:rules|policies|terms|conditions|details|things|it|that|this)\s+(?:differ|vary|varies)"
    r"|rather\s+not\s+(?:guess|say|speculate)"
    r"|\bi\s*(?:'m|’m|\s+am)\s+(?:not\s+able|unable)\s+to\s+\w+)\b"
)

#: Sending the user elsewhere ("please contact the billing team", "support would know
#: more"): part of declining to answer when the response also declines.
DEFERRAL = re.compile(
    r"^\s*(?:please\s+)?(?:contact|ask|check\s+with|reach\s+out\s+to|talk\s+to)\b"
    r"|\byou\s+(?:may|might|could|should)\s+(?:want\s+to\s+)?(?:check|ask|contact|reach)\b"
    r"|\b(?:suggest|recommend)\s+(?:you\s+)?(?:check|ask|contact|reach|talk)"
    r"|\b(?:checking|check)\s+with\b|\breach(?:ing)?\s+out\s+to\b"
    r"|\bwould\s+know\s+(?:more|better)\b|\bcan\s+help\s+(?:you\s+)?with\s+(?:that|this)\b"
    r"|\bi(?:'d|’d|\s+would)\s+(?:\w+\s+)?(?:check|ask|contact|call|recommend|suggest)"
    r"|\bshould\s+be\s+able\s+to\s+help\b|\bgive\s+.{1,40}\s+a\s+call\b"
)

#: Sending the user elsewhere as the whole answer: a sentence that only does this declines
#: by itself ("I'd really recommend checking with a pharmacist"); a plain instruction ("Ask
#: your manager for approval") does not.
DEFERS = re.compile(
    r"\b(?:suggest|recommend)\s+(?:you\s+)?(?:check|ask|contact|reach|talk|speak)"
    r"|\bi(?:'d|’d|\s+would)\s+(?:\w+\s+)?(?:check|ask|contact|call)"
    r"|\bshould\s+be\s+able\s+to\s+help\b|\bwould\s+know\s+(?:more|better)\b"
    r"|\b(?:best|better)\s+to\s+(?:ask|check|contact|call|speak)"
)

#: An apology that frames a refusal ("I'm sorry, but ...", "Unfortunately, ..."): no claim.
_APOLOGY = re.compile(
    r"^\s*(?:i\s*(?:'m|’m|\s+am)\s+(?:sorry|afraid)|sorry|unfortunately)\b[\s,:;.!-]*",
    re.IGNORECASE,
)


def noncommittal(text: str) -> bool:
    """``text`` only declines, defers ("check with HR") or says it does not know: it has
    a sentence that declines and no sentence that asserts."""
    found = sentences(text)
    return any(declines(s) for s in found) and not any(
        asserts(s, response_declines=True) for s in found
    )


def declines(sentence: str) -> bool:
    """``sentence`` declines to answer ("I'm not sure about that", "It depends on your
    contract, so please ask your account manager"): each clause declines or sends the
    user elsewhere, and one declines."""
    said = _APOLOGY.sub("", sentence.lower(), count=1)
    if not said.strip() or numbers(sentence):
        return False
    if DEFERS.search(said):
        return True
    parts = clauses(said)
    declining = [bool(NONCOMMITTAL.search(c)) for c in parts]
    return any(declining) and all(
        d or DEFERRAL.search(c) for d, c in zip(declining, parts, strict=True)
    )


def asserts(sentence: str, *, response_declines: bool) -> bool:
    """False for a bare answer particle ("Yes."), for a sentence that only declines to
    answer ("I don't know", "it depends") and, in a response that declines, for one that
    only sends the user elsewhere ("Please contact support.") — unless it has a number."""
    if not words(strip_particle(sentence)):
        return False
    if numbers(sentence):
        return True
    if declines(sentence):
        return False
    said = _APOLOGY.sub("", sentence.lower(), count=1)
    return not all(
        NONCOMMITTAL.search(c) or (response_declines and DEFERRAL.search(c)) for c in clauses(said)
    )
