"""docs/img/review.png: the review page's row view on the demo's backlog, in Debian's chromium.

    python3 scripts/review_screenshot.py [--out docs/img/review.png] [--question TEXT]

Runs ``rag-monitor demo --review --review-port 0`` (the local judge unless
``RAG_MONITOR_JUDGE_BASE_URL`` is set), opens the row whose question starts with
``--question`` (by default the monthly-plan question the README shows) in chromium driven
by Playwright (``/usr/bin/chromium``, nothing downloaded), saves the top 1200 × 1000
pixels of the page, and stops the demo with Ctrl-C (SIGINT). Prints the rows it looked at.
Needs the ``dev`` extra (Playwright) and Debian's ``chromium``; says so, and exits 2, without.
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
QUESTION = "Quick question: what happens if I cancel my monthly plan?"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img" / "review.png")
    parser.add_argument("--question", default=QUESTION)
    args = parser.parse_args()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        print("review_screenshot: needs Playwright: pip install -e '.[dev]'", file=sys.stderr)
        return 2
    if not Path(CHROMIUM).is_file():
        print(
            f"review_screenshot: needs {CHROMIUM}: apt-get install chromium (Debian's package)",
            file=sys.stderr,
        )
        return 2
    demo = subprocess.Popen(
        [sys.executable, "-m", "monitor", "demo", "--review", "--review-port", "0"],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert demo.stderr is not None
        base = None
        for line in demo.stderr:
            found = re.search(r"review on (http://127\.0\.0\.1:\d+/)", line)
            if found:
                base = found.group(1)
                break
        if base is None:
            print("the demo ended without serving the review page", file=sys.stderr)
            return 1
        with urllib.request.urlopen(base + "api/rows?reason=hallucination&limit=200") as r:
            rows = json.loads(r.read())["rows"]
        chosen = next((row for row in rows if row["question"].startswith(args.question)), None)
        if chosen is None:
            print(f"no flagged row asks {args.question!r}", file=sys.stderr)
            return 1
        print(f"row {chosen['id']}: {chosen['question']}")
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1200, "height": 1000})
            page.goto(base + "rows/" + chosen["id"])
            page.locator("section.answer").first.wait_for()
            args.out.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(args.out))
            browser.close()
        print(f"wrote {args.out}")
        return 0
    finally:
        demo.send_signal(signal.SIGINT)
        demo.wait(60)


if __name__ == "__main__":
    sys.exit(main())
