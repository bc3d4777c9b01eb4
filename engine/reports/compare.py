"""Compare runs side by side: the read model behind the Compare page (`?compare=ID,ID`).

Pure functions over stored runs (`Store.get` dicts): which runs a comparison names and which
of them could not be read, a flat diff of their stored configurations with the differing keys
marked, their transcripts aligned by (phase, round) with each seat's stance and mind changes
marked, their final answers and confidence beside each other, and a plain-text diff of their
closing statements. Every value is plain text or a number; nothing here draws or imports
streamlit.
"""
from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pandas as pd

from engine.analysis import extract_answer, normalize_stance
from engine.reports.runs import outcome_text, protocol_title, run_cost_text, status_text
from engine.views.blocks import simulated_text

if TYPE_CHECKING:
    from engine.store import Store

MAX_RUNS = 8  # runs one comparison shows; more would make columns too narrow to read
REPLY_CHARS = 600  # characters of a reply an aligned transcript cell keeps
STANCE_CHARS = 40  # an "answer" longer than this is prose, not a stance
ABSENT = "—"  # a configuration key or transcript step one run does not have


# --------------------------------------------------------------------------- which runs
def parse_ids(value: str | Iterable[str] | None) -> list[str]:
    """Run ids from `?compare=` ("A,B", or repeated values): stripped, in order, each once."""
    if value is None:
        return []
    parts = value.split(",") if isinstance(value, str) else [
        piece for item in value for piece in str(item).split(",")]
    return list(dict.fromkeys(p.strip() for p in parts if p.strip()))


@dataclass
class Comparison:
    """The runs a comparison names that could be read (in the order named), and the ones that
    could not, each with why. `partial` names readable runs with a part that could not be
    read (what could be read is compared)."""

    runs: list[dict[str, Any]] = field(default_factory=list)
    missing: list[tuple[str, str]] = field(default_factory=list)
    partial: list[tuple[str, str]] = field(default_factory=list)
    dropped: int = 0  # ids past MAX_RUNS


def load(store: Store, ids: Sequence[str]) -> Comparison:
    """Read the named runs from `store`; a missing run is reported, never raised."""
    out = Comparison(dropped=max(0, len(ids) - MAX_RUNS))
    for run_id in ids[:MAX_RUNS]:
        try:
            run = store.get(run_id)
        except KeyError:
            out.missing.append((run_id, "there is no such run in this database"))
            continue
        if run.get("unreadable"):
            out.partial.append((run_id, str(run["unreadable"])))
        out.runs.append(run)
    return out


def column_names(runs: Sequence[Mapping[str, Any]]) -> list[str]:
    """One column title per run: its position, protocol and id ("1 · Panel · ab12cd34ef56")."""
    return [f"{n} · {protocol_title(str(r.get('protocol', '')))} · {r.get('id', '')}"
            for n, r in enumerate(runs, start=1)]


def headline(runs: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per run: what it is (protocol, label, status, simulated, models, created) and
    the question it was asked, so differing questions are seen at once."""
    return pd.DataFrame([{
        "run": name, "question": str(r.get("question") or ""),
        "protocol": protocol_title(str(r.get("protocol", ""))),
        "label": str(r.get("label") or ""),
        "status": status_text(r.get("status", ""), r.get("degraded_run")),
        "simulated": simulated_text(r.get("simulated"), r.get("models"), r.get("config")),
        "models": str(r.get("models") or ""),
        "created": str(r.get("created_at") or "")[:19].replace("T", " ")}
        for name, r in zip(column_names(runs), runs, strict=True)],
        columns=["run", "question", "protocol", "label", "status", "simulated", "models",
                 "created"])


def same_question(runs: Sequence[Mapping[str, Any]]) -> bool:
    return len({str(r.get("question") or "").strip() for r in runs}) <= 1


# --------------------------------------------------------------------------- configuration
def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """A nested configuration as flat `a.b[0].c` keys to leaf values (an empty mapping or
    list is a leaf, so "no prompts" and "some prompts" still differ)."""
    if isinstance(value, Mapping) and value:
        parts = [(f"{prefix}.{key}" if prefix else str(key), inner) for key, inner in value.items()]
    elif isinstance(value, list) and value:
        parts = [(f"{prefix}[{number}]", inner) for number, inner in enumerate(value)]
    else:
        return {prefix or "(configuration)": value}
    out: dict[str, Any] = {}
    for name, inner in parts:  # a loop, not a comprehension: one stack frame per level
        out.update(flatten(inner, name))
    return out


def cell(value: Any) -> str:
    """A value as a table shows it: text as is, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False,
                                                           default=str)


def run_settings(run: Mapping[str, Any]) -> dict[str, Any]:
    """What a run was configured with, flat: its stored configuration, plus the run's own
    label and expected answer (which a re-run keeps beside the configuration)."""
    config = run.get("config")
    flat = flatten(config) if isinstance(config, Mapping) and config else {}
    flat["run.label"] = run.get("label")
    flat["run.expected"] = run.get("expected")
    return flat


