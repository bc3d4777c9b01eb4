"""The Runs page's data: filters, the history table and one run taken apart for its detail.

Plain pandas on the store's DataFrames and `Store.get` dicts; every filter goes to
`Store.runs` as a bound parameter. Nothing here draws (that is `charts`) or imports streamlit.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import date
from typing import TYPE_CHECKING, Any

import pandas as pd

from engine.llm.sizes import REPLY_CAP
from engine.models import total_cost
from engine.protocols import REGISTRY
from engine.reports.run_dynamics import DynamicsStrip, dynamics_strip
from engine.store import STATUSES, RunFilters
from engine.store.facets import INTERNAL_TAGS
from engine.views.blocks import Block, cost_text, simulated_text, simulations

if TYPE_CHECKING:
    from engine.store import Store

HISTORY_LIMITS = (50, 200, 1000)
# A run's page reads each turn's reply up to PREVIEW_CHARS characters and its prompts not at
# all; a turn its reader opens, up to PAGE_CHARS (every reply kept at the default cap fits:
# 256 KB of UTF-8 are at most 262,144 characters). The export holds every reply whole.
PREVIEW_CHARS = 20_000
PAGE_CHARS = REPLY_CAP


def date_range(value: Any) -> tuple[date | None, date | None]:
    """(since, until) from a date input's value: a date, a 0-2 tuple of dates, or None."""
    if isinstance(value, date):
        return value, value
    picked = [v for v in (value or ()) if isinstance(v, date)]
    if not picked:
        return None, None
    return picked[0], picked[-1]


def choices_from(protocols: Iterable[Any], labels: Iterable[Any], tags: Iterable[Any],
                 models: Iterable[Any]) -> dict[str, list[str]]:
    """The values each filter can take: every registered protocol (then any other stored
    one), and the labels, tags and models seen (`tags` are lists, `models` comma-joined)."""
    stored = {str(p) for p in protocols if isinstance(p, str)}
    return {"protocol": list(REGISTRY) + sorted(stored - set(REGISTRY)),
            "label": sorted({v for v in labels if isinstance(v, str) and v}),
            "tag": sorted({str(t) for group in tags if isinstance(group, list)
                           for t in group if not str(t).startswith(INTERNAL_TAGS)}),
            "model": sorted({m for joined in models if isinstance(joined, str)
                             for m in joined.split(",") if m}),
            "status": list(STATUSES)}


def choices(store: Store) -> dict[str, list[str]]:
    """`choices_from` every stored run, read as the distinct protocols, labels, tag lists
    and model lists (milliseconds for 10,000 runs, where `Store.runs()` would parse every
    run's configuration and metrics: half a second). Read-only."""
    seen = store.run_choices()
    return choices_from(seen["protocol"], seen["label"], seen["tags"], seen["models"])


def newest(store: Store) -> str | None:
    """The id of the newest stored run, or None when nothing is stored (one-row read)."""
    frame = store.runs(limit=1)
    return None if frame.empty else str(frame["id"].iloc[0])


def protocol_title(name: str) -> str:
    spec = REGISTRY.get(name)
    return spec.title if spec is not None else name


def protocol_titles(names: pd.Series) -> pd.Series:
    """`protocol_title` over a column (a dict lookup, not a Python call per row)."""
    return names.map({name: spec.title for name, spec in REGISTRY.items()}).fillna(names)


# --------------------------------------------------------------------------- history
def outcome_text(metrics: Mapping[str, Any] | None) -> str:
    """A run's outcome in a few words: the line its protocol wrote when it finished."""
    value = metrics.get("outcome") if isinstance(metrics, Mapping) else None
    return value if isinstance(value, str) else ""


def score_word(correct: Any, unanswered: Any) -> str:
    """A run's score in a word: "right", "wrong", "unanswered" (given an expected answer it
    gave none: wrong, DESIGN 4), or "" when it was not scored."""
    if unanswered is True or unanswered == 1:
        return "unanswered"
    if correct is None or correct != correct:
        return ""
    return "right" if bool(correct) else "wrong"


