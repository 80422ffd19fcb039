"""The deterministic judge behind the test judge server: simple lexical rules, no model.

`answer(step, inputs, n)` returns ``n`` JSON outputs of the step's output model
(`monitor.judges.steps`); `embed(texts)` returns one vector per text. The
rules are chosen so that a hand-written example has an obvious right score:

- **content words**: lower-cased tokens (words, and numbers kept literally with
  their ``$``, ``%`` or ``+``: ``$100``, ``3+``), English stopwords removed,
  a plural ``s`` dropped from words longer than three letters (``receipts`` =
  ``receipt``, but not ``class``). Negations (``not``, ``no``, ``never``) and
  ``only`` are content words.
- **statements**: the text split into sentences at ``.``, ``!``, ``?`` and
  ``;`` followed by a space or the end; each stripped of its end mark; empty
  ones dropped. Atomicity, coverage and the question are ignored.
  noncommittal = 1 iff the text contains a phrase of `NONCOMMITTAL_PHRASES`
  (as for **questions**).
- **verify**: verdict 1 iff the statement has content words and every one of
  them appears among the context's content words; a 0's reason names the
  input's ``source`` ("not in the reference: ...").
- **usefulness**: verdict 1 iff some sentence of the answer has at least half
  of its content words in the context (so a context the answer copies a
  sentence from is useful; one it shares only a stray word with is not).
- **questions**: ``"What is " + <first statement of the response> + "?"``
  (an empty question when the response has no statement); noncommittal = 1
  iff the response contains a phrase such as "I don't know", "not sure",
  "cannot answer" (list `NONCOMMITTAL_PHRASES`). All ``n`` choices are equal.
- **grounding** (the fused step): exactly the three rules above, composed —
  the answer's statements and noncommittal flag (as **statements**), each
  statement verified against the contexts joined by newlines (as **verify**),
  and each context's usefulness for the answer (as **usefulness**); so a
  record scores the same whether its steps are asked one by one or fused.
- **embed**: a bag of the text's content words hashed (blake2b) into 256
  dimensions, L2-normalised; a text without content words is the zero vector.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterable, Sequence
from typing import Any

from monitor.judges import steps

EMBEDDING_DIM = 256

STOPWORDS = frozenset(
    """
    a an the and or but if then else so than too very also just of to in on at by for with
    from into onto over under about above below between through during before after up down
    out off as is are was were be been being am do does did doing done have has had having
    i me my mine myself you your yours yourself he him his himself she her hers herself it its
    itself we us our ours ourselves they them their theirs themselves this that these those
    what which who whom whose when where why how there here all any both each few more most
    other some such own same can could will would shall should may might must need needs
    i'm i've i'd i'll you're you've it's that's there's what's let's
    """.split()
)

NONCOMMITTAL_PHRASES = (
    "i don't know",
    "i do not know",
    "not sure",
    "unsure",
    "cannot answer",
    "can't answer",
    "unable to answer",
    "no information",
    "i have no idea",
)

_TOKEN = re.compile(r"\$?\d+(?:[.,:]\d+)*(?:\+|%)?|[a-z]+(?:'[a-z]+)*")
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+")


def content_words(text: str) -> list[str]:
    """The text's content words, in order (see the module docstring)."""
    words = []
    for token in _TOKEN.findall(text.lower().replace("\u2019", "'")):
        if token in STOPWORDS:
            continue
        if token.isalpha() and len(token) > 3 and token.endswith("s") and not token.endswith("ss"):
            token = token[:-1]
        words.append(token)
    return words


def sentences(text: str) -> list[str]:
    """Sentences split at ``. ! ? ;`` + space/end, end marks stripped, empty ones dropped."""
    pieces = _SENTENCE_END.split(text.strip())
    out = []
    for piece in pieces:
        piece = piece.strip().rstrip(".!?;").strip()
        if piece:
            out.append(piece)
    return out


def supported(statement: str, context_words: set[str], source: str = "context") -> tuple[int, str]:
    words = content_words(statement)
    if not words:
        return 0, "the statement has no content words to check"
    missing = [w for w in dict.fromkeys(words) if w not in context_words]
    if missing:
        return 0, f"not in the {source}: " + ", ".join(missing)
    return 1, f"every content word of the statement is in the {source}"


