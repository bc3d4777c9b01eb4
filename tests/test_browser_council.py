"""In a real browser (issue 30): a council run on the Run page, the llm-council-governance
preset's results with the published figures overlaid and labelled as theirs, and the
Leaderboard. Saves the screenshots 40-council-run, 41-governance-preset and 42-leaderboard to
$PARLEY_SCREENSHOTS (or a temporary folder)."""
from __future__ import annotations

from pathlib import Path

# A server of this module's own, on a fresh SQLite file: its runs would change what the
# shared server's other tests see.
from plugins.browser import commit, expect, field, goto, rerun, settle

from engine import Store
from engine import experiments as ex
from engine.protocols import REGISTRY, arun_config, run_sync
from engine.yamlfile import load_mapping

PRESET = Path(__file__).resolve().parent.parent / "presets" / "llm-council-governance.yaml"


def test_council_run_governance_preset_and_leaderboard(app, page, shots):  # noqa: F811
    base, db_url = app
    store = Store(db_url)
    main = page.locator("[data-testid='stMain']")

    # The council on the Run page, watched until its Borda count shows.
    goto(page, base, "/run")
    council = REGISTRY["council"]
    page.locator(".st-key-run-0-protocol button[aria-label='Open']").click()
    rerun(page, page.get_by_role("option", name=council.title, exact=True).click)
    commit(field(page, "run-0-question", "textarea"), "What is 17 multiplied by 24?")
    commit(field(page, "run-0-model"), "simulated")
    page.get_by_text("Preflight:").wait_for()
    page.locator(".st-key-run-start button").click()
    page.get_by_text("Completed in").wait_for()
    expect(main).to_contain_text("Borda count")
    expect(main).to_contain_text("Top-ranked member")
    expect(main).to_contain_text("made by the offline simulated model")
    run_id = page.evaluate("() => new URLSearchParams(location.search).get('run')")
    assert store.get(run_id)["protocol"] == "council"
    grids = main.locator("[data-testid='stDataFrame']")
    expect(grids).to_have_count(2)  # the Borda count and the rankings
    for n in range(2):  # a data grid draws its cells once it is in view
        grids.nth(n).scroll_into_view_if_needed()
        expect(grids.nth(n).locator("canvas").first).to_be_attached()
    expect(grids.nth(0)).to_contain_text("points")  # the grid's accessible table
    page.evaluate("() => window.scrollTo(0, 0)")
    settle(page)
    page.screenshot(path=str(shots / "40-council-run.png"), full_page=True)

    # The preset on its first 3 questions, on the simulated model.
    spec = load_mapping(str(PRESET))
    plan = ex.plan(spec, store)
    plan = ex.planning.Plan(**{**plan.__dict__, "questions": plan.questions[:3]})
    experiment = ex.create(store, plan)
    assert ex.run_experiment(store, experiment).status == "completed"
    goto(page, base, f"/experiments?experiment={experiment}")
    main.get_by_role("heading", name="Which configuration is better, and how sure?").wait_for()
    chart = main.locator("[data-testid='stVegaLiteChart']").first
    chart.wait_for()
    for label in ("deliberate -> vote 80.9%", "majority vote 76.8%",
                  "deliberate -> synthesize 75.4%", "rank -> synthesize 70.7%",
                  "self-consistency vote (9 samples) 68.9%"):
        expect(chart.locator("svg text").filter(
            has_text=f"published (theirs): {label}").first).to_be_attached()
    expect(main).to_contain_text("Diamonds: published figures, theirs, not Parley's runs")
    expect(main).to_contain_text("andybhall/llm-council-governance")
    for label in ("majority-vote", "deliberate-vote", "deliberate-synthesize",
                  "rank-synthesize", "best-single", "self-consistency"):
        expect(main).to_contain_text(label)
    chart.scroll_into_view_if_needed()
    settle(page)
    page.screenshot(path=str(shots / "41-governance-preset.png"), full_page=True)

    # Two simulated debates, sides swapped, for the leaderboard beside the councils.
    for swap in (False, True):
        run_sync(arun_config({"protocol": "debate", "options": {
            "max_rounds": 1, "swap_sides": swap}, "seats": {
            "proponent": [{"name": "pro", "model": "simulated?skill=0.95"}],
            "opponent": [{"name": "con", "model": "simulated?skill=0.2&seed=4"}],
            "judge": [{"name": "judge", "model": "simulated"}]}},
            "What is 15% of 80?", store=store, expected="12"))
    goto(page, base, "/leaderboard")
    main.get_by_role("heading", name="Leaderboard").wait_for()
    expect(main).to_contain_text("Bradley-Terry ratings")
    expect(main).to_contain_text("never pooled")  # the simulated board says it is apart
    grid = main.locator("[data-testid='stDataFrame']").first
    grid.wait_for()
    expect(main).to_contain_text("models rated from")
    settle(page)
    page.screenshot(path=str(shots / "42-leaderboard.png"), full_page=True)
    assert page.dialogs == [], page.dialogs
    expect(page.locator("[data-testid='stException']")).to_have_count(0)
    print(f"council screenshots in {shots}: 40-council-run, 41-governance-preset, "
          "42-leaderboard")
