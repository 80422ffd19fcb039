from monitor.demo.golden import choose_left

ROWS = [  # oldest first: (id, the reasons of its answers)
    ("a", {"hallucination"}),
    ("b", {"control"}),
    ("c", {"low_utility"}),
    ("d", {"hallucination", "low_utility"}),
    ("e", {"control"}),
]


def test_the_newest_rows_are_left_pending() -> None:
    assert choose_left(ROWS, 1) == {"e"}
    assert choose_left(ROWS, 0) == set()


def test_no_reason_is_left_without_a_reviewed_row() -> None:
    """Leaving c or b or a as well would take the last row of a reason from the reviewer
    (the calibration needs verdicts on the flagged answers and on the controls)."""
    left = choose_left(ROWS, 3)
    assert left == {"e", "d"}
    kept = [reasons for row_id, reasons in ROWS if row_id not in left]
    assert set().union(*kept) == {"hallucination", "control", "low_utility"}
