"""One static HTML file for a colleague without Parley: a run, a comparison or an experiment's
results, charts included.

The file carries plotly.js inline (no server, no network: it opens from disk), and every value
that came from a user or a model is HTML-escaped text: a run label such as `<script>` shows as
those characters. The figures are the ones the pages draw, so the file says what the page said.
"""
from __future__ import annotations

import html
import math
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import pandas as pd

from engine.reports import controls
from engine.reports.experiments import counted
from engine.reports.references import findings, findings_note
from engine.reports.runs import USAGE_WORDS
from engine.text import words
from engine.views.ballots import flow_links

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2rem auto;
       max-width: 70rem; padding: 0 1rem; color: #1f2430; }
h1 { font-size: 1.6rem; } h2 { font-size: 1.25rem; margin-top: 2rem; } h3 { font-size: 1.05rem; }
table { border-collapse: collapse; margin: 0.5rem 0 1rem; font-size: 0.9rem; }
th, td { border: 1px solid #d6d9e0; padding: 0.25rem 0.5rem; text-align: left;
         vertical-align: top; }
th { background: #f3f4f7; }
pre { white-space: pre-wrap; background: #f7f7f9; padding: 0.6rem; border-radius: 4px; }
.caption { color: #5b6170; font-size: 0.9rem; }
.warning { background: #fff4e0; border-left: 4px solid #e8a33d; padding: 0.4rem 0.6rem; }
.simulated { background: #eef3ff; border-left: 4px solid #3558c9; padding: 0.4rem 0.6rem; }
.metrics { display: flex; flex-wrap: wrap; gap: 1.5rem; margin: 0.5rem 0 1rem; }
.metric .label { color: #5b6170; font-size: 0.85rem; } .metric .value { font-size: 1.2rem; }
.turn { border: 1px solid #e3e5ea; border-radius: 6px; padding: 0.5rem 0.7rem; margin: 0.5rem 0; }
.turn .who { color: #5b6170; font-size: 0.85rem; }
"""


def text(value: Any) -> str:
    """A value as HTML text: `<`, `>`, `&` and quotes escaped."""
    return html.escape("" if value is None else str(value), quote=True)


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return "" if math.isnan(value) else f"{value:.3g}"
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value)
    return "" if value is None else str(value)


def money(value: Any) -> str:
    """US dollars as text; "unknown" for a cost that is not known (a model with no price)."""
    return "unknown" if value is None or value != value else f"${float(value):,.4f}"


def table(rows: pd.DataFrame | Sequence[Mapping[str, Any]], columns: Sequence[str] = ()) -> str:
    """A table of plain-text cells (NaN shows empty, floats to three figures) under headers
    in words (`mind_change_rate` reads "mind-change rate")."""
    frame = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows))
    if frame.empty:
        return '<p class="caption">(none)</p>'
    keep = [c for c in columns if c in frame.columns] or list(frame.columns)
    head = "".join(f"<th>{text(words(c))}</th>" for c in keep)
    body = "".join("<tr>" + "".join(f"<td>{text(_cell(row[c]))}</td>" for c in keep) + "</tr>"
                   for row in frame[keep].to_dict("records"))
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def figure(fig: Any) -> str:
    """A plotly figure as a div (plotly.js comes once, in the page's head)."""
    import plotly.io as pio
    return str(pio.to_html(fig, full_html=False, include_plotlyjs=False,
                           config={"displaylogo": False, "responsive": True}))


def metrics(items: Iterable[tuple[str, Any]]) -> str:
    cells = "".join(f'<div class="metric"><div class="label">{text(label)}</div>'
                    f'<div class="value">{text(value)}</div></div>' for label, value in items)
    return f'<div class="metrics">{cells}</div>'


def blocks(items: Iterable[Any]) -> str:
    """A protocol's view blocks (`engine.views.blocks.Block`) as the Run page shows them,
    but for its tallies and stance flows, which `RunDetail` holds apart."""
    out = []
    for block in items:
        if block.title and block.kind != "metrics":
            out.append(f"<h3>{text(block.title)}</h3>")
        if block.kind == "metrics":
            out.append(metrics(block.items))
        elif block.kind == "text":
            out.append(f"<pre>{text(block.body or '—')}</pre>")
        elif block.kind == "table":
            out.append(table(block.rows))
        elif block.kind == "warning":
            out.append(f'<p class="warning">{text(block.body)}</p>')
        else:
            out.append(f'<p class="caption">{text(block.body)}</p>')
    return "\n".join(out)


def page(title: str, parts: Iterable[str]) -> str:
    """A whole HTML document: `title` (escaped here), the parts (already HTML), plotly.js
    inline, and when and by what it was made."""
    from plotly.offline import get_plotlyjs
    made = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{text(title)}</title><style>{STYLE}</style>"
            f"<script>{get_plotlyjs()}</script></head><body>\n"
            f"<h1>{text(title)}</h1>\n" + "\n".join(parts) +
            f'\n<p class="caption">Exported from Parley on {made}: a static copy (charts '
            "included, no server needed).</p>\n</body></html>\n")


def _simulated(simulation: str) -> str:
    if not simulation:
        return ""
    who = "every seat" if simulation == "all" else simulation.removeprefix("mixed: ")
    return (f'<p class="simulated">Simulated: {text(who)} played by Parley\'s offline '
            "simulated model, not a real language model.</p>")


def run_html(detail: Any) -> str:
    """One run (`engine.reports.runs.RunDetail`): question, facts, outcome, result blocks,
    tallies and flows, the whole transcript, per-seat usage and the stored configuration."""
    import json

    from engine.reports import charts
    run = detail.run
    parts = [_simulated(detail.simulation), f"<pre>{text(run.get('question'))}</pre>"]
    meta = [f"label: {run['label']}" if run.get("label") else "no label",
            f"status: {run.get('status')}", f"models: {run.get('models') or ''}",
            f"created {str(run.get('created_at', ''))[:19].replace('T', ' ')} UTC"]
    parts.append(f'<p class="caption">{text(" · ".join(meta))}</p>')
    if detail.outcome:
        parts.append(f"<p><strong>Outcome:</strong> {text(detail.outcome)}</p>")
    if run.get("status") == "failed":
        parts.append(f'<p class="warning">Failed: {text(run.get("error") or "unknown")}</p>')
    elif run.get("degraded_run"):
        parts.append(f'<p class="warning">Completed, but degraded: it lost '
                     f'{text(run.get("lost") or "a decisive call")}.</p>')
    parts.append(metrics(detail.facts))
    parts += [f'<p class="warning">{text(p)}</p>' for p in detail.problems]
    parts += ["<h2>Result</h2>", blocks(detail.blocks)]
    for title, counts, winner in detail.tallies:
        parts.append(figure(charts.tally_bar(counts, winner, title)))
    if detail.flows is not None:
        parts += ["<h3>Mind changes</h3>", figure(charts.sankey(flow_links(
            detail.flows)))]
    parts.append("<h2>Transcript</h2>")
    for entry in detail.transcript:
        parts.append(turn(entry))
    if not detail.usage.empty:
        parts += ["<h2>Usage per seat</h2>",
                  table(detail.usage.rename(columns=USAGE_WORDS))]
    parts += ["<h2>Configuration</h2>", '<p class="caption">As stored (never any keys).</p>',
              f"<pre>{text(json.dumps(run.get('config') or {}, indent=2))}</pre>"]
    return page(f"{detail.title} · run {run['id']}", parts)


def turn(entry: Mapping[str, Any]) -> str:
    """One transcript entry (`RunDetail.transcript`) as a bordered box of text."""
    where = [str(entry.get(k)) for k in ("seat", "phase") if entry.get(k)]
    if entry.get("round"):
        where.append(f"round {entry['round']}")
    if entry.get("model"):
        where.append(str(entry["model"]))
    if entry.get("status") not in (None, "ok"):
        where.append(str(entry.get("status")))
    where += [str(entry[k]) for k in ("tokens", "cost") if entry.get(k)]
    body = f"<pre>{text(entry['reply'])}</pre>" if entry.get("reply") else ""
    error = (f'<p class="warning">error: {text(entry["error"])}</p>' if entry.get("error")
             else "")
    return f'<div class="turn"><div class="who">{text(" · ".join(where))}</div>{body}{error}</div>'


EXPERIMENT_COLUMNS = ["configuration", "protocol", "simulated", "runs", "planned", "failed",
                      "degraded", "accuracy [95% CI] n", "unanswered", "high", "medium", "low",
                      "consensus_ece", "judge_ece", "mind_change_rate", "calls_per_run",
                      "tokens_per_run", "cost_per_run", "seconds_per_run"]


def experiment_html(report: Any, figures: Sequence[tuple[str, Any]] = (),
                    preferences: pd.DataFrame | None = None,
                    judged: pd.DataFrame | None = None) -> str:
    """An experiment's results (`engine.reports.experiments.Report`): what it compared, its
    progress, the summary with intervals, accuracy and calibration figures, with people's
    `preferences` (`store.preferences()`) the accuracy against the human majority on the
    questions with no expected answer, any further `figures` as (heading, plotly figure),
    the placebo arms, with `judged` (the experiment's answers-only re-judge runs, `Store.runs`
    with their tag) the judge without the transcript, and the question matrix."""
    from engine.reports.experiments import accuracy_figure
    from engine.reports.reliability import reliability_figure
    experiment, spec = report.experiment, report.experiment["spec"]
    done = report.progress
    parts = [f'<p class="caption">{text(spec.get("source", ""))} · '
             f'{len(spec["questions"])} questions × {len(spec["configs"])} configurations × '
             f'{spec["repeats"]} repeats · question set version '
             f'{text(experiment.get("set_version") or "unknown")} · '
             f'status {text(experiment.get("status", ""))} · '
             f'{done.done}/{done.total} cells done</p>',
             f'<p class="caption">Runs shown: {text(report.kind)}'
             + (f" ({report.hidden} runs of the other kind left out)" if report.hidden else "")
             + "</p>"]
    if report.kind != "real":
        parts.append(_simulated("all" if report.kind == "simulated" else "some runs"))
    summary = report.summary.assign(cost_per_run=[money(v) for v in
                                                  report.summary["cost_per_run"]])
    parts += ["<h2>Summary</h2>", table(summary, EXPERIMENT_COLUMNS)]
    if not report.summary.empty and (report.summary["scored"] > 0).any():
        from engine.reports.references import published, published_note
        theirs = published(spec)
        parts.append(figure(accuracy_figure(report.summary, "Accuracy per configuration",
                                            theirs)))
        if theirs:
            parts.append(f'<p class="caption">Diamonds: {text(published_note(theirs))}</p>')
    if report.calibrations:
        parts += ["<h2>Calibration</h2>", figure(reliability_figure(report.calibrations))]
    if preferences is not None:
        parts += _majority(report, preferences)
    parts += _rounds(report)
    parts += _placebo(report)
    parts += _answers_only(report, judged)
    for heading, fig in figures:
        parts += [f"<h2>{text(heading)}</h2>", figure(fig)]
    parts += ["<h2>Questions</h2>", table(report.questions)]
    return page(f"Experiment: {experiment.get('name', '')}", parts)


def _placebo(report: Any) -> list[str]:
    """Each configuration against its placebo arm as the Experiments page shows it, over
    the report's kind of run (nothing when the experiment has no placebo arm)."""
    pairs = controls.placebo_pairs(report.experiment["spec"])
    if not pairs or report.runs.empty or report.kind not in ("real", "simulated"):
        return []
    found = controls.placebo_from(counted(report.runs, simulated=report.kind == "simulated"),
                                  report.kind, pairs)
    if not found:
        return []
    return ["<h2>Placebo: peers talking about another question</h2>",
            '<p class="caption">Every message an agent read from another agent was that '
            "agent's message of the same round on a different question of the set (arXiv "
            "2605.00914's noise control). Configuration minus placebo in points, 95% "
            "bootstrap interval paired over questions; tokens per run of both.</p>",
            table(controls.placebo_rows(found))] + [
        f'<p class="caption">{text(note)}</p>' for note in [findings_note(findings(
            report.experiment["spec"]))] if note]


def _answers_only(report: Any, judged: pd.DataFrame | None) -> list[str]:
    """The judge from the transcript and from the final answers alone, as the Experiments
    page shows it (nothing before `python -m engine rejudge EXPERIMENT --answers-only`)."""
    if judged is None or judged.empty or report.runs.empty or \
            report.kind not in ("real", "simulated"):
        return []
    found = controls.answers_only_from(counted(report.runs, simulated=report.kind == "simulated"),
                                       judged, report.kind, report.experiment["spec"])
    if not found:
        return []
    return ["<h2>The judge without the transcript</h2>",
            '<p class="caption">Each judged run judged again by the same model from the '
            "question and the agents' final answers alone, beside the judge that read the "
            "transcript (paired over the same runs) and the consultancy baseline. "
            f"{text(controls.PAPER_ANSWERS_ONLY)}.</p>",
            table(controls.answers_only_rows(found))]


def _majority(report: Any, preferences: pd.DataFrame) -> list[str]:
    """The accuracy against the human majority as the Experiments page shows it (nothing when
    every question has an expected answer)."""
    from engine.reports import human
    section = human.majority_section(report.runs, preferences,
                                     report.experiment["spec"]["questions"], report.labels)
    if section is None:
        return []
    parts = [f"<h2>{text(human.HEADING)}</h2>",
             f'<p class="caption">{text(human.SCOPE[:1].upper() + human.SCOPE[1:])}.</p>',
             f'<p class="caption">{text(section.note)}</p>']
    if not section.table.empty:
        parts.append(table(section.table, human.SHOWN))
    return parts


def _rounds(report: Any) -> list[str]:
    """Accuracy by round with the published points, and conformity between rounds, as the
    Experiments page shows them (nothing when every configuration answers in one round and
    the set has no published figures)."""
    from engine.reports import rounds
    from engine.reports.references import references
    configs = report.experiment["spec"]["configs"]
    points = rounds.accuracy_by_round(report.runs, configs)
    published = references(report.experiment["spec"].get("source"))
    parts: list[str] = []
    if not points.empty and ((points["round"] > 1).any() or published):
        parts += ["<h2>Accuracy by round</h2>",
                  figure(rounds.accuracy_by_round_figure(points, published, "Accuracy by round")),
                  table(rounds.round_table(points))]
        if published:
            parts.append(f'<p class="caption">Markers: {text(published[0].citation)}, measured '
                         f"with {text(published[0].model)}.</p>")
    conforming = rounds.conformity_by_config(report.runs, configs)
    if not conforming.empty:
        parts += ["<h3>Conformity between rounds</h3>", table(conforming)]
    return parts


def comparison_html(runs: Sequence[Mapping[str, Any]]) -> str:
    """Runs side by side (`engine.reports.compare`): the question, the answers with their
    differences, each seat's stances, the text diff of how each run ended, the configuration
    keys that differ and the transcripts aligned by phase and round."""
    from engine.reports import compare
    heading = compare.headline(runs)
    simulated = [f"{run} ({how})" for run, how in zip(heading["run"], heading["simulated"],
                                                     strict=True) if how]
    parts = [_simulated("; ".join(simulated)) if simulated else ""]
    if compare.same_question(runs):
        parts.append(f"<pre>{text(runs[0].get('question'))}</pre>")
    parts += [table(heading), "<h2>Answers</h2>", table(compare.answers(runs))]
    stances = compare.seat_stances(runs)
    if not stances.empty:
        parts += ["<h3>Each seat's stances</h3>", table(stances)]
    for title, diff in compare.closing_diffs(runs):
        parts += [f"<h3>How the runs ended: {text(title)}</h3>",
                  f"<pre>{text(diff or 'Identical.')}</pre>"]
    config = compare.config_diff(runs)
    parts += ["<h2>Configuration keys that differ</h2>", table(config[config["differs"]])]
    transcript = compare.aligned_transcript(runs)
    parts.append("<h2>Transcripts, aligned by phase and round</h2>")
    if not transcript.empty:
        names = compare.column_names(runs)
        parts.append(table(transcript, ["phase", "round", *names, "changes"]))
    return page("Compare runs: " + ", ".join(str(r["id"]) for r in runs), parts)
