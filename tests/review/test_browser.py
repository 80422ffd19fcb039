"""The review page end to end in a real browser: Debian's chromium driven by Playwright.

Playwright is launched on the system binary (``executable_path``), so nothing is
downloaded. The app runs on 127.0.0.1 on a real Postgres; what the browser saves
is read back from Postgres.
"""

from __future__ import annotations

import os
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from playwright.async_api import Browser, Page, async_playwright, expect

from monitor.backlog.reviews import VerdictInput
from monitor.records import MetricResult, ScoredRecord
from monitor.review.app import ReviewApp
from monitor.review.auth import parse_tokens
from monitor.sinks.backlog import BacklogSink
from tests.support.backlog import fetch, scored
from tests.support.review import XSS_IMG, XSS_SCRIPT, xss_record
from tests.support.tools import require_tool

pytestmark = pytest.mark.postgres

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
#: set to a directory to keep the screenshots (they are taken either way)
SHOTS = os.environ.get("RAGMON_TEST_SCREENSHOTS")


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    require_tool("chromium", "chromium", path=CHROMIUM)
    async with async_playwright() as p:
        launched = await p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            yield launched
        finally:
            await launched.close()


def base(app: ReviewApp) -> str:
    return f"http://127.0.0.1:{app.port}"


#: the judge the seeded records were scored by, as the scorer stamps it on every result
JUDGE, MODEL = "local", "support-model"
#: a reason as the local judge writes it: the deciding word quoted, the closest excerpt
NEVER = (
    "not supported (p=0.08): 'never' is in no context; closest: "
    "“Receipts are needed for expenses over $100.”"
)


def judged(record: ScoredRecord) -> ScoredRecord:
    for result in record.results.values():
        result.judge, result.judge_model = JUDGE, MODEL
    return record


async def seed(backlog: BacklogSink) -> None:
    await backlog.write(
        [
            judged(
                scored(
                    "old",
                    "How many vacation days do I get?",
                    response="25 days a year.",
                    faithfulness=0.3,
                )
            )
        ]
    )
    hallucinated = scored(
        "new",
        "When do I need to attach a receipt?",
        response="Receipts are never needed. Ask your manager.",
        contexts=("Receipts are needed for expenses over $100.", "Managers approve trips."),
        details={
            "statements": [
                {"statement": "Receipts are never needed.", "verdict": 0, "reason": NEVER},
                {"statement": "Ask your manager.", "verdict": 1, "reason": "managers approve"},
            ]
        },
    )
    hallucinated.results["response_relevancy"] = MetricResult(
        metric="response_relevancy", score=0.2
    )
    await backlog.write([judged(hallucinated)])
    await backlog.write(
        [judged(scored("new-2", "when do i need to attach a receipt", response="Only for meals."))]
    )


async def shot(page: Page, tmp_path: Path, name: str) -> None:
    folder = Path(SHOTS) if SHOTS else tmp_path
    folder.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(folder / f"{name}.png"), full_page=True)
    assert (folder / f"{name}.png").stat().st_size > 10_000


