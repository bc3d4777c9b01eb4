"""In a real browser: an experiment with a planted adversary shows its hijack rate by seat
position beside its placebo persona (DESIGN 2.13), under the results' tabs. Saves
50-hijack-rate.png to $PARLEY_SCREENSHOTS."""
from __future__ import annotations

import pytest
from plugins.browser import expect, goto, settle

from engine import Store
from engine import experiments as ex
from engine.reports import hijack


@pytest.fixture
def app(shared_app):
    """The session's shared app server."""
    return shared_app

def test_an_experiment_shows_the_planted_adversary_s_hijack_rate(app, page, shots):  # noqa: F811
    base, db_url = app
    store = Store(db_url)
    seats = [{"name": n} for n in ("ada", "bo", "cy", "mole")]
    plan = ex.plan({"name": "planted adversary", "questions": [
        {"question": f"What is {q} * 7?", "expected": str(7 * q)} for q in range(1, 13)],
        "concurrency": 4, "configs": [
            {"protocol": "society", "label": "society", "model": "simulated?push=0.5",
             "options": {"rounds": 3}, "seats": {"agents": seats},
             "adversary": {"seat": "mole", "answer": "planted"}}]}, store)
    experiment_id = ex.create(store, plan)
    ex.run_experiment(store, experiment_id)
    table = hijack.for_experiment(store, experiment_id)
    assert table["arm"].tolist() == ["adversary", "placebo persona"]
    goto(page, base, f"/experiments?experiment={experiment_id}")
    main = page.locator("[data-testid='stMain']")
    heading = main.get_by_role("heading", name="Planted adversary: hijack rate")
    heading.wait_for()
    expect(main).to_contain_text("placebo persona")
    expect(main).to_contain_text("push 0.5")  # the world, shown with the result
    settle(page)
    section = page.locator(f".st-key-hijack-{experiment_id}-view")
    section.scroll_into_view_if_needed()
    section.screenshot(path=str(shots / "50-hijack-rate.png"))
    expect(page.locator("[data-testid='stException']")).to_have_count(0)
    print(f"hijack screenshot in {shots}: 50-hijack-rate")
