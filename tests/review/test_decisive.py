"""The words of a judge's reason that decided it: found in the raw text, marked in escaped HTML."""

from __future__ import annotations

from monitor.review.decisive import mark, places, quoted_places, terms
from monitor.review.pages import unsupported_claims
from tests.support.review import XSS_IMG, XSS_SCRIPT

LOCAL = (
    "not supported (p=0.12): 'manager', 'sign-off' are in no context; closest: "
    "“Refunds are issued within 14 days by the manager's team…”"
)


def test_the_local_judges_quoted_words_are_the_terms() -> None:
    claim = "Refunds need the manager's sign-off within 14 days."
    assert terms(LOCAL, claim) == ["manager", "sign-off"]  # 14 only in the excerpt; p= not


def test_numbers_the_claim_states_are_terms_outside_excerpts() -> None:
    reason = "the context says refunds take 14 days, not 30; “within 30 days of the …”"
    assert terms(reason, "Refunds take 30 days.") == ["30"]
    spans = quoted_places(reason, ["30"])
    assert [reason[a:b] for a, b in spans] == ["30"]  # not the 30 inside the excerpt
    assert spans[0][0] < reason.index("“")
    assert terms("p=0.12, nothing matches", "It costs $25.") == []


def test_apostrophes_are_not_quotes() -> None:
    reason = "the context doesn't say 'weekly' and the team's page says 'monthly'"
    assert terms(reason, "Reports are weekly.") == ["weekly", "monthly"]
    assert terms("‘25 days’ is not in any context", "You get 25 days.") == ["25 days"]


def test_places_are_whole_words_case_insensitive_and_merged() -> None:
    claim = "The Manager approves; managers sign-off later; the manager-sign-off form."
    found = places(claim, ["manager", "sign-off", "manager-sign"])
    assert [claim[a:b] for a, b in found] == ["Manager", "sign-off", "manager-sign-off"]


def test_marking_escapes_everything_and_never_marks_inside_an_escape() -> None:
    # the term "amp" and "lt" would hit the escapes &amp; and &lt; if matched in the HTML
    claim = "Tom & Jerry <b>lt</b> amp"
    html = mark(claim, places(claim, ["amp", "lt"]))
    assert html == (
        'Tom &amp; Jerry &lt;b&gt;<mark class="decisive">lt</mark>&lt;/b&gt; '
        '<mark class="decisive">amp</mark>'
    )


def test_unsupported_claims_list_each_with_its_reason_escaped() -> None:
    statements = [
        {"statement": "Refunds need the manager's sign-off.", "verdict": 0, "reason": LOCAL},
        {"statement": "It is free.", "verdict": 1, "reason": "the context says so"},
        {"statement": XSS_IMG, "verdict": 0, "reason": f"'{XSS_SCRIPT}' is in no context"},
        {"statement": "No reason given.", "verdict": 0},
    ]
    html = unsupported_claims(statements)
    assert html.count("<li>") == 3  # the supported one is not listed
    assert "It is free." not in html
    assert '<mark class="decisive">manager</mark>' in html
    assert "<mark class=\"decisive\">'sign-off'</mark>" not in html  # quotes are escaped
    assert '<mark class="decisive">&#x27;sign-off&#x27;</mark>' in html
    assert "<script>" not in html and "<img" not in html
    assert "&lt;script&gt;" in html
    assert "(the judge gave no reason)" in html
    assert unsupported_claims(statements[1:2]) == ""
