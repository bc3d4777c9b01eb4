"""In a real browser (issue 44): the Experiments page's "Over time" chart of the experiments of
one name, a change of configuration ringed, and the gate's Markdown pull request comment as
GitHub-flavoured Markdown renders it. Saves the screenshots 41-over-time and 42-gate-comment to
$PARLEY_SCREENSHOTS (or a temporary folder)."""
from __future__ import annotations

import markdown
from plugins.browser import expect, goto, settle

import engine.experiments as ex
from engine import Store
from engine.questions.sets import question_set
from engine.reports.gate import gate
from engine.reports.gate import markdown as gate_markdown

QUESTIONS = [q.as_dict() for q in question_set("arithmetic")[:16]]


def spec(name: str, model: str, questions: list | None = None) -> dict:
    return {"name": name, "questions": questions or QUESTIONS, "configs": [
        {"protocol": "society", "label": "society", "model": model, "options": {"rounds": 2}},
        {"protocol": "vote", "label": "vote", "model": model}]}


def made(store: Store, body: dict) -> str:
    experiment_id = ex.create(store, body)
    ex.run_experiment(store, experiment_id)
    return experiment_id


def test_over_time_and_the_gate_comment(shared_app, page, shots):  # noqa: F811
    base, db_url = shared_app
    store = Store(db_url)
    name = "nightly over time"
    ids = [made(store, spec(name, model, questions)) for model, questions in (
        ("simulated?seed=1", None), ("simulated?seed=1", None),
        ("simulated?seed=1&conformity=1", None),  # its agents always join the majority
        ("simulated?seed=1&conformity=1", QUESTIONS[:15]))]  # one question fewer
    goto(page, base, f"/experiments?experiment={ids[-1]}")
    main = page.locator("[data-testid='stMain']")
    opener = main.get_by_text(f"Over time: every experiment named {name}")
    opener.scroll_into_view_if_needed()
    opener.click()
    settle(page)
    chart = main.locator(".st-key-exp-over-time-chart")
    chart.wait_for()
    expect(chart.locator("path[aria-roledescription='point'], "
                         "path[role='graphics-symbol']").first).to_be_visible()
    main.locator(".st-key-exp-over-time").scroll_into_view_if_needed()
    main.locator(".st-key-exp-over-time").screenshot(path=str(shots / "41-over-time.png"))

    result = gate(store, ids[2], ids[0])
    assert any("majority adoption" in line for line in result.regressions), result.regressions
    body = markdown.markdown(gate_markdown(result, base), extensions=["tables"])
    page.set_content(
        "<html><head><style>body{font:14px -apple-system,Segoe UI,Helvetica,Arial,sans-serif;"
        "max-width:860px;margin:24px;color:#1f2328}table{border-collapse:collapse}"
        "td,th{border:1px solid #d0d7de;padding:4px 10px}th{background:#f6f8fa}"
        "a{color:#0969da}</style></head><body>" + body + "</body></html>")
    page.locator("table").wait_for()
    page.screenshot(path=str(shots / "42-gate-comment.png"), full_page=True)
    print(f"screenshots in {shots}: 41-over-time, 42-gate-comment")