def config_diff(runs: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """A flat diff of the runs' configurations: one row per key any run has (in first-seen
    order), one column per run (`column_names`), `differs` true exactly where the values are
    not all equal (a key one run lacks shows as "—" and differs)."""
    flats = [run_settings(r) for r in runs]
    keys = dict.fromkeys(k for flat in flats for k in flat)
    return _side_by_side("key", {key: [cell(flat[key]) if key in flat else ABSENT
                                       for flat in flats] for key in keys}, runs)


def _side_by_side(first: str, values: Mapping[str, list[str]],
                  runs: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per item of `values` (its name in the column `first`), one column per run
    (`column_names`), `differs` true exactly where the runs' values are not all equal."""
    names = column_names(runs)
    return pd.DataFrame([{first: item, "differs": len(set(row)) > 1,
                          **dict(zip(names, row, strict=True))} for item, row in values.items()],
                        columns=[first, "differs", *names])


# --------------------------------------------------------------------------- transcripts
def stance_of(turn: Mapping[str, Any]) -> str | None:
    """The stance a turn took, normalised: its parsed `stance`, else the answer in its parsed
    `answer` or in its reply; None for a failed call, a turn that states none (a critic's
    assessments) or prose too long to be a stance."""
    if turn.get("status") != "ok":
        return None
    parsed: Mapping[str, Any] = turn["parsed"] if isinstance(turn.get("parsed"),
                                                             Mapping) else {}
    if parsed.get("stance"):
        found: str | None = normalize_stance(str(parsed["stance"])) or None
    elif parsed.get("answer"):
        found = extract_answer(str(parsed["answer"]))
    elif parsed:  # parsed fields without an answer: this turn took no stance
        return None
    else:
        found = extract_answer(str(turn.get("reply") or ""))
    return found if found and len(found) <= STANCE_CHARS else None


def readable(reply: str) -> str:
    """A reply as lines a reader (and a line diff) can follow: a JSON object's fields as
    "name: value" lines, anything else (prose, broken JSON) exactly as it came."""
    try:
        fields = json.loads(reply) if reply.lstrip().startswith("{") else None
    except ValueError:
        fields = None
    if not isinstance(fields, dict) or not fields:
        return reply
    return "\n".join(f"{name}: {value if isinstance(value, str) else cell(value)}"
                     for name, value in fields.items())


def marked_turns(run: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A run's turns in speaking order, each with its stance and, when its seat held another
    stance before, `changed_from`."""
    held: dict[str, str] = {}
    out = []
    for turn in run.get("turns") or []:
        seat = str(turn.get("seat", ""))
        stance = stance_of(turn)
        before = held.get(seat)
        if stance is not None:
            held[seat] = stance
        out.append({"phase": str(turn.get("phase", "")), "round": int(turn.get("round") or 0),
                    "seat": seat, "stance": stance, "status": str(turn.get("status", "")),
                    "changed_from": before if stance is not None and before not in (
                        None, stance) else None,
                    "reply": readable(str(turn.get("reply") or "")),
                    "error": str(turn.get("error") or "")})
    return out


def turn_text(entry: Mapping[str, Any]) -> str:
    """One turn as a few lines of plain text: seat, stance, a mind change, then the reply."""
    head = entry["seat"]
    if entry["stance"] is not None:
        head += f" · stance {entry['stance']}"
    if entry["changed_from"] is not None:
        head += f" · CHANGED MIND ({entry['changed_from']} → {entry['stance']})"
    if entry["status"] != "ok":
        head += f" · degraded: {entry['error'] or 'no reason recorded'}"
    reply = entry["reply"]
    if len(reply) > REPLY_CHARS:
        reply = reply[:REPLY_CHARS - 1] + "…"
    return f"{head}\n{reply}" if reply else head


def aligned_transcript(runs: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """The runs' transcripts aligned: one row per (phase, round) any run has, ordered by round
    and then by first appearance; one column per run (`column_names`) holding that step's
    turns as text ("—" where the run has no such step); `changes` counts the mind changes
    on the row across runs."""
    names = column_names(runs)
    cells: dict[tuple[str, int], dict[str, list[str]]] = {}
    changes: dict[tuple[str, int], int] = {}
    order: dict[tuple[str, int], int] = {}
    for name, run in zip(names, runs, strict=True):
        for entry in marked_turns(run):
            key = (entry["phase"], entry["round"])
            order.setdefault(key, len(order))
            cells.setdefault(key, {}).setdefault(name, []).append(turn_text(entry))
            changes[key] = changes.get(key, 0) + (entry["changed_from"] is not None)
    keys = sorted(order, key=lambda k: (k[1], order[k]))
    rows = [{"phase": phase, "round": number, "changes": changes[(phase, number)],
             **{name: "\n\n".join(cells[(phase, number)].get(name, [])) or ABSENT
                for name in names}} for phase, number in keys]
    return pd.DataFrame(rows, columns=["phase", "round", "changes", *names])


def seat_stances(runs: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """Each seat's stances through each run, one row per seat (first-seen order), one column
    per run: "0.1 → 0.05 (1 change)", the one stance it held, or "—" (no such seat, or it
    stated none)."""
    names = column_names(runs)
    paths: dict[str, dict[str, list[str]]] = {}
    changed: dict[tuple[str, str], int] = {}
    for name, run in zip(names, runs, strict=True):
        for entry in marked_turns(run):
            path = paths.setdefault(entry["seat"], {}).setdefault(name, [])
            if entry["stance"] is not None and (not path or path[-1] != entry["stance"]):
                path.append(entry["stance"])
            changed[(entry["seat"], name)] = changed.get((entry["seat"], name), 0) + (
                entry["changed_from"] is not None)
    rows = []
    for seat, by_run in paths.items():
        if not any(by_run.values()):
            continue
        row = {"seat": seat}
        for name in names:
            path, count = by_run.get(name, []), changed.get((seat, name), 0)
            row[name] = " → ".join(path) + (f" ({count} change{'s' * (count != 1)})"
                                            if count else "") if path else ABSENT
        rows.append(row)
    return pd.DataFrame(rows, columns=["seat", *names])


# --------------------------------------------------------------------------- answers
def metrics_of(run: Mapping[str, Any]) -> Mapping[str, Any]:
    """A stored run's metrics ({} when it stored none)."""
    metrics = run.get("metrics")
    return metrics if isinstance(metrics, Mapping) else {}


def confidence_text(metrics: Mapping[str, Any]) -> str:
    """A run's confidence as stored: the judge's (0-1), else the consensus and its level."""
    judge = metrics.get("judge_confidence")
    if isinstance(judge, (int, float)):
        return f"judge {judge:.2f}"
    consensus, level = metrics.get("consensus"), metrics.get("level")
    if isinstance(consensus, (int, float)):
        return f"consensus {consensus:.0%}" + (f" ({level})" if level else "")
    return ""


def answers(runs: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """Final answers side by side: one row per measure (answer, expected, correct, confidence,
    mind changes, outcome, calls, tokens, seconds), one column per run, all as text;
    `differs` marks the rows whose values are not all equal."""
    measures: dict[str, list[str]] = {}
    for run in runs:
        metrics = metrics_of(run)
        correct = {True: "yes", False: "no"}.get(run["correct"]) if isinstance(
            run.get("correct"), bool) else "not judged"
        changes = metrics.get("mind_changes")
        for measure, value in (
                ("answer", metrics.get("answer")), ("expected", run.get("expected")),
                ("correct", correct),
                ("confidence", confidence_text(metrics)),
                ("mind changes", changes if isinstance(changes, int) else None),
                ("outcome", outcome_text(metrics)),
                ("status", status_text(run.get("status", ""), run.get("degraded_run"))),
                ("calls", int(run.get("calls") or 0)),
                ("tokens", int(run.get("tokens_in") or 0) + int(run.get("tokens_out") or 0)),
                ("cost", run_cost_text(run, run.get("turns") or [])),
                ("seconds", f"{float(run.get('duration') or 0):.2f}")):
            measures.setdefault(measure, []).append(ABSENT if value in (None, "") else
                                                    str(value))
    return _side_by_side("measure", measures, runs)


def closing_text(run: Mapping[str, Any]) -> str:
    """What a run ended on, as text to diff: its answer, confidence and outcome, then the
    replies of its last (phase, round) step, each under its seat."""
    metrics = metrics_of(run)
    lines = [f"answer: {metrics.get('answer') or ABSENT}",
             f"confidence: {confidence_text(metrics) or ABSENT}",
             f"outcome: {outcome_text(metrics) or ABSENT}"]
    turns = list(run.get("turns") or [])
    if turns:
        last = (turns[-1].get("phase"), turns[-1].get("round"))
        for turn in turns:
            if (turn.get("phase"), turn.get("round")) == last:
                lines.append(f"[{turn.get('seat', '')} · {turn.get('phase', '')}]")
                lines.extend(readable(str(turn.get("reply") or "(no reply)")).splitlines()
                             or [""])
    return "\n".join(lines)


def text_diff(before: str, after: str, before_name: str = "a", after_name: str = "b") -> str:
    """A unified diff of two texts, line by line, as plain text ("" when they are equal)."""
    return "\n".join(difflib.unified_diff(before.splitlines(), after.splitlines(),
                                          before_name, after_name, lineterm=""))


def closing_diffs(runs: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """(title, unified diff) of each run's closing text against the first run's."""
    if len(runs) < 2:
        return []
    names = column_names(runs)
    base = closing_text(runs[0])
    return [(f"{names[0]} → {name}", text_diff(base, closing_text(run), names[0], name))
            for name, run in zip(names[1:], runs[1:], strict=True)]