async def test_queue_row_keyboard_review_lands_in_postgres(
    app: ReviewApp, backlog: BacklogSink, browser: Browser, pg_dsn: str, tmp_path: Path
) -> None:
    await seed(backlog)
    page = await browser.new_page(viewport={"width": 1200, "height": 900})
    await page.goto(base(app) + "/")
    await expect(page.locator("table.queue tbody tr")).to_have_count(2)
    await expect(page.locator("nav.tabs a.on")).to_contain_text("all 2")
    await expect(page.locator(".shortcuts")).to_contain_text("next / previous row")
    await expect(page.locator(".judges")).to_have_text(
        "Flags and scores by: the local judge (support-model) (3 answers)"
    )
    await shot(page, tmp_path, "queue")
    # j moves to the older row, k back to the newest; Enter opens it
    await page.keyboard.press("j")
    await expect(page.locator("tr.current")).to_contain_text("vacation")
    await page.keyboard.press("k")
    await page.keyboard.press("Enter")
    await page.wait_for_url("**/rows/new")
    await expect(page.locator("h1.question")).to_have_text("When do I need to attach a receipt?")
    await expect(page.locator("section.answer")).to_have_count(2)
    await expect(page.locator("mark.unsupported").first).to_have_text("Receipts are never needed.")
    await expect(page.locator("mark.supported").first).to_have_attribute(
        "title", "managers approve"
    )
    await expect(page.locator("ol.contexts li").first).to_contain_text("over $100")
    # the unsupported claim's reason is text on the page, not only a tooltip; the word
    # that decided is marked in the claim and in the reason
    first = page.locator("section.answer").first
    claims = first.locator("ol.unsupported-claims li")
    await expect(claims).to_have_count(1)
    await expect(claims.locator("q.claim")).to_have_text("Receipts are never needed.")
    await expect(claims.locator(".why")).to_be_visible()
    await expect(claims.locator(".why")).to_have_text(f"— {NEVER}")
    await expect(claims.locator("q.claim mark.decisive")).to_have_text("never")
    await expect(claims.locator(".why mark.decisive")).to_have_text("'never'")
    await expect(first.locator(".legend .judge")).to_have_text(
        "judged by the local judge (support-model)"
    )
    for key in ("Ctrl-Enter", "1 / 2 / 3", "j / k"):
        await expect(page.locator(".shortcuts")).to_contain_text(key)

    # e edits the reference; Esc leaves it; 1/2/3 mark the verdicts in order
    await page.keyboard.press("e")
    await page.keyboard.type("Receipts are needed for expenses over $100.")
    await page.keyboard.press("Escape")
    await page.keyboard.press("1")  # answer 1, hallucination: confirmed
    await page.keyboard.press("2")  # answer 1, low_relevancy: false alarm
    await page.keyboard.press("3")  # answer 2, hallucination: unsure
    await page.locator("#note").fill("checked against the expense policy")
    await shot(page, tmp_path, "row")
    await page.keyboard.press("Control+Enter")
    await page.wait_for_url("**/rows/old")

    rows = await fetch(
        pg_dsn, "SELECT reference, status, review_note, version FROM backlog WHERE id = 'new'"
    )
    assert tuple(rows[0]) == (
        "Receipts are needed for expenses over $100.",
        "annotated",
        "checked against the expense policy",
        3,
    )
    verdicts = await fetch(
        pg_dsn, "SELECT interaction_id, reason, verdict, reviewer FROM backlog_verdicts ORDER BY id"
    )
    assert [tuple(v) for v in verdicts] == [
        ("new", "hallucination", "confirmed", "local"),
        ("new", "low_relevancy", "false_alarm", "local"),
        ("new-2", "hallucination", "unsure", "local"),
    ]
    await page.goto(base(app) + "/calibration")
    await expect(page.locator("h1")).to_have_text("Judge accuracy")
    await expect(page.locator("main")).to_contain_text("no control answers")
    await expect(page.locator(".rule")).to_have_text(
        "Counted: an answer counts as a hallucination when any of its claims is not "
        "supported by its retrieved context (faithfulness below 1)."
    )
    await expect(page.locator(".judges")).to_have_text(
        "The verdicts check the flags of: the local judge (support-model) (3 answers)"
    )
    await shot(page, tmp_path, "calibration")
    await page.close()


#: an answer as the demo's local judge splits it: one claim verbatim, two reworded (a capital
#: and a full stop added), one of them unsupported
MONTHLY = (
    "You can cancel a monthly plan whenever you like; it stays active until the current "
    "billing period ends, but those fees have to be paid before the end of March or you lose it."
)
MONTHLY_CLAIMS = [
    {"statement": "You can cancel a monthly plan whenever you like", "verdict": 1,
     "reason": "supported (p=0.91, model 0.95); closest in the context: “Monthly plans can be "
               "cancelled at any time.”"},
    {"statement": "It stays active until the current billing period ends.", "verdict": 1,
     "reason": "supported (p=0.85, model 0.91); closest in the context: “The plan stays "
               "active until the end of the billing period.”"},
    {"statement": "Those fees have to be paid before the end of March or you lose it.",
     "verdict": 0,
     "reason": "not supported (p=0.48, model 0.37); 'march', 'lose' in no passage of the "
               "context; closest in the context: “Monthly plans are not refunded.”"},
]  # fmt: skip


