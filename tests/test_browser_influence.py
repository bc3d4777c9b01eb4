"""In a real browser (issue 29): Insights' "Who moved whom" matrix over stored society runs of
named personas (a click on a cell lists the runs behind it, each opening its detail), the
"What if" chart of stop rules replayed on them, and a run forked at round 2 from its detail,
which opens Compare with the original. Saves the screenshots 36-influence-matrix,
37-what-if and 38-fork-compare to $PARLEY_SCREENSHOTS (or a temporary folder).
"""
from __future__ import annotations

# A server of this module's own over a fresh SQLite file: what Insights shows is only these runs
from plugins.browser import expect, goto, ready, rerun, settle

from engine import Store
from engine.protocols import arun_config, run_sync
from engine.reports import influence
from engine.store import RunFilters

PERSONAS = {"Skeptic": "You doubt every claim until it is shown.",
            "Follower": "You go along with what most others say.",
            "Expert": "You are a careful mathematician."}
MODEL = "simulated?skill=0.55&conformity=0.6"


def fill(db_url: str) -> list[str]:
    """Society runs (3 rounds) of three named personas on arithmetic, scored."""
    store = Store(db_url)
    for name, prompt in PERSONAS.items():
        store.put_library("persona", name, {"prompt": prompt})
    ids = []
    for n in range(16):
        config = {"protocol": "society", "model": MODEL, "label": "three personas",
                  "options": {"rounds": 3}, "seats": {"agents": [
                      {"name": name.lower(), "persona": prompt}
                      for name, prompt in PERSONAS.items()]}}
        ids.append(str(run_sync(arun_config(config, f"What is {n + 3} * {n + 4}?", store=store,
                                            expected=str((n + 3) * (n + 4)))).run_id))
    return ids


def choose(page, key: str, name: str) -> None:  # noqa: F811
    button = page.locator(f".st-key-{key} button", has_text=name)
    button.wait_for()
    rerun(page, button.click)


def _pick_agent(tab, name: str) -> None:
    """Choose `name` in the fork's "Drop an agent" list: the list is opened once Streamlit
    is idle and its opener ready (opened mid-redraw, it was seen to close again before its
    options were drawn), then the option clicked."""
    opener = tab.locator(".st-key-fork_drop button[aria-label='Open']")
    ready(tab, opener)
    opener.click()
    option = tab.get_by_role("option", name=name, exact=True)
    option.wait_for(state="visible")
    rerun(tab, option.click)


def test_influence_what_if_and_fork(app, page, shots):  # noqa: F811
    base, db_url = app
    ids = fill(db_url)
    store = Store(db_url)
    cells = influence.block(influence.from_store(store, RunFilters(), "simulated"),
                            "simulated", "persona")
    assert not cells.empty and set(cells["mover"]) <= set(PERSONAS)
    busiest = cells.sort_values(["runs", "mover", "moved"], ascending=[False, True, True]
                                ).iloc[0]

    goto(page, base, "/insights")
    main = page.locator("[data-testid='stMain']")
    choose(page, "insights-view", "Who moved whom")
    main.get_by_role("heading", name="Who moved whom, persona × persona").wait_for()
    chart = main.locator("[data-testid='stVegaLiteChart']").first
    chart.wait_for()
    expect(chart.locator("svg text").filter(has_text="Skeptic").first).to_be_attached()
    expect(main).to_contain_text("flips / opportunities")
    marks = chart.locator("[aria-label]")
    marks.first.wait_for()
    labels = marks.evaluate_all("es => es.map(e => e.getAttribute('aria-label'))")
    cell = chart.locator(f"path[aria-label*=\"mover (persona): {busiest['mover']};\"]"
                         f"[aria-label*=\"moved (persona): {busiest['moved']};\"]").first
    assert cell.count() == 1, labels[:12]
    box = cell.bounding_box()
    rerun(page, lambda: page.mouse.click(box["x"] + box["width"] / 2,
                                         box["y"] + box["height"] / 2))
    expect(main).to_contain_text(f"{busiest['runs']} run(s) behind {busiest['mover']} → "
                                 f"{busiest['moved']}")
    links = main.locator("[data-testid='stPageLink'] a")
    expect(links).to_have_count(min(int(busiest["runs"]), 20))
    chart.scroll_into_view_if_needed()
    settle(page)
    main.screenshot(path=str(shots / "36-influence-matrix.png"))
    target = links.first.get_attribute("href") or ""
    assert "run=" in target and target.split("run=")[1][:12] in ids

    choose(page, "insights-view", "What if")
    figure = main.locator("[data-testid='stVegaLiteChart']").first
    figure.wait_for()
    expect(figure.locator("svg text").filter(has_text="uncaught").first).to_be_attached()
    expect(figure.locator("svg text").filter(has_text="≥ 0.50").first).to_be_attached()
    expect(main).to_contain_text("stop when the leader cannot be caught")
    expect(main).to_contain_text("n=16")
    figure.scroll_into_view_if_needed()
    settle(page)
    main.screenshot(path=str(shots / "37-what-if.png"))

    goto(page, base, f"/runs?run={ids[0]}")
    # open the expander once the page has settled, read from <details open> (a click mid-rerun
    # can land on a form being redrawn)
    expander = page.locator("[data-testid='stExpander']").filter(has_text="Fork at round")
    expander.first.wait_for()
    settle(page)
    if expander.first.locator("details").first.get_attribute("open") is None:
        expander.first.locator("summary").first.click()
    # the selectbox's own Open button (a click on its container can land on the label, or
    # mid-rerun, and leave the list closed)
    _pick_agent(page, "follower")
    rerun(page, lambda: page.locator(".st-key-fork_go button").click())
    page.wait_for_url("**/compare?compare=*")
    main.get_by_text("Question").first.wait_for()
    forks = store.runs(tag=f"forked-from:{ids[0]}")
    assert len(forks) == 1
    new_id = forks.iloc[0]["id"]
    assert f"compare={ids[0]},{new_id}" in page.url.replace("%2C", ",")
    settle(page)
    main.screenshot(path=str(shots / "38-fork-compare.png"))
    assert {t["seat"] for t in store.get(new_id)["turns"]} == {"skeptic", "expert"}
    assert page.dialogs == [], page.dialogs
    expect(page.locator("[data-testid='stException']")).to_have_count(0)
    print(f"screenshots in {shots}: 36-influence-matrix, 37-what-if, 38-fork-compare")
