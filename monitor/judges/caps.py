"""How long a judge step's answer can be: the output cap of each LLM judge request.

Every chat request of `monitor.judges.llm.OpenAIJudge` carries a cap on its answer
(``max_tokens``), and the budget reserves exactly that cap, so no answer can cost
more than was set aside for it. The cap is sized from what the step's answer can
need, read off its inputs: a statements list restates its text, a verdict list has
one short reason per item, a question is one sentence. Each size is generous (an
honest answer ends well before it); what it stops is a model that loops, restating
its input until the server's context is full. `answer_cap` bounds it by the
judge's setting (``RAG_MONITOR_JUDGE_MAX_COMPLETION_TOKENS``).

Sizes are counted with the judge model's encoding (`monitor.tokens`); an endpoint's
own tokenizer differs by a few percent, which the margins cover.
"""

from __future__ import annotations

from monitor.judges import OutT, Prompt
from monitor.judges.steps import (
    GroundingInput,
    QuestionsInput,
    StatementsInput,
    UsefulnessInput,
    VerifyInput,
)
from monitor.tokens import count_tokens

#: the answer's JSON object, its field names and its ``noncommittal`` flag
FRAME = 32
#: one verdict: its reason, the verdict and the JSON around them. The steps ask for a
#: reason of at most 15 words; a 1.5B model writes 40 to 50 (measured: docs/benchmarks.md,
#: "LLM judge on a small model"), and an honest answer must not be cut
VERDICT = 128
#: one generated question (``questions``): a sentence, whatever the response's length
QUESTION = 96
#: text an answer restates (statements, the statements of a verdict list) may come back
#: this many times as long: split sentences repeat their subject, pronouns are replaced
RESTATED = 2
#: at most one claim per this many tokens of an answer (``grounding``, which gives each
#: claim a verdict)
TOKENS_PER_CLAIM = 12


def step_size(prompt: Prompt[OutT], model: str | None = None) -> int | None:
    """The most completion tokens an answer to ``prompt`` can need; None for inputs of
    a step this module does not know (the caller's bound applies)."""
    inputs = prompt.inputs

    def tokens(text: str | None) -> int:
        return count_tokens(text, model) if text else 0

    if isinstance(inputs, StatementsInput):
        return FRAME + RESTATED * tokens(inputs.text) + tokens(inputs.question)
    if isinstance(inputs, VerifyInput):
        restated = sum(tokens(s) for s in inputs.statements)
        return FRAME + RESTATED * restated + VERDICT * len(inputs.statements)
    if isinstance(inputs, QuestionsInput):
        return FRAME + QUESTION
    if isinstance(inputs, UsefulnessInput):
        return FRAME + VERDICT * len(inputs.contexts)
    if isinstance(inputs, GroundingInput):
        answer = tokens(inputs.answer)
        claims = 1 + answer // TOKENS_PER_CLAIM
        return (
            FRAME
            + RESTATED * answer
            + tokens(inputs.question)
            + VERDICT * claims
            + VERDICT * len(inputs.contexts)
        )
    return None


def answer_cap(prompt: Prompt[OutT], bound: int, model: str | None = None) -> int:
    """The cap of one answer (one choice) to ``prompt``: `step_size`, at most ``bound``."""
    size = step_size(prompt, model)
    return bound if size is None else min(size, bound)
