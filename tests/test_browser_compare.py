"""In a real browser: two simulated runs of the same question (a two-round and a one-round
society of minds) compared side by side, opened from `?compare=A,B` and from the Runs page's
picker. Saves the screenshot 11-compare-runs to $PARLEY_SCREENSHOTS (or a temporary folder).
"""
from __future__ import annotations

import re

import pytest
from plugins.browser import expect, goto, rerun, settle

from engine import Store
from engine.protocols import arun_config, run_sync


@pytest.fixture
def app(shared_app):
    """The session's shared app server (this module's checks read only what it stored)."""
    return shared_app


QUESTION = "A bat and a ball cost $1.10 in total. The bat costs $1.00 more. How much is the ball?"


def fill(db_url: str) -> tuple[str, str]:
    store = Store(db_url)
    return tuple(run_sync(arun_config(  # type: ignore[return-value]
        {"protocol": "society", "model": "simulated", "options": {"rounds": rounds}},
        QUESTION, store=store, label=f"society · {rounds} round(s)", expected="$0.05")).run_id
        for rounds in (2, 1))


def compared(page, first: str, second: str):  # noqa: F811
    """Wait for the Compare page to show both runs; returns its main area."""
    main = page.locator("[data-testid='stMain']")
    page.get_by_role("heading", name="Compare runs").wait_for()
    page.get_by_text("made by the offline simulated model").first.wait_for()
    settle(page)
    for text in (first, second, "the same in every run"):
        expect(main).to_contain_text(text, use_inner_text=True)
    return main


def open_tab(page, name: str) -> None:  # noqa: F811
    """The Compare page's tabs switch in the browser (no script run): click one and wait
    until it is the open one."""
    tab = page.get_by_role("tab", name=name)
    tab.click()
    expect(tab).to_have_attribute("aria-selected", "true")


def test_two_runs_side_by_side(app, page, shots):  # noqa: F811
    base, db_url = app
    first, second = fill(db_url)

    goto(page, base, f"/compare?compare={first},{second},gone0000")
    main = compared(page, first, second)
    expect(main).to_contain_text("Run gone0000 could not be shown", use_inner_text=True)
    open_tab(page, "Configuration")
    page.get_by_text("Only the 2 differing key(s)").wait_for()  # options.rounds, run.label
    open_tab(page, "Transcripts")
    page.get_by_text("revise · round 2").wait_for()
    open_tab(page, "Answers")
    page.screenshot(path=str(shots / "11-compare-runs.png"), full_page=True)

    goto(page, base, "/runs")
    for run_id in (first, second):
        page.locator(".st-key-runs_compare input").click()
        rerun(page, page.get_by_role("option", name=re.compile(re.escape(run_id))).click)
        page.keyboard.press("Escape")
    expect(page.locator(".st-key-runs_compare [data-tag]")).to_have_count(2)
    rerun(page, page.locator(".st-key-runs_compare_go button").click)
    page.wait_for_url(f"**/compare?compare={first}%2C{second}*")
    compared(page, first, second)
    assert page.dialogs == [], page.dialogs
    expect(page.locator("[data-testid='stException']")).to_have_count(0)
