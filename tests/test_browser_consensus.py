"""In a real browser (issue 29): a simulated society run's detail draws its dynamics strip
(entropy and agreement by round, the flags, the flips); Insights' "Consensus earned?" draws
agreement inflation against accuracy with the manufactured-consensus flags, and one
configuration's three confidence curves on the same runs with their ECE; an experiment's
results have the same view as a tab. Saves the screenshots 33-dynamics-strip,
34-consensus-curves and 35-consensus-experiment to $PARLEY_SCREENSHOTS (or a temporary folder).
"""
from __future__ import annotations

# A server of this module's own, over a fresh database: Insights here must see only these runs.
from plugins.browser import expect, goto, open_tab, rerun, settle

from engine import Store
from engine import experiments as ex
from engine.protocols.council import run_council
from engine.protocols.society import run_society
from engine.reports import consensus
from engine.store import RunFilters


def test_dynamics_strip_and_the_consensus_view(app, page, shots):  # noqa: F811
    base, db_url = app
    store = Store(db_url)
    flipped = None
    for q in range(24):
        model = f"simulated?skill=0.6&conformity=0.5&seed={q}"
        result = run_society(f"What is {q} + {q}?", agents=[model] * 5, rounds=3, store=store,
                             expected=str(2 * q), label="society 5x3")
        if flipped is None and result.mind_changes:
            flipped = result.run_id
        run_council(f"What is {q} + {q}?", members=[model] * 3, chairman=model, store=store,
                    expected=str(2 * q), label="council")
    assert flipped is not None

    goto(page, base, f"/runs?run={flipped}")
    main = page.locator("[data-testid='stMain']")
    heading = main.get_by_role("heading", name="Dynamics")
    heading.wait_for()
    expect(main).to_contain_text("Agreement inflation (last round minus first)")
    expect(main).to_contain_text("fix(es)")
    strip = main.locator("[data-testid='stPlotlyChart']").last
    expect(strip.locator(".legend")).to_contain_text("agreement")
    heading.scroll_into_view_if_needed()
    settle(page)
    page.screenshot(path=str(shots / "33-dynamics-strip.png"))

    goto(page, base, "/insights")
    pill = page.locator(".st-key-insights-sections button").filter(has_text="Consensus earned?")
    rerun(page, pill.click)
    main.get_by_role("heading", name="Consensus earned?").wait_for()
    report = consensus.from_store(store, RunFilters(), "simulated")
    assert report.configurations == ["society 5x3 (simulated)", "council (simulated)"]
    for row in report.table.to_dict("records"):  # each configuration's verdict, with n
        expect(main).to_contain_text(consensus.flag_text(row))
    expect(main).to_contain_text("over 24 run(s)")
    figures = main.locator("[data-testid='stPlotlyChart'] .js-plotly-plot")
    expect(figures.filter(has_text="Agreement inflation against accuracy")).to_have_count(1)
    curves = figures.filter(has_text="Consensus earned? society 5x3")
    expect(curves).to_have_count(1)
    legend = curves.locator(".legend")
    for source in ("round-one vote share", "final vote share", "perfect calibration"):
        expect(legend).to_contain_text(source)
    expect(legend).to_contain_text("ECE")
    expect(legend).to_contain_text("n=24")
    expect(main).to_contain_text("simulated")
    curves.scroll_into_view_if_needed()
    settle(page)
    curves.screenshot(path=str(shots / "34-consensus-curves.png"))

    plan = ex.plan({"name": "consensus", "questions": [
        {"question": f"What is {q} * 3?", "expected": str(3 * q)} for q in range(12)],
        "concurrency": 4, "configs": [
            {"protocol": "society", "label": "society", "model": "simulated?conformity=0.5",
             "options": {"rounds": 3}},
            {"protocol": "council", "label": "council", "model": "simulated"}]}, store)
    experiment = ex.create(store, plan)
    ex.run_experiment(store, experiment)
    goto(page, base, f"/experiments?experiment={experiment}")
    open_tab(page, "Consensus earned?")
    main.get_by_role("heading", name="Consensus earned?").wait_for()
    expect(main.locator("[data-testid='stDataFrame']").first).to_be_visible()
    expect(figures.filter(has_text="Consensus earned? society")).to_have_count(1)
    expect(main).to_contain_text("one round only, so no agreement inflation")  # the council
    settle(page)
    main.screenshot(path=str(shots / "35-consensus-experiment.png"))
    assert page.dialogs == [], page.dialogs
    expect(page.locator("[data-testid='stException']")).to_have_count(0)
    print(f"consensus screenshots in {shots}: 33-dynamics-strip, 34-consensus-curves, "
          "35-consensus-experiment")
