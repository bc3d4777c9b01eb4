"""In a real browser: an experiment's "Which protocol when?" tab, its headroom table (best
fixed, oracle, the round-one entropy router with its interval) and its dropped seats, as the
engine computes them (DESIGN 2.13). Saves 49-which-protocol-when.png to $PARLEY_SCREENSHOTS."""
from __future__ import annotations

import pytest
from plugins.browser import expect, goto, open_tab, settle

from engine import Store
from engine import experiments as ex
from engine.reports import controls


@pytest.fixture
def app(shared_app):
    """The session's shared app server (this module's checks read only what it stored)."""
    return shared_app


def test_which_protocol_when_shows_the_headroom_and_the_dropped_seats(app, page, shots):  # noqa: F811
    base, db_url = app
    store = Store(db_url)
    plan = ex.plan({"name": "which protocol when", "questions": [
        {"question": f"What is {q} * 7?", "expected": str(7 * q)} for q in range(16)],
        "concurrency": 4, "configs": [
            {"protocol": "society", "label": "society 3x2",
             "model": "simulated?skill=0.55&conformity=0.6", "options": {"rounds": 2}},
            {"protocol": "vote", "label": "vote",
             "model": "simulated?skill=0.6&fail=0.2"}]}, store)
    experiment_id = ex.create(store, plan)
    ex.run_experiment(store, experiment_id)
    found = controls.headroom(store, experiment_id)
    dropped = controls.controls_of(store, experiment_id)[1]
    assert found.simulated and not found.note and dropped  # the vote lost calls
    goto(page, base, f"/experiments?experiment={experiment_id}")
    open_tab(page, "Which protocol when?")
    main = page.locator("[data-testid='stMain']")
    main.get_by_role("heading", name="Which protocol when?").wait_for()
    main.get_by_role("heading", name="Dropped seats").wait_for()
    tables = main.locator("[data-testid='stDataFrame']")
    expect(tables).to_have_count(2)
    expect(main).to_contain_text("had a unanimous wrong round one" if found.unanimous_wrong.n
                                 else "question was fixed by a deliberation")
    expect(main).to_contain_text("Simulated")
    expect(main).to_contain_text("arXiv 2605.09618")
    settle(page)
    main.screenshot(path=str(shots / "49-which-protocol-when.png"))
    expect(page.locator("[data-testid='stException']")).to_have_count(0)
    print(f"controls screenshot in {shots}: 49-which-protocol-when")


def _section(page, main, heading: str, path) -> None:
    """A screenshot of one section of the tab: its heading down to the bottom of the table
    under it."""
    top = main.get_by_role("heading", name=heading)
    first = top.bounding_box()
    tables = main.locator("[data-testid='stDataFrame']")
    boxes = [b for b in (tables.nth(i).bounding_box() for i in range(tables.count()))
             if b and b["y"] > first["y"]]
    assert first and boxes
    bottom = min(boxes, key=lambda b: b["y"])
    area = main.bounding_box()
    page.screenshot(path=str(path), clip={
        "x": area["x"], "y": first["y"] - 8, "width": area["width"],
        "height": bottom["y"] + bottom["height"] - first["y"] + 48})


def test_the_placebo_and_the_judge_without_the_transcript(app, page, shots):  # noqa: F811
    """The placebo arm's table (configuration minus placebo, tokens of both) and, after
    `rejudge --answers-only`, the judge read from the answers alone beside the transcript's
    and the consultancy baseline's. Saves 50-placebo.png and 51-answers-only-judge.png."""
    from engine.experiments.rejudge import rejudge
    base, db_url = app
    store = Store(db_url)
    plan = ex.plan({"name": "is the deliberation worth it", "questions": [
        {"question": f"What is {q} * 7?", "expected": str(7 * q)} for q in range(8)],
        "concurrency": 4, "baseline": ["placebo", "consultancy"], "configs": [
            {"protocol": "society", "label": "society 3x2",
             "model": "simulated?skill=0.55&conformity=0.6", "options": {"rounds": 2}},
            {"protocol": "debate", "label": "debate", "model": "simulated",
             "options": {"max_rounds": 1}}]}, store)
    experiment_id = ex.create(store, plan)
    assert ex.run_experiment(store, experiment_id).status == "completed"
    assert rejudge(store, experiment_id).made == 8  # the debate's judge, 8 questions
    goto(page, base, f"/experiments?experiment={experiment_id}")
    open_tab(page, "Which protocol when?")
    main = page.locator("[data-testid='stMain']")
    main.get_by_role("heading", name="Placebo: peers talking about another question").wait_for()
    main.get_by_role("heading", name="The judge without the transcript").wait_for()
    expect(main).to_contain_text("arXiv 2605.00914")
    expect(main).to_contain_text("Elasky and Nakasako")
    expect(page.locator("[data-testid='stException']")).to_have_count(0)
    size = page.viewport_size
    page.set_viewport_size({"width": size["width"], "height": 4000})  # every section in view
    settle(page)
    _section(page, main, "Placebo: peers talking about another question",
             shots / "50-placebo.png")
    _section(page, main, "The judge without the transcript", shots / "51-answers-only-judge.png")
    page.set_viewport_size(size)
    print(f"controls screenshots in {shots}: 50-placebo, 51-answers-only-judge")