def score_text(run: Mapping[str, Any]) -> str:
    """A stored run's score as shown: "right", "wrong", "wrong: unanswered (it gave no
    answer)", or "" when it was not scored (no expected answer, or a protocol that gives
    none)."""
    word = score_word(run.get("correct"), run.get("unanswered"))
    return "wrong: unanswered (it gave no answer)" if word == "unanswered" else word


def status_text(status: Any, degraded_run: Any) -> str:
    """A run's status as shown: a completed run that lost a decisive call or most of its
    turns reads `completed (degraded)`, never plain `completed`."""
    return f"{status} (degraded)" if status == "completed" and bool(degraded_run) else str(status)


HISTORY_COLUMNS = ("id", "created", "protocol", "label", "question", "expected", "correct",
                   "unanswered", "outcome", "confidence", "mind changes", "status", "simulated",
                   "models", "calls", "degraded", "tokens", "cost", "seconds", "unreadable")


def metric(metrics: Any, key: str) -> Any:
    """One stored metric of a run (None when the run has none, or no metrics)."""
    return metrics.get(key) if isinstance(metrics, Mapping) else None
# Tags Parley writes for itself (an experiment's cell, a re-run's original): kept on the run,
# left out of the Tag filter, whose choices are the user's own tags.


def history_table(frame: pd.DataFrame) -> pd.DataFrame:
    """The Runs page's table: one line per run, newest first, every value plain text/number;
    after a transcript search, also where each run matched and a snippet of it."""
    searched = ["match", "snippet"] if "snippet" in frame else []
    if frame.empty:
        return pd.DataFrame(columns=[*HISTORY_COLUMNS, *searched])
    created = pd.to_datetime(frame["created_at"], utc=True)
    question = frame["question"].fillna("").str.replace(r"\s+", " ", regex=True)
    simulated = [text for text, _ in simulations(frame)]
    costs = frame["cost_usd"].tolist() if "cost_usd" in frame else [None] * len(frame)
    return pd.DataFrame({
        "id": frame["id"],
        "created": created.dt.strftime("%Y-%m-%d %H:%M"),
        "protocol": protocol_titles(frame["protocol"]),
        "label": frame["label"].fillna(""),
        "question": question,
        "expected": frame["expected"].fillna("") if "expected" in frame else "",
        "correct": [None if c is None or c != c else bool(c) for c in frame["correct"]]
        if "correct" in frame else None,
        "unanswered": [v is True or v == 1 for v in frame["unanswered"]]
        if "unanswered" in frame else False,
        "outcome": [outcome_text(m) for m in frame["metrics"]],
        # the run's confidence level and its measured mind changes, where its protocol has them
        "confidence": [str(metric(m, "level") or "") for m in frame["metrics"]],
        "mind changes": pd.array([c if isinstance(c, int) and not isinstance(c, bool) else None
                                  for c in (metric(m, "mind_changes") for m in frame["metrics"])],
                                 dtype="Int64"),
        "status": [status_text(s, d) for s, d in zip(
            frame["status"].tolist(), frame["degraded_run"].tolist(), strict=True)],
        "simulated": simulated,
        "models": frame["models"].fillna(""),
        "calls": frame["calls"].astype(int),
        "degraded": frame["degraded"].astype(int),
        "tokens": (frame["tokens_in"] + frame["tokens_out"]).astype(int),
        "cost": [cost_text(c, s) for c, s in zip(costs, simulated, strict=True)],
        "seconds": frame["duration"].astype(float).round(2),
        "unreadable": frame["unreadable"] if "unreadable" in frame else "",
        **{name: frame[name].fillna("") for name in searched},
    }, columns=[*HISTORY_COLUMNS, *searched])


def unreadable_runs(table: pd.DataFrame) -> list[tuple[str, str]]:
    """(id, why) of the rows of a history table that could not be read in full."""
    if table.empty or "unreadable" not in table:
        return []
    return [(str(i), str(w)) for i, w in zip(table["id"], table["unreadable"], strict=True) if w]


@dataclass
class History:
    """A page of the history: the newest `limit` matching runs, whether more match, and how
    many match in all."""

    table: pd.DataFrame
    more: bool
    limit: int
    matching: int = 0