async def test_reworded_claims_are_marked_in_the_answer_and_p_is_explained(
    app: ReviewApp, backlog: BacklogSink, browser: Browser, tmp_path: Path
) -> None:
    """A claim the splitter reworded is marked on the words of the answer it stands for, as
    the legend says; the figures in the reasons (p, model) are explained on the page."""
    record = scored(
        "monthly",
        "What happens if I cancel my monthly plan?",
        response=MONTHLY,
        contexts=("Monthly plans can be cancelled at any time.", "Monthly plans are not refunded."),
        details={"statements": MONTHLY_CLAIMS},
    )
    await backlog.write([judged(record)])
    page = await browser.new_page(viewport={"width": 1200, "height": 900})
    await page.goto(base(app) + "/rows/monthly")
    answer = page.locator("section.answer").first
    response = answer.locator("p.response")
    await expect(response.locator("mark")).to_have_count(3)  # every claim, none left out
    await expect(response.locator("mark.supported").first).to_have_text(
        "You can cancel a monthly plan whenever you like"
    )
    stays = response.locator("mark.supported.reworded")
    await expect(stays).to_have_text("it stays active until the current billing period ends")
    await expect(stays).to_have_attribute(
        "title", re.compile(r"^read as: It stays active until the current billing period ends\.")
    )
    lost = response.locator("mark.unsupported.reworded")
    await expect(lost).to_have_text(
        "those fees have to be paid before the end of March or you lose it"
    )
    # the legend promises the dotted marking, and the reworded claim is spelled out below
    await expect(answer.locator("p.legend").first).to_contain_text(
        "dotted: a claim the judge read in other words"
    )
    await expect(answer.locator("ul.statements li")).to_have_text(
        "read as It stays active until the current billing period ends. — "
        + str(MONTHLY_CLAIMS[1]["reason"])
    )
    await expect(answer.locator("ol.unsupported-claims q.claim")).to_contain_text(
        "Those fees have to be paid"
    )
    # p=0.48, model 0.37: said what each is, on the page
    explained = answer.locator("p.legend.probability")
    await expect(explained).to_contain_text("p: how likely the judge finds it that the contexts")
    await expect(explained).to_contain_text("model: the trained support model's own probability")
    await shot(page, tmp_path, "reworded")
    await page.close()


async def test_a_stale_save_shows_the_conflict(
    app: ReviewApp, backlog: BacklogSink, browser: Browser, tmp_path: Path
) -> None:
    await seed(backlog)
    page = await browser.new_page()
    await page.goto(base(app) + "/rows/old")
    # another reviewer saves first
    row = await backlog.store.get("old")
    assert row is not None
    await backlog.store.review(
        "old",
        version=row.version,
        reviewer="bo",
        reference="25 days.",
        verdicts=[VerdictInput("hallucination", "false_alarm")],
    )
    await page.keyboard.press("1")
    await page.keyboard.press("Control+Enter")
    banner = page.locator("#banner.conflict")
    await expect(banner).to_contain_text("another reviewer saved this row first")
    await expect(banner).to_contain_text('"25 days."')
    await expect(banner).to_contain_text("false alarm by bo")
    await expect(page.locator("#version-shown")).to_have_text(str(row.version + 1))
    await shot(page, tmp_path, "conflict")
    assert page.url.endswith("/rows/old")  # nothing was saved, the page stays
    kept = await backlog.store.get("old")
    assert kept is not None and kept.answers[0].verdicts[0].reviewer == "bo"
    # saving again on purpose replaces the verdict
    await page.keyboard.press("Control+Enter")
    await page.wait_for_url(base(app) + "/")
    kept = await backlog.store.get("old")
    assert kept is not None and kept.answers[0].verdicts[0].verdict == "confirmed"


async def test_saving_works_without_javascript(
    app: ReviewApp, backlog: BacklogSink, browser: Browser
) -> None:
    await seed(backlog)
    context = await browser.new_context(java_script_enabled=False)
    page = await context.new_page()
    await page.goto(base(app) + "/rows/old")
    await page.locator("textarea#reference").fill("25 days, plus public holidays.")
    await page.locator("fieldset.verdict input[value=confirmed]").check()
    await page.get_by_role("button", name="Save").click()
    await page.wait_for_url("**/rows/old?saved=2")
    await expect(page.locator("#banner")).to_contain_text("Saved (version 2)")
    row = await backlog.store.get("old")
    assert row is not None and row.reference == "25 days, plus public holidays."
    assert row.answers[0].verdicts[0].verdict == "confirmed"
    await context.close()


async def test_xss_payloads_render_inert(
    app: ReviewApp, backlog: BacklogSink, browser: Browser
) -> None:
    await backlog.write([xss_record("xss")])
    page = await browser.new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda d: dialogs.append(d.message))
    for path in ("/", "/rows/xss"):
        await page.goto(base(app) + path)
        assert await page.evaluate("document.querySelectorAll('main img').length") == 0
        assert await page.evaluate("document.querySelectorAll('main script').length") == 0
        assert await page.title() != "pwned"  # the payload's own title change never ran
    await expect(page.locator(".response")).to_contain_text(XSS_IMG)
    await expect(page.locator("h1.question")).to_have_text(f"Question {XSS_SCRIPT}")
    assert dialogs == []


