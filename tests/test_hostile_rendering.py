"""Issue 10, "Rendering": every stored string is shown as text. Run ids, labels, persona and
seat names, questions and stances that carry markdown, HTML or Streamlit directives reach the
pages escaped, plotly figures hold them HTML-escaped, CSV cells never start a formula, and
the CLI prints no terminal escape sequence."""
from __future__ import annotations

from apptest_helpers import plain
from plugins.hostile import (
    APP,
    GENEROUS,
    IMAGE,
    LABEL,
    LINK,
    PERSONA,
    RUN_ID,
    SEATS,
    TAG,
    assert_chart_text,
    assert_inert,
    assert_vega_text,
    figure_texts,
    open_page,
)
from streamlit.testing.v1 import AppTest

from engine import Seat, Store, run_debate, run_vote
from engine import experiments as ex
from engine.cli.main import main as cli_main
from engine.reports import charts
from engine.reports.insights import section_titles
from engine.services import library
from engine.text import csv_cell


# ------------------------------------------------------------------ each page
def test_runs_page_shows_a_hostile_run_id_label_and_seats_as_text(hostile):
    at = open_page("runs")
    assert_inert(at)
    at = open_page("runs", run=RUN_ID)
    shown = assert_inert(at)
    assert RUN_ID in plain(at.title[0].value)  # the finding: it was an <img> in the title
    assert LABEL in shown and all(seat in shown for seat in SEATS)
    assert_vega_text(c.proto.spec for c in at.get("vega_lite_chart"))  # the tally's stances
    for name in ("Transcript", "Timeline & usage", "Configuration"):  # one tab drawn at a time
        at.session_state["runs_tab"] = name
        at.run()
        assert all(seat in assert_inert(at) for seat in SEATS), name
    next(b for b in at.button if b.key == "runs_delete_ask").click().run()
    assert RUN_ID in assert_inert(at)  # the confirmation names the run


def test_run_page_shows_a_hostile_run_and_configuration_as_text(hostile):
    at = open_page("run", run=RUN_ID)
    shown = assert_inert(at)
    assert RUN_ID in shown and LABEL in shown and all(seat in shown for seat in SEATS)
    at = open_page("run", config=IMAGE)  # a saved configuration that does not exist
    assert IMAGE in assert_inert(at)
    at = open_page("run", config=LABEL)  # one that does, loaded into the form
    assert_inert(at)
    assert at.text_input(key="run-1-label").value == LABEL


def test_personas_page_shows_hostile_names_as_text(hostile):
    at = open_page("personas")
    shown = assert_inert(at)
    assert PERSONA in shown and LABEL in shown
    persona = library.find(hostile["store"], "persona", PERSONA)
    at.button(key=f"delete-persona-{persona['id']}").click().run()
    assert f"Delete the persona **{PERSONA}**?" in assert_inert(at)  # names it, as text


def test_insights_page_charts_hold_escaped_labels(hostile):
    at = open_page("insights")
    at.pills(key="insights-sections").set_value(list(section_titles())).run()  # every one
    assert_inert(at)
    # the labels are in the Vega-Lite bars and boxes; the plotly Sankeys name stances
    assert_chart_text((c.proto.spec for c in at.get("plotly_chart")), shown=False)
    assert_vega_text(c.proto.spec for c in at.get("vega_lite_chart"))


def test_experiments_page_shows_hostile_configuration_labels_as_text(hostile):
    store = hostile["store"]
    plan = ex.plan({"questions": [{"question": "2+2?", "expected": "4"},
                                  {"question": "3+3?", "expected": "6"}],
                    "configs": [{"protocol": "vote", "label": LABEL},
                                {"protocol": "vote", "label": IMAGE}], "name": LINK}, store)
    experiment_id = ex.create(store, plan)
    ex.run_experiment(store, experiment_id)
    at = open_page("experiments", experiment=experiment_id)
    shown, specs = assert_inert(at), [c.proto.spec for c in at.get("plotly_chart")]
    assert_vega_text(c.proto.spec for c in at.get("vega_lite_chart"))  # the accuracy
    for name in ("Accuracy by round", "Calibration", "Paired comparison", "Questions",
                 "Cost and accuracy", "Runs behind a cell",
                 "Which protocol when?"):  # one tab at a time
        at.session_state["exp-tab"] = name
        at.run()
        shown += assert_inert(at)
        specs += [c.proto.spec for c in at.get("plotly_chart")]
    assert f"{LABEL} better" in shown and f"{IMAGE} better" in shown  # paired metrics
    assert_chart_text(specs)