def history(store: Store, filters: RunFilters, limit: int = 200) -> History:
    """The newest `limit` runs matching `filters` as the history table (one bounded query),
    and how many match in all when there are more (one count in SQL)."""
    frame = store.runs(**filters.store_args(), limit=limit + 1)
    more = len(frame) > limit
    matching = store.count_runs(**filters.store_args()) if more else min(len(frame), limit)
    return History(history_table(frame.head(limit)), more, limit, matching)


# --------------------------------------------------------------------------- one run
@dataclass
class RunDetail:
    """Everything the run detail view shows beside the protocol's own view blocks (which
    already carry its confidence, agreement and dissent): facts, transcript, timeline,
    per-seat usage, problems, the tallies and the panel's stance flows, as plain values."""

    run: dict[str, Any]
    title: str
    simulation: str  # "all", "mixed: <the simulated seats>" or "" (`views.simulation`)
    facts: list[tuple[str, Any]]
    blocks: list[Any]
    transcript: list[dict[str, Any]]
    timeline: pd.DataFrame
    usage: pd.DataFrame
    problems: list[str]
    tallies: list[tuple[str, dict[str, int], str | None]] = field(default_factory=list)
    flows: pd.DataFrame | None = None
    outcome: str = ""
    dynamics: DynamicsStrip | None = None  # DESIGN 2.12, for a protocol with rounds of answers

    @property
    def simulated(self) -> bool:
        """Whether the simulated model played any seat of the run (`simulation` says which)."""
        return bool(self.simulation)

    @property
    def rerunnable(self) -> bool:
        config = self.run.get("config") or {}
        return bool(config.get("seats")) and self.run.get("protocol") in REGISTRY


def result_blocks(run: Mapping[str, Any]) -> list[Block]:
    """A stored run's result as its protocol's view blocks ([] when there is none, or it
    cannot be read as that protocol's result)."""
    return _result_view(run)[1]


def _result_view(run: Mapping[str, Any]) -> tuple[Any, list[Block], str]:
    """A stored run's typed result (None when there is none, or it does not read as its
    protocol's), its view blocks, and why they could not be shown ("" when nothing kept
    them)."""
    spec = REGISTRY.get(str(run.get("protocol", "")))
    result = spec.read_result(run.get("result")) if spec is not None else None
    if spec is None or result is None:
        unfit = bool(run.get("result")) and spec is not None
        return result, [], ("the stored result does not fit this protocol's result; only the "
                            "transcript is shown" if unfit else "")
    try:  # a stored result is data: one its view trips on costs only the view
        return result, list(spec.view(result)), ""
    except (AttributeError, KeyError, TypeError, ValueError, IndexError) as exc:
        return result, [], f"the stored result could not be shown ({type(exc).__name__}: {exc})"


def run_detail(store: Store, run_id: str, preview: int | None = None) -> RunDetail:
    """One stored run, taken apart for the detail view; `KeyError` when there is no such run.

    With `preview` (a page's read), each transcript entry's reply is its first `preview`
    characters (`length` says how many it has) and its prompts are not read (`messages`
    None): `turn_text` reads one turn when its reader opens it. Without, everything whole
    (the shared HTML, the CLI)."""
    run = store.get(run_id, reply_chars=preview) if preview is not None else store.get(run_id)
    problems: list[str] = []
    if run.get("unreadable"):
        problems.append(f"part of this run could not be read ({run['unreadable']}); what "
                        "could be read is shown, and the run can be deleted")
    result, blocks, unshown = _result_view(run)
    if unshown:
        problems.append(unshown)
    turns = run.get("turns") or []
    flows = [b for b in blocks if b.kind == "flow"]
    return RunDetail(
        run=run, title=protocol_title(run["protocol"]),
        simulation=simulated_text(run.get("simulated"), run.get("models"), run.get("config")),
        facts=_facts(run, turns), blocks=[b for b in blocks if b.kind not in ("tally", "flow")],
        transcript=[_turn_entry(t) for t in turns], timeline=timeline_frame(turns),
        usage=seat_usage(turns), problems=problems + _problems(run, turns, blocks),
        tallies=[(b.title, b.counts, b.winner or None) for b in blocks if b.kind == "tally"],
        flows=pd.DataFrame(flows[0].rows) if flows else None,
        outcome=outcome_text(run.get("metrics")),
        dynamics=dynamics_strip(run) if result is not None else None)