async def test_a_missing_token_gets_401_off_loopback(
    backlog: BacklogSink, browser: Browser
) -> None:
    await seed(backlog)
    token = "ana-token-0123456789"
    app = ReviewApp(backlog.store, tokens=parse_tokens(f"ana:{token}"))
    await app.start("0.0.0.0", 0)  # not loopback: tokens required; we connect on loopback
    try:
        page = await browser.new_page()
        response = await page.goto(base(app) + "/")
        assert response is not None and response.status == 401
        response = await page.goto(base(app) + "/api/rows")
        assert response is not None and response.status == 401
        # signing in with the token sets the cookie; the queue then opens
        await page.goto(base(app) + "/login")
        await page.locator("input[name=token]").fill(token)
        await page.get_by_role("button", name="sign in").click()
        await page.wait_for_url(base(app) + "/")
        await expect(page.locator("table.queue tbody tr")).to_have_count(2)
        await page.goto(base(app) + "/rows/old")
        await expect(page.locator(".buttons .who")).to_contain_text("ana")
        await page.keyboard.press("2")
        await page.keyboard.press("Control+Enter")
        await page.wait_for_url(base(app) + "/")
        row = await backlog.store.get("old")
        assert row is not None and row.answers[0].verdicts[0].reviewer == "ana"
        bearer = await browser.new_context(extra_http_headers={"Authorization": f"Bearer {token}"})
        response = await (await bearer.new_page()).goto(base(app) + "/api/rows")
        assert response is not None and response.status == 200
        await bearer.close()
    finally:
        await app.stop()


def both_judged(rid: str, probability: float, local_flagged: bool) -> ScoredRecord:
    """An LLM judge's flagged answer with the local judge's risk screen reading beside it."""
    details = {
        "statements": [{"statement": f"Answer {rid}.", "verdict": 0, "reason": "not in it"}],
        "hallucination_probability": probability,
        "local_flagged": local_flagged,
    }
    record = scored(rid, f"Question {rid}?", response=f"Answer {rid}.", details=details)
    for result in record.results.values():
        result.judge, result.judge_model = "llm", "gpt-4o-mini"
    return record


async def test_the_queue_and_judge_accuracy_say_what_both_judges_said(
    app: ReviewApp, backlog: BacklogSink, browser: Browser, tmp_path: Path
) -> None:
    both = [both_judged(f"both-{i}", 0.9, True) for i in range(9)]
    llm_only = both_judged("llm-only", 0.97, False)
    local_own = judged(scored("local-own", "Question local-own?", response="Answer local-own."))
    await backlog.write([*both, llm_only, local_own])
    for i, record in enumerate([*both, llm_only]):
        verdict = "confirmed" if i < 7 else "false_alarm"
        await backlog.store.review(
            record.interaction.id,
            version=1,
            reviewer="ana",
            verdicts=[VerdictInput("hallucination", verdict)],
        )
    page = await browser.new_page(viewport={"width": 1200, "height": 900})
    await page.goto(base(app) + "/")
    rows = page.locator("table.queue tbody tr")
    await expect(rows).to_have_count(11)
    # the answers both judges flagged first, though the LLM-only row's probability is higher
    for k in range(9):
        await expect(rows.nth(k).locator(".flagged-by")).to_have_text("both")
    await expect(rows.nth(9).locator(".flagged-by")).to_have_text("LLM")
    await expect(rows.nth(9)).to_contain_text("llm-only")
    await expect(rows.nth(10).locator(".flagged-by")).to_have_text("local")
    await shot(page, tmp_path, "queue-judges")

    await page.goto(base(app) + "/rows/both-0")
    await expect(page.locator(".flagged-by-line")).to_have_text(
        "flagged by both judges; the local judge's p(hallucinated) 0.90"
    )
    await shot(page, tmp_path, "row-judges")
    await page.goto(base(app) + "/rows/local-own")
    await expect(page.locator(".flagged-by-line")).to_have_text("flagged by the local judge")

    await page.goto(base(app) + "/calibration")
    table = page.locator("table.judges-precision")
    # 10 verdicts on the LLM judge's flags: a figure and its interval; 9 on the others: not
    # enough to say
    await expect(table.locator('tr[data-judge="llm"]')).to_contain_text("70.0 %")
    await expect(table.locator('tr[data-judge="llm"] td').nth(1)).to_contain_text(" – ")
    for judge in ("local", "both"):
        await expect(table.locator(f'tr[data-judge="{judge}"]')).to_contain_text(
            "not enough verdicts (9 of 10 needed)"
        )
    await shot(page, tmp_path, "calibration-judges")
    await page.close()
