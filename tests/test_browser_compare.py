"""In a real browser: two simulated runs of the same question (a two-round and a one-round
society of minds) compared side by side, opened from `?compare=A,B` and from the Runs page's
picker. Saves the screenshot 11-compare-runs to $PARLEY_SCREENSHOTS (or a temporary folder).
"""
from __future__ import annotations

import re

from test_browser import GENEROUS_MS, app, goto, page, settle, shots  # noqa: F401

from engine import Store
from engine.protocols import arun_config, run_sync

QUESTION = "A bat and a ball cost $1.10 in total. The bat costs $1.00 more. How much is the ball?"


def fill(db_url: str) -> tuple[str, str]:
    store = Store(db_url)
    return tuple(run_sync(arun_config(  # type: ignore[return-value]
        {"protocol": "society", "model": "simulated", "options": {"rounds": rounds}},
        QUESTION, store=store, label=f"society · {rounds} round(s)", expected="$0.05")).run_id
        for rounds in (2, 1))


def compared(page, first: str, second: str) -> str:  # noqa: F811
    """Wait for the Compare page to show both runs; returns the main area's text."""
    main = page.locator("[data-testid='stMain']")
    page.get_by_role("heading", name="Compare runs").wait_for(timeout=GENEROUS_MS)
    page.get_by_text("made by the offline simulated model").first.wait_for()
    settle(page)
    text = main.inner_text()
    assert first in text and second in text and "the same in every run" in text
    return text


def test_two_runs_side_by_side(app, page, shots):  # noqa: F811
    base, db_url = app
    first, second = fill(db_url)

    goto(page, base, f"/compare?compare={first},{second},gone0000")
    text = compared(page, first, second)
    assert "Run gone0000 could not be shown" in text
    page.get_by_role("tab", name="Configuration").click()
    settle(page)
    page.get_by_text("Only the 2 differing key(s)").wait_for()  # options.rounds, run.label
    page.get_by_role("tab", name="Transcripts").click()
    settle(page)
    page.get_by_text("revise · round 2").wait_for()
    page.get_by_role("tab", name="Answers").click()
    settle(page)
    page.screenshot(path=str(shots / "11-compare-runs.png"), full_page=True)

    goto(page, base, "/runs")
    for run_id in (first, second):
        page.locator(".st-key-runs_compare input").click()
        page.get_by_role("option", name=re.compile(re.escape(run_id))).click()
        page.keyboard.press("Escape")
        settle(page)
    page.locator(".st-key-runs_compare_go button").click()
    page.wait_for_url(f"**/compare?compare={first}%2C{second}*")
    compared(page, first, second)
    assert page.dialogs == [], page.dialogs
    assert page.locator("[data-testid='stException']").count() == 0