def turn_text(store: Store, run_id: str, idx: int, reply: bool = True) -> dict[str, Any]:
    """One turn's reply (up to `PAGE_CHARS` characters; none without `reply`), its whole
    `length` and its prompt `messages`, for a page whose reader opened the turn."""
    read = store.turn_text(run_id, idx, PAGE_CHARS if reply else 0)
    return {"reply": read["reply"], "length": read["reply_length"],
            "messages": [dict(m) for m in read["messages"]]}


def run_cost_text(run: Mapping[str, Any], turns: Iterable[Mapping[str, Any]] = ()) -> str:
    """A stored run's cost as shown (`cost_text`): unknown when unpriced, "$0 (simulated)"
    for the simulated model, marked when some of its tokens are an estimate."""
    simulation = simulated_text(run.get("simulated"), run.get("models"), run.get("config"))
    return cost_text(run.get("cost_usd"), simulation,
                     any(t.get("usage_estimated") for t in turns))


def _facts(run: Mapping[str, Any], turns: list[Mapping[str, Any]]) -> list[tuple[str, Any]]:
    return [("Status", status_text(run.get("status", ""), run.get("degraded_run"))),
            ("Calls", int(run.get("calls") or 0)),
            ("Degraded", int(run.get("degraded") or 0)),
            ("Tokens in / out", f"{int(run.get('tokens_in') or 0):,} / "
                                f"{int(run.get('tokens_out') or 0):,}"),
            ("Cost", run_cost_text(run, turns)),
            ("Seconds", f"{float(run.get('duration') or 0):.2f}"),
            *_score_facts(run), *_order_fact(run)]


