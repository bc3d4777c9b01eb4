"""In a real browser: runs on a real server (the loopback OpenAI-compatible test server, over
HTTP) and simulated runs, side by side on Insights and in an experiment's results, kept apart
and labelled. Saves the screenshots 08-insights-real-and-simulated and
09-experiment-real-and-simulated to $PARLEY_SCREENSHOTS (or a temporary folder).

A server of this module's own (`app`), not the session's shared one: its check counts every
stored run, and its real runs would turn Insights to real runs by default for other tests.
"""
from __future__ import annotations

from openai_stub import SimulatedOpenAI
from plugins.browser import expect, goto, open_tab, rerun, settle, shown_as_text

from engine import Store
from engine import experiments as ex
from engine.protocols import arun_config, run_sync
from engine.questions import DEFINITE

QUESTIONS = DEFINITE[:3]


def fill(db_url: str, base_url: str) -> str:
    """Real and simulated runs of the same configurations, and an experiment with both."""
    store = Store(db_url)
    real = f"openai:stub-model?base_url={base_url}"  # given by this code: no key needed
    for question in QUESTIONS:
        for protocol in ("vote", "debate"):
            for model in ("simulated", real):
                run_sync(arun_config({"protocol": protocol, "model": model}, question.text,
                                     store=store, label=protocol, expected=question.expected))
    plan = ex.plan({"name": "real and simulated",
                    "questions": [{"question": q.text, "expected": q.expected}
                                  for q in QUESTIONS],
                    "configs": [{"label": "vote", "protocol": "vote", "model": "simulated"},
                                {"label": "vote on a server", "protocol": "vote",
                                 "model": real}],
                    "repeats": 1, "concurrency": 4}, store)
    experiment_id = ex.create(store, plan)
    ex.run_experiment(store, experiment_id)  # run_sync: Playwright's loop is running here
    return experiment_id


def show_both(page, key: str) -> None:  # noqa: F811
    """Choose "Both, side by side" in the page's Runs control (not the caption naming it)."""
    button = page.locator(f".st-key-{key} button", has_text="Both, side by side")
    button.wait_for()
    rerun(page, button.click)
    # a visible one: a table's cells are also in a hidden grid for screen readers
    page.get_by_text("(simulated)").filter(visible=True).first.wait_for()


def test_real_and_simulated_runs_are_kept_apart_and_labelled(app, page, shots):  # noqa: F811
    base, db_url = app
    with SimulatedOpenAI() as server:
        experiment_id = fill(db_url, server.base_url)
    store = Store(db_url)
    runs = store.runs()
    assert sorted(runs["simulated"].astype(bool).value_counts().to_dict().items()) == [
        (False, 9), (True, 9)]  # 6 real and 6 simulated runs, 3 + 3 in the experiment

    goto(page, base, "/insights")
    main = page.locator("[data-testid='stMain']")
    page.locator(".st-key-insights-kind").wait_for()
    settle(page)
    # real runs only, by default
    expect(main).not_to_contain_text("(simulated)", use_inner_text=True)
    show_both(page, "insights-kind")
    for text in ("(simulated)", "simulated and real, kept apart"):
        expect(main).to_contain_text(text, use_inner_text=True)
    page.screenshot(path=str(shots / "08-insights-real-and-simulated.png"), full_page=True)

    goto(page, base, f"/experiments?experiment={experiment_id}")
    show_both(page, "exp-kind")
    open_tab(page, "Paired comparison")  # the two configurations named side by side
    # The tab's rerun may still be drawing (its pickers shown, its counts not yet): wait for
    # the counts, which name both configurations.
    shown_as_text(page, "vote on a server better")
    shown_as_text(page, "vote (simulated) better")
    for text in ("vote (simulated)", "vote on a server"):
        expect(main).to_contain_text(text, use_inner_text=True)
    page.screenshot(path=str(shots / "09-experiment-real-and-simulated.png"), full_page=True)
    assert page.dialogs == [], page.dialogs
