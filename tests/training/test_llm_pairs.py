"""Which LLM replies make a claim pair (`training.llm_pairs.accept`)."""

from __future__ import annotations

import json

from training.llm_pairs import accept

WINDOW = (
    "Employees may carry over up to five unused days of annual leave into the next "
    "calendar year. Carried-over days must be taken by 31 March."
)


def reply(paraphrase: str, changed: str) -> str:
    return "Sure:\n" + json.dumps({"paraphrase": paraphrase, "changed": changed, "detail": "x"})


def test_a_paraphrase_and_its_one_detail_edit_are_kept() -> None:
    pair = accept(
        WINDOW,
        reply(
            "You can bring as many as five leftover holiday days into the following year.",
            "You can bring as many as ten leftover holiday days into the following year.",
        ),
    )
    assert pair is not None and "ten" in pair["changed"] and "five" in pair["paraphrase"]


def test_a_copy_of_the_window_is_no_paraphrase() -> None:
    copy = "Employees may carry over up to five unused days of annual leave into the next year."
    assert accept(WINDOW, reply(copy, copy.replace("five", "ten"))) is None


def test_a_changed_sentence_that_rewrites_more_than_a_detail_is_refused() -> None:
    assert (
        accept(
            WINDOW,
            reply(
                "You can bring as many as five leftover holiday days into the following year.",
                "Unused vacation is always forfeited at the end of December, with no exceptions.",
            ),
        )
        is None
    )


def test_replies_that_are_no_pair_are_refused() -> None:
    same = "You can bring five leftover holiday days into the following year."
    assert accept(WINDOW, reply(same, same)) is None
    assert accept(WINDOW, "I cannot help with that.") is None
    assert accept(WINDOW, '{"paraphrase": "only one side"}') is None
    assert accept(WINDOW, '{"paraphrase": 3, "changed": [1]}') is None
