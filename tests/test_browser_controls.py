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
    dropped = controls.dropped_seats(store, experiment_id)
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