def test_home_page_shows_a_hostile_database_path_as_text(tmp_path, monkeypatch):
    folder = tmp_path / "[link](http:x) $$x$$"
    folder.mkdir()
    monkeypatch.setenv("PARLEY_DB_URL", f"sqlite:///{folder / 'p.db'}")
    at = AppTest.from_file(APP, default_timeout=GENEROUS).run()
    shown = assert_inert(at)
    assert "%5Blink%5D%28http%3Ax%29 %24%24x%24%24/p.db" in shown  # SQLAlchemy's own quoting


# ------------------------------------------------------------------ charts, CSV, CLI
def test_plotly_labels_from_data_are_html_escaped():
    import pandas as pd
    label = f"{TAG} <b>bold</b>"
    figures = [
        charts.tally_bar({label: 2, "4": 1}, label, title=label),
        charts.sankey(pd.DataFrame({"source": [label], "target": [label], "value": [1],
                                    "label": [label]})),
        charts.seat_usage(pd.DataFrame({"seat": [label], "tokens_in": [1], "tokens_out": [1],
                                        "latency": [0.1], "calls": [1]})),
        ex.accuracy_figure(pd.DataFrame({"configuration": [label], "accuracy": [0.5],
                                         "accuracy_low": [0.2], "accuracy_high": [0.8],
                                         "correct": [1], "scored": [2]})),
        ex.reliability_figure([{"label": label, "signal": "consensus", "ece": 0.1,
                                "brier": 0.2, "n": 2,
                                "bins": [{"confidence": 0.5, "accuracy": 0.5, "count": 2,
                                          "low": 0.4, "high": 0.6}]}], title=label)]
    for figure in figures:
        texts = figure_texts(figure)
        assert not any("<img" in t or "<b>bold" in t for t in texts), texts
    assert_chart_text(figures)


def test_csv_exports_neutralise_formula_cells(hostile, db_url, tmp_path):
    assert csv_cell("=HYPERLINK(\"http://x\")") == "'=HYPERLINK(\"http://x\")"
    store = hostile["store"]
    formula = "=HYPERLINK(\"http://127.0.0.1:9/\",\"x\")"
    run_vote(formula, voters=[Seat("a"), Seat("b")], store=store, label="@SUM(A1)",
             tags=["+1"])
    out = tmp_path / "runs.csv"
    assert cli_main(["export", "--format", "csv", "--db", db_url, "--output", str(out)]) == 0
    import pandas as pd
    frame = pd.read_csv(out, keep_default_na=False)
    for column in frame.columns:
        for cell in frame[column].astype(str):
            assert not cell.startswith(("=", "+", "@")) or cell.startswith("'"), (column, cell)
    assert f"'{formula}" in set(frame["question"]) and "'@SUM(A1)" in set(frame["label"])
    # the Experiments page's and `experiment show --csv`'s runs and summary files
    plan = ex.plan({"questions": [formula], "configs": [{"protocol": "vote",
                                                         "label": "-2+3"}]}, store)
    experiment_id = ex.create(store, plan)
    ex.run_experiment(store, experiment_id)
    result = ex.report(store, experiment_id)
    for text in (ex.to_csv(result.runs), ex.to_csv(result.summary)):
        cells = [cell for line in text.splitlines()[1:] for cell in line.split(",")]
        assert "'-2+3" in cells and "-2+3" not in cells


def test_cli_prints_no_terminal_escape_sequences(store, db_url, recording_model, capsys,
                                                 monkeypatch):
    hostile = "\x1b[31mred\x1b[0m \x1b]0;owned\x07title \x9b2J"
    model = recording_model(fn=lambda convo: f"VERDICT: {hostile}\nCONFIDENCE: 0.5")
    result = run_debate("q", proponent=model, opponent=model, judge=model, max_rounds=1,
                        store=Store(db_url), label=hostile)
    for argv in (["show", result.run_id], ["runs"], ["show", result.run_id, "--json"]):
        assert cli_main([*argv, "--db", db_url]) == 0
        out = capsys.readouterr().out
        assert "\x1b" not in out and "\x07" not in out and "\x9b" not in out, argv
        assert "red" in out
    # `run`: the progress lines and the summary (the judge's verdict) too
    from engine.llm import runmodels
    monkeypatch.setattr(runmodels, "resolve_model", lambda spec, *rest: model)
    assert cli_main(["run", "debate", "q", "--rounds", "1", "--db", db_url]) == 0
    captured = capsys.readouterr()
    for stream in (captured.out, captured.err):
        assert "\x1b" not in stream and "\x07" not in stream and "\x9b" not in stream
    assert "verdict: red" in captured.out