def useful(answer_sentences: Sequence[str], context: str) -> tuple[int, str]:
    context_words = set(content_words(context))
    for sentence in answer_sentences:
        words = set(content_words(sentence))
        if words and 2 * len(words & context_words) >= len(words):
            return 1, f"holds most of the answer sentence {sentence!r}"
    return 0, "holds no answer sentence"


def noncommittal(text: str) -> bool:
    lowered = text.lower().replace("\u2019", "'")
    return any(phrase in lowered for phrase in NONCOMMITTAL_PHRASES)


def answer(step: str, inputs: dict[str, Any], n: int) -> list[dict[str, Any]]:
    """``n`` outputs of ``step`` for ``inputs`` as JSON-ready dicts; ValueError: unknown step."""
    return [_answer_one(step, inputs) for _ in range(n)]


def _answer_one(step: str, inputs: dict[str, Any]) -> dict[str, Any]:
    if step == steps.STATEMENTS:
        statements_in = steps.StatementsInput.model_validate(inputs)
        return steps.Statements(
            statements=sentences(statements_in.text),
            noncommittal=int(noncommittal(statements_in.text)),
        ).model_dump(exclude={"read_after"})  # the local judge's field: never an LLM's
    if step == steps.VERIFY:
        verify_in = steps.VerifyInput.model_validate(inputs)
        checked = verify(verify_in.context, verify_in.statements, verify_in.source)
        return steps.Verdicts(verdicts=checked).model_dump()
    if step == steps.QUESTIONS:
        questions_in = steps.QuestionsInput.model_validate(inputs)
        found = sentences(questions_in.response)
        question = f"What is {found[0]}?" if found else ""
        flag = int(noncommittal(questions_in.response))
        asked = steps.GeneratedQuestion(question=question, noncommittal=flag)
        return asked.model_dump(exclude={"is_response"})  # the local judge's field
    if step == steps.USEFULNESS:
        usefulness_in = steps.UsefulnessInput.model_validate(inputs)
        verdicts = usefulness(usefulness_in.answer, usefulness_in.contexts)
        return steps.ContextVerdicts(verdicts=verdicts).model_dump()
    if step == steps.GROUNDING:
        grounding_in = steps.GroundingInput.model_validate(inputs)
        return steps.Grounding(
            statements=verify(
                steps.join_contexts(grounding_in.contexts), sentences(grounding_in.answer)
            ),
            noncommittal=int(noncommittal(grounding_in.answer)),
            contexts=usefulness(grounding_in.answer, grounding_in.contexts),
        ).model_dump()
    raise ValueError(f"unknown step {step!r}")


def verify(
    context: str, statements: Sequence[str], source: str = "context"
) -> list[steps.StatementVerdict]:
    """The verify rule for each statement, in order (``source``: what ``context`` is)."""
    words = set(content_words(context))
    verdicts = []
    for statement in statements:
        verdict, reason = supported(statement, words, source)
        verdicts.append(steps.StatementVerdict(statement=statement, reason=reason, verdict=verdict))
    return verdicts


def usefulness(answer: str, contexts: Sequence[str]) -> list[steps.ContextVerdict]:
    """The usefulness rule for each context, in order."""
    answer_sentences = sentences(answer)
    verdicts = []
    for context in contexts:
        verdict, reason = useful(answer_sentences, context)
        verdicts.append(steps.ContextVerdict(reason=reason, verdict=verdict))
    return verdicts


def embed(texts: Iterable[str]) -> list[list[float]]:
    """Hashed bag of content words, 256 dimensions, L2-normalised (zero vector when empty)."""
    return [_embed_one(text) for text in texts]


def _embed_one(text: str) -> list[float]:
    vector = [0.0] * EMBEDDING_DIM
    for word in content_words(text):
        digest = hashlib.blake2b(word.encode("utf-8"), digest_size=4).digest()
        vector[int.from_bytes(digest, "big") % EMBEDDING_DIM] += 1.0
    norm = math.sqrt(sum(x * x for x in vector))
    if norm == 0.0:
        return vector
    return [x / norm for x in vector]