def _score_facts(run: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """The expected answer and the run's score against it, when it was scored."""
    score = score_text(run)
    return [("Expected answer", str(run.get("expected") or "")), ("Score", score)] \
        if score else []


def _order_fact(run: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """The order seed a run presented its seats by (DESIGN 2.10), when it had one."""
    config = run.get("config")
    seed = config.get("order_seed") if isinstance(config, Mapping) else None
    return [("Order seed", str(seed))] if isinstance(seed, int) else []


def _turn_entry(turn: Mapping[str, Any]) -> dict[str, Any]:
    heading = (f"#{turn.get('idx', 0)} {turn.get('seat', '')} · {turn.get('phase', '')} · "
               f"round {turn.get('round', 0)} · {turn.get('status', '')}")
    reply, messages = turn.get("reply") or "", turn.get("messages")
    return {"heading": heading, "idx": turn.get("idx", 0), "index": int(turn.get("idx") or 0),
            "seat": turn.get("seat", ""),
            "phase": turn.get("phase", ""), "round": turn.get("round", 0),
            "status": turn.get("status", ""), "reply": reply,
            # the reply's whole length: more than `reply` holds when read for a page
            "length": max(int(turn.get("reply_length") or 0), len(reply)),
            "error": turn.get("error") or "",
            "warnings": list(turn.get("warnings") or []), "model": turn.get("model", ""),
            # None: not read (a page's read of the run; `turn_text` reads them)
            "messages": None if messages is None else list(messages),
            "degraded": turn.get("status") != "ok",
            "latency": float(turn.get("latency") or 0.0),
            "tokens": f"{turn.get('tokens_in', 0)} in / {turn.get('tokens_out', 0)} out",
            "cost": cost_text(turn.get("cost_usd"), "all" if turn.get("simulated") else "",
                              bool(turn.get("usage_estimated"))),
            # a JSON call's path (engine.llm.structured); "" for free text and older turns
            "output": f"JSON {turn['output_mode']}" if turn.get("output_mode") else ""}


def timeline_frame(turns: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per call: seat, phase, round, status and its start and finish times (UTC)."""
    rows = [{"call": f"#{t.get('idx', 0)}", "seat": t.get("seat", ""),
             "phase": t.get("phase", ""), "round": t.get("round", 0),
             "status": t.get("status", ""), "start": t.get("started_at"),
             "finish": t.get("finished_at"), "latency": float(t.get("latency") or 0.0)}
            for t in turns]
    frame = pd.DataFrame(rows, columns=["call", "seat", "phase", "round", "status", "start",
                                        "finish", "latency"])
    if not frame.empty:
        frame["start"] = pd.to_datetime(frame["start"], utc=True, format="ISO8601")
        frame["finish"] = pd.to_datetime(frame["finish"], utc=True, format="ISO8601")
        # A call shorter than a pixel still deserves a visible bar.
        short = frame["finish"] - frame["start"] < pd.Timedelta(milliseconds=1)
        frame.loc[short, "finish"] = frame.loc[short, "start"] + pd.Timedelta(milliseconds=1)
    return frame


# The usage table's columns as a person reads them (the page and the shared HTML).
USAGE_WORDS = {"seat": "seat", "calls": "calls", "degraded": "degraded calls",
               "tokens_in": "tokens in", "tokens_out": "tokens out", "cost": "cost (US$)",
               "latency": "latency (s, all calls)", "mean_latency": "latency (s, per call)"}


def seat_usage(turns: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """Per seat: calls, degraded calls, tokens in and out, cost (`cost_text` of the seat's
    `total_cost`), total and mean latency (s)."""
    turns = list(turns)
    frame = pd.DataFrame([{"seat": t.get("seat", ""), "degraded": t.get("status") != "ok",
                           "tokens_in": int(t.get("tokens_in") or 0),
                           "tokens_out": int(t.get("tokens_out") or 0),
                           "latency": float(t.get("latency") or 0.0)} for t in turns],
                         columns=["seat", "degraded", "tokens_in", "tokens_out", "latency"])
    if frame.empty:
        return pd.DataFrame(columns=["seat", "calls", "degraded", "tokens_in", "tokens_out",
                                     "cost", "latency", "mean_latency"])
    grouped = frame.groupby("seat", sort=False)
    out = grouped.agg(calls=("seat", "size"), degraded=("degraded", "sum"),
                      tokens_in=("tokens_in", "sum"), tokens_out=("tokens_out", "sum"),
                      latency=("latency", "sum")).reset_index()
    out.insert(5, "cost", [_seat_cost([t for t in turns if t.get("seat", "") == seat])
                           for seat in out["seat"]])
    return out.assign(mean_latency=out["latency"] / out["calls"]).round(
        {"latency": 3, "mean_latency": 3})


def _seat_cost(turns: list[Mapping[str, Any]]) -> str:
    simulated = bool(turns) and all(t.get("simulated") for t in turns)
    return cost_text(total_cost(turns), "all" if simulated else "",
                     any(t.get("usage_estimated") for t in turns))


def _problems(run: Mapping[str, Any], turns: list[Mapping[str, Any]],
              blocks: list[Any]) -> list[str]:
    problems = []
    if run.get("degraded_run"):
        problems.append(f"degraded run: it lost {run.get('lost') or 'a decisive call'}")
    if run.get("error"):
        problems.append(f"run {run.get('status', '')}: {run['error']}")
    for t in turns:
        where = f"#{t.get('idx', 0)} {t.get('seat', '')} ({t.get('phase', '')}, " \
                f"round {t.get('round', 0)})"
        if t.get("status") != "ok":
            problems.append(f"{where} degraded: {t.get('error') or 'no reason recorded'}")
        for warning in t.get("warnings") or []:
            problems.append(f"{where} parse warning: {warning}")
    shown = {getattr(b, "body", "") for b in blocks if getattr(b, "kind", "") == "warning"}
    stored = (run.get("result") or {}).get("warnings")
    for warning in stored if isinstance(stored, list) else []:
        if str(warning) not in shown:
            problems.append(str(warning))
    return problems
