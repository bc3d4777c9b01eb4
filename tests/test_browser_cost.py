"""In a real browser (issue 28): an experiment priced by an OpenAI-compatible server on loopback
(usage reported, `PARLEY_PRICES` set; the server's model knows the answers, as a capable
model would) draws accuracy against cost and against tokens with the Pareto front (the
dominated configurations grey); a simulated one whose judge prefers the side presented first
(`position_bias`), its seats shuffled and its debates run both ways, draws the position
effects. Saves the screenshots 30-pareto-cost, 31-pareto-tokens and 32-position-effects to
$PARLEY_SCREENSHOTS (or a temporary folder).
"""
from __future__ import annotations

import json

from openai_stub import SimulatedOpenAI, loopback_only

# A server of this module's own: its real, priced runs would change what the shared server's
# other tests see (Insights opens on real runs when there are some).
from plugins.browser import expect, goto, open_tab, settle

from engine import Store
from engine import experiments as ex
from engine.questions import question_set

PRICES = {"openai:priced-model": {"input": 2.5, "output": 10.0},
          "openai:cheap-model": {"input": 0.15, "output": 0.6}}


def _configs(base_url: str) -> list[dict]:
    def seat(model: str) -> dict:
        return {"model": model, "base_url": base_url}
    return [{"protocol": "debate", "label": "debate (priced)", **seat("openai:priced-model"),
             "options": {"max_rounds": 1}},
            {"protocol": "vote", "label": "vote (cheap)", **seat("openai:cheap-model")},
            {"protocol": "panel", "label": "panel (priced)", **seat("openai:priced-model")},
            {"protocol": "vote", "label": "vote (priced)", **seat("openai:priced-model")}]


def test_pareto_and_position_charts(app, page, shots, monkeypatch):  # noqa: F811
    base, db_url = app
    loopback_only(monkeypatch, "OPENAI_API_KEY", "OPENAI_BASE_URL")
    monkeypatch.setenv("PARLEY_PRICES", json.dumps(PRICES))
    store = Store(db_url)
    questions = [q.as_dict() for q in question_set("arithmetic")[:8]]
    with SimulatedOpenAI(answers={q["question"]: q["expected"] for q in questions}) as server:
        plan = ex.plan({"name": "priced", "questions": questions,
                        "configs": _configs(server.base_url), "concurrency": 8}, store)
        priced = ex.create(store, plan)
        ex.run_experiment(store, priced)
    assert ex.progress(store, priced).status == "completed"
    model = "simulated?position_bias=0.4"
    plan = ex.plan({"name": "positions", "questions": questions, "order": "shuffled",
                    "sides": "both", "seed": 3, "repeats": 2, "concurrency": 8, "configs": [
                        {"protocol": "debate", "label": "debate", "model": model,
                         "options": {"max_rounds": 1}},
                        {"protocol": "panel", "label": "panel", "model": model}]}, store)
    positions = ex.create(store, plan)
    ex.run_experiment(store, positions)

    goto(page, base, f"/experiments?experiment={priced}")
    open_tab(page, "Cost and accuracy")
    main = page.locator("[data-testid='stMain']")
    main.get_by_role("heading", name="Accuracy against cost").wait_for()
    charts = main.locator("[data-testid='stVegaLiteChart']")
    expect(charts).to_have_count(2)
    for number, (chart, name) in enumerate(zip((charts.nth(0), charts.nth(1)),
                                               ("cost", "tokens"), strict=True)):
        expect(chart).to_contain_text(f"Accuracy against {name} per run")
        expect(chart.locator("svg text").filter(has_text="vote (cheap)").first).to_be_attached()
        chart.scroll_into_view_if_needed()
        settle(page)
        chart.screenshot(path=str(shots / f"3{number}-pareto-{name}.png"))
    expect(main).to_contain_text("Grey: dominated")
    legend = charts.nth(0).locator("svg text")
    expect(legend.filter(has_text="on the front").first).to_be_attached()

    goto(page, base, f"/experiments?experiment={positions}")
    open_tab(page, "Positions")
    main.get_by_role("heading", name="Outcome by position").wait_for()
    figure = main.locator("[data-testid='stPlotlyChart'] .js-plotly-plot").first
    figure.wait_for()
    expect(main.get_by_role("heading", name="Judge position consistency")).to_be_visible()
    expect(main).not_to_contain_text("no swapped pairs yet")
    figure.scroll_into_view_if_needed()
    settle(page)
    main.screenshot(path=str(shots / "32-position-effects.png"))
    assert page.dialogs == [], page.dialogs
    expect(page.locator("[data-testid='stException']")).to_have_count(0)
    print(f"cost and position screenshots in {shots}: 30-pareto-cost, 31-pareto-tokens, "
          "32-position-effects")
