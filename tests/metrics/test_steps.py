"""monitor.metrics._steps: every instruction is composed of rules written once."""

from __future__ import annotations

from monitor.judges.steps import FUSED_STEPS, GROUNDING, STEPS, join_contexts
from monitor.metrics import _steps as st


def test_the_fused_step_asks_what_the_basic_steps_ask() -> None:
    fused = st.GROUNDING_INSTRUCTION
    # statements: the same rules, applied to the answer, both levels "high"
    assert st._split("the text") in st.STATEMENTS_INSTRUCTION
    assert st._split("the answer") in fused
    for levels in (st._ATOMICITY, st._COVERAGE):
        assert levels["high"] in st.STATEMENTS_INSTRUCTION and levels["high"] in fused
        assert levels["low"] in st.STATEMENTS_INSTRUCTION and levels["low"] not in fused
    # verify and usefulness: the same rule text
    for rule in (st._SUPPORTED, st._REASON):
        assert rule in st.VERIFY_INSTRUCTION and rule in fused
    for rule in (st._USEFUL, st._PER_CONTEXT):
        assert rule in st.USEFULNESS_INSTRUCTION and rule in fused
    # the questions are generated from the response alone: never fused
    assert st._NONCOMMITTAL in st.QUESTIONS_INSTRUCTION and st._NONCOMMITTAL not in fused


def test_instructions_are_concise() -> None:
    """Short instructions make per_call cheaper too; the frugal ratio is not bought with padding."""
    from monitor.tokens import count_tokens

    basic = [
        st.STATEMENTS_INSTRUCTION,
        st.VERIFY_INSTRUCTION,
        st.QUESTIONS_INSTRUCTION,
        st.USEFULNESS_INSTRUCTION,
    ]
    assert all(count_tokens(text, "gpt-4o-mini") <= 110 for text in basic)
    assert count_tokens(st.GROUNDING_INSTRUCTION, "gpt-4o-mini") <= sum(
        count_tokens(text, "gpt-4o-mini") for text in basic[:2] + basic[3:]
    )


def test_step_names() -> None:
    assert GROUNDING in FUSED_STEPS and GROUNDING not in STEPS
    assert join_contexts(["a", "b"]) == "a\nb"
