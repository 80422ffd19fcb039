"""The windows a statement is read against, and the lexical shortlist the embedder ranks."""

from __future__ import annotations

from monitor.judges.local.embedder import MiniLMEmbedder
from monitor.judges.local.windows import SHORTLIST, TOP, nearest, shortlist, stems, windows_of

TOPICS = [
    "Refunds are issued to the original card within 5-7 business days.",
    "The canteen opens at 8 and closes at 15.",
    "Parking permits are renewed every January at the front desk.",
    "Laptops are replaced every 4 years by the IT department.",
    "Expense receipts are needed for purchases over $100.",
    "The office is closed on public holidays.",
    "Visitors sign in at reception and wear a badge.",
    "Annual leave is 25 days for full-time employees.",
]


def test_a_statement_shortlists_the_windows_that_share_its_words() -> None:
    windows = windows_of([" ".join(TOPICS)])
    said = ["Receipts are needed above $100."]
    kept = shortlist(said, windows, size=2)
    assert 0 < len(kept) <= 2 and kept == sorted(kept)
    assert all("receipts" in windows[i].lower() for i in kept)
    # a statement that shares no word with any window shortlists nothing
    assert shortlist(["Zebras gallop."], windows) == []


def test_figures_tell_windows_apart() -> None:
    contexts = [" ".join(f"Fact number {k} is about topic {k}." for k in range(12))]
    windows = windows_of(contexts)
    kept = shortlist(["Topic 9 has a fact."], windows, size=2)
    assert all("topic 9" in windows[i] for i in kept)


def test_the_nearest_windows_are_the_embedders_ranking_of_the_shortlist() -> None:
    embedder = MiniLMEmbedder()
    windows = windows_of([" ".join(TOPICS)])
    said = ["Receipts are needed above $100.", "Full-time staff get 25 days of leave."]
    every = nearest(embedder, said, windows, size=None)
    short = nearest(embedder, said, windows)
    kept = shortlist(said, windows, SHORTLIST)
    assert all(len(found) == TOP and set(found) <= set(kept) for found in short)
    # the picks are the embedder's ranking of the shortlist, with the vectors it gives alone
    among = nearest(embedder, said, [windows[i] for i in kept], size=None)
    assert short == [[kept[i] for i in found] for found in among]
    # and each statement's nearest window is the one the embedder finds among them all
    assert [found[0] for found in short] == [found[0] for found in every]
    # fewer shortlisted windows than a statement reads: every window is ranked
    assert nearest(embedder, ["Zebras gallop."], windows) == nearest(
        embedder, ["Zebras gallop."], windows, size=None
    )


def test_the_stems_cache_is_bounded_and_changes_nothing() -> None:
    text = "Refunds were refunded on 12 cards."
    assert stems(text) == stems.__wrapped__(text) == {"refund", "card", "12"}
    bound = stems.cache_info().maxsize
    assert bound is not None and 0 < bound <= 16384
