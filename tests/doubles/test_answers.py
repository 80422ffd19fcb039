"""tests.support.answers: the deterministic judge's documented rules."""

from __future__ import annotations

import math

import pytest

from monitor.judges import steps
from tests.support.answers import answer, content_words, embed, sentences


def test_content_words() -> None:
    assert content_words("Travel expenses over $100 must be submitted with a receipt.") == [
        "travel",
        "expense",
        "$100",
        "submitted",
        "receipt",
    ]
    assert content_words("Stays of 3+ nights are NOT covered; 99.9% uptime") == [
        "stay",
        "3+",
        "night",
        "not",
        "covered",
        "99.9%",
        "uptime",
    ]
    assert content_words("the class") == ["class"]


def test_sentences() -> None:
    assert sentences("One. Two! Three? Four; five.  ") == ["One", "Two", "Three", "Four", "five"]
    assert sentences("Costs $1.50 each. Done") == ["Costs $1.50 each", "Done"]
    assert sentences("   ") == []


def test_statements_and_verify() -> None:
    [out] = answer("statements", {"text": "A costs $100; B is free.", "question": "q"}, 1)
    assert steps.Statements.model_validate(out).statements == ["A costs $100", "B is free"]
    [out] = answer(
        "verify",
        {
            "context": "Receipts are needed for expenses over $100.",
            "statements": [
                "Expenses over $100 need receipts",
                "Expenses over $50 need receipts",
                "It is",
            ],
        },
        1,
    )
    verdicts = steps.Verdicts.model_validate(out).verdicts
    assert [v.verdict for v in verdicts] == [1, 0, 0]
    assert "$50" in verdicts[1].reason


def test_usefulness_needs_half_of_an_answer_sentence() -> None:
    [out] = answer(
        "usefulness",
        {
            "question": "q",
            "answer": "Employees accrue 25 vacation days. Parking is free.",
            "contexts": [
                "Employees accrue 25 days of vacation.",
                "Employees like parking.",
                "Nothing related.",
            ],
        },
        1,
    )
    assert [v.verdict for v in steps.ContextVerdicts.model_validate(out).verdicts] == [1, 1, 0]


def test_grounding_is_statements_verify_and_usefulness_composed() -> None:
    question = "When do I need a receipt?"
    response = "Expenses over $100 need a receipt; receipts are uploaded within 10 days."
    contexts = ["Vacation days expire in March.", "Expenses over $100 need a receipt."]
    fused_in = {"question": question, "answer": response, "contexts": contexts}
    [fused] = answer("grounding", fused_in, 1)
    grounding = steps.Grounding.model_validate(fused)
    [statements_out] = answer("statements", {"text": response, "question": question}, 1)
    statements = steps.Statements.model_validate(statements_out).statements
    [verify_out] = answer(
        "verify", {"context": steps.join_contexts(contexts), "statements": statements}, 1
    )
    [useful_out] = answer(
        "usefulness", {"question": question, "answer": response, "contexts": contexts}, 1
    )
    assert grounding.statements == steps.Verdicts.model_validate(verify_out).verdicts
    assert grounding.contexts == steps.ContextVerdicts.model_validate(useful_out).verdicts
    assert [v.statement for v in grounding.statements] == statements
    assert [v.verdict for v in grounding.statements] == [1, 0]
    assert [v.verdict for v in grounding.contexts] == [0, 1]
    with pytest.raises(ValueError):
        answer("grounding", {"question": question, "answer": response}, 1)


def test_questions_n_choices_and_noncommittal() -> None:
    outs = answer("questions", {"response": "Employees get 25 days. More text."}, 3)
    assert len(outs) == 3
    q = steps.GeneratedQuestion.model_validate(outs[0])
    assert q.question == "What is Employees get 25 days?" and q.noncommittal == 0
    [evasive] = answer("questions", {"response": "I\u2019m not sure, sorry."}, 1)
    assert evasive["noncommittal"] == 1
    [empty] = answer("questions", {"response": ""}, 1)
    assert empty["question"] == ""


def test_unknown_step_and_bad_inputs() -> None:
    with pytest.raises(ValueError, match="unknown step"):
        answer("summarise", {}, 1)
    with pytest.raises(ValueError):
        answer("verify", {"context": "x"}, 1)


def test_embed_is_deterministic_and_normalised() -> None:
    a, b, c, zero = embed(["Travel receipts", "receipt travel", "vacation days", "the of"])
    assert len(a) == 256
    assert math.isclose(sum(x * x for x in a), 1.0)
    assert a == b  # same content words, order and plural ignored
    assert a != c
    assert zero == [0.0] * 256
    assert embed(["Travel receipts"])[0] == a


def test_statements_and_grounding_say_noncommittal() -> None:
    evasive = "I'm not sure about that. Check with HR."
    [out] = answer("statements", {"text": evasive}, 1)
    assert steps.Statements.model_validate(out).noncommittal == 1
    [out] = answer("statements", {"text": "Employees get 25 days."}, 1)
    assert steps.Statements.model_validate(out).noncommittal == 0
    inputs = {"question": "q", "answer": evasive, "contexts": ["Employees get 25 days."]}
    [out] = answer("grounding", inputs, 1)
    assert steps.Grounding.model_validate(out).noncommittal == 1


@pytest.mark.parametrize("source", ["context", "reference", "response"])
def test_verify_reasons_name_the_source(source: str) -> None:
    inputs = {"context": "Employees get 25 days.", "statements": ["Managers get 30 days"]}
    [out] = answer("verify", {**inputs, "source": source}, 1)
    [verdict] = steps.Verdicts.model_validate(out).verdicts
    assert verdict.verdict == 0
    assert verdict.reason == f"not in the {source}: manager, 30"
