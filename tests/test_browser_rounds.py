"""In a real browser: a small society experiment on Du et al.'s arithmetic problems (a society
of 3 agents x 2 rounds and one of 3 x 1, simulated), its accuracy-by-round chart with the
dashed round-1 majority lines and the paper's reference points. Saves the screenshot
10-accuracy-by-round to $PARLEY_SCREENSHOTS (or a temporary folder).
"""
from __future__ import annotations

import pytest
from plugins.browser import click_point, expect, goto, open_tab, settle

from engine import Store
from engine import experiments as ex
from engine.questions import question_set


@pytest.fixture
def app(shared_app):
    """The session's shared app server (this module's checks read only what it stored)."""
    return shared_app


CONFIGS = [{"protocol": "society", "label": "society-3x2", "model": "simulated",
            "options": {"rounds": 2}},
           {"protocol": "society", "label": "society-3x1", "model": "simulated",
            "options": {"rounds": 1}}]


def rounds_chart(page, base: str, experiment_id: str):  # noqa: F811
    """The experiment's page on its *Accuracy by round* tab; its chart, drawn."""
    goto(page, base, f"/experiments?experiment={experiment_id}")
    open_tab(page, "Accuracy by round")
    chart = page.locator("[data-testid='stMain'] [data-testid='stPlotlyChart'] "
                         ".js-plotly-plot").filter(has_text="round-1 majority vote")
    chart.wait_for()
    return chart


def test_accuracy_by_round_with_reference_points(app, page, shots):  # noqa: F811
    base, db_url = app
    store = Store(db_url)
    plan = ex.plan({"name": "society on arithmetic",
                    "questions": [q.as_dict() for q in question_set("arithmetic")[:5]],
                    "source": "bundled:arithmetic", "configs": CONFIGS}, store)
    experiment_id = ex.create(store, plan)
    ex.run_experiment(store, experiment_id)
    assert ex.progress(store, experiment_id).status == "completed"

    goto(page, base, f"/experiments?experiment={experiment_id}")
    open_tab(page, "Accuracy by round")
    main = page.locator("[data-testid='stMain']")
    chart = main.locator("[data-testid='stPlotlyChart'] .js-plotly-plot").filter(
        has_text="round-1 majority vote")
    chart.wait_for()
    legend = chart.locator(".legend")  # SVG: its text content, no inner text
    for label in ("society-3x2", "society-3x1", "Du et al. 2023: single agent 67.0%",
                  "Du et al. 2023: single agent with reflection 72.1%",
                  "Du et al. 2023: majority vote (3 agents) 69.0%",
                  "Du et al. 2023: multiagent debate (3 agents, 2 rounds) 81.8%"):
        expect(legend).to_contain_text(label)
    # lines, dashed, refs
    expect(chart.locator(".scatterlayer .trace")).to_have_count(2 + 2 + 4)
    dashed = chart.locator(".scatterlayer .js-line[style*='stroke-dasharray']")
    expect(dashed.nth(1)).to_be_attached()  # at least two
    expect(main).to_contain_text("gpt-3.5-turbo-0301", use_inner_text=True)
    chart.scroll_into_view_if_needed()
    settle(page)
    chart.screenshot(path=str(shots / "10-accuracy-by-round.png"))
    assert page.dialogs == [], page.dialogs
    expect(page.locator("[data-testid='stException']")).to_have_count(0)
    print(f"accuracy-by-round screenshot in {shots}: 10-accuracy-by-round")


def test_a_paper_preset_run_from_the_cli_shows_its_curve_beside_the_paper(app, page, shots):  # noqa: F811
    """Du et al.'s arithmetic preset, as docs/reproduce.md says to run it (here on its first 5
    problems, simulated), then its results page: every configuration's line, the round-1
    dashed lines and Table 1's points. Saves 18-preset-du2023-arithmetic.png."""
    import subprocess
    import sys
    from pathlib import Path
    base, db_url = app
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run([sys.executable, "-m", "engine", "experiment", "run",
                           "presets/du2023-arithmetic.yaml", "--limit", "5", "--db", db_url,
                           "--quiet"], cwd=root, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    listed = ex.list_experiments(Store(db_url))
    experiment_id = str(listed[listed["name"].str.contains("first 5")]["id"].iloc[0])
    chart = rounds_chart(page, base, experiment_id)
    legend = chart.locator(".legend")
    for label in ("single", "reflection", "vote-3", "society-3x2",
                  "Du et al. 2023: multiagent debate (3 agents, 2 rounds) 81.8%"):
        expect(legend).to_contain_text(label)
    chart.scroll_into_view_if_needed()
    settle(page)
    chart.screenshot(path=str(shots / "18-preset-du2023-arithmetic.png"))
    expect(page.locator("[data-testid='stException']")).to_have_count(0)


def test_a_clicked_point_of_accuracy_by_round_lists_its_configurations_runs(app, page, shots):  # noqa: F811
    """Every number drills down (issue 14, bullet 3), points too: a click on a point of a
    configuration's line opens *Runs behind a cell* on that configuration's runs."""
    base, db_url = app
    store = Store(db_url)
    plan = ex.plan({"name": "society points", "configs": CONFIGS,
                    "questions": [q.as_dict() for q in question_set("arithmetic")[:3]],
                    "source": "bundled:arithmetic"}, store)
    experiment_id = ex.create(store, plan)
    ex.run_experiment(store, experiment_id)
    chart = rounds_chart(page, base, experiment_id)
    chart.scroll_into_view_if_needed()
    settle(page)
    # the second configuration's line (society-3x1: one point, at round 1; the traces are
    # each configuration's line, then its dashed round-1 line)
    click_point(page, chart, chart.locator(".scatterlayer .trace").nth(2).locator(
        ".points path").first)
    expect(page.locator(".st-key-exp-drill-label input").first).to_have_value("society-3x1")
    expect(page.get_by_role("tab", name="Runs behind a cell")).to_have_attribute(
        "aria-selected", "true")
    expect(page.locator(".st-key-exp-drill-q input").first).to_have_value("all")
    expect(page.locator("[data-testid='stException']")).to_have_count(0)
    page.screenshot(path=str(shots / "21-round-point-to-runs.png"), full_page=True)
