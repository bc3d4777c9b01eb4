"""The Review page's queue (DESIGN section 5): pairs of completed runs that answered the same
question under two configurations, and each run's final answer blinded.

A pair is of one kind: two simulated runs, or two real ones, never one against the other (a
simulated answer is never judged beside a real one). A configuration is a run's label, or its
protocol and models when it has none; each pair of configurations on a question gives one
pair, the newest run of each. Blinding: a run's answer is shown as text with every name that
would tell the configurations apart (seat, persona, role and model names, labels, protocol
names, of both runs) replaced by `HIDDEN`. A model that names itself ("As gpt-4o-mini, ...",
"I am Claude, made by Anthropic") is hidden too: each model spec is hidden whole, without
its provider, without a date or `-latest` suffix or a size tag, and as its provider and its
endpoint's name; and the vendors' family and company names (`VENDOR_NAMES`) always are.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import combinations
from typing import Any

import pandas as pd

HIDDEN = "[hidden]"
# Model families and their makers, hidden in every answer whatever the runs' models: a model
# that says what it is tells the reader which configuration wrote the answer.
VENDOR_NAMES = frozenset({
    "GPT", "ChatGPT", "OpenAI", "Claude", "Anthropic", "Gemini", "Gemma", "Bard", "PaLM",
    "DeepMind", "Google", "Llama", "Meta AI", "Mistral", "Mixtral", "Codestral", "Qwen",
    "Alibaba", "DeepSeek", "Grok", "xAI", "Phi", "Microsoft", "Copilot", "Cohere",
    "Command R", "Falcon", "Ollama", "Nemotron", "NVIDIA", "Yi", "Kimi", "Moonshot", "GLM",
    "Zhipu", "Granite", "Jamba", "Titan", "Nova", "Amazon"})
_DATED = re.compile(r"(?:[-_@](?:\d{4}-\d{2}-\d{2}|\d{8}|\d{4}|latest|preview|exp))+$",
                    re.IGNORECASE)
NO_ANSWER = "(this run stored no final answer)"


@dataclass(frozen=True)
class Pair:
    """Two runs to judge: `run_a` and `run_b` in the queue's (canonical) order."""

    question: str
    run_a: str
    run_b: str
    simulated: bool

    @property
    def key(self) -> str:
        return f"{self.run_a}:{self.run_b}"


def configuration(run: Mapping[Any, Any]) -> str:
    """What tells a run's configuration apart: its label, else its protocol and models."""
    label = run.get("label")
    if isinstance(label, str) and label:
        return label
    return f"{run.get('protocol', '')} · {run.get('models', '')}"


def queue(runs: pd.DataFrame) -> list[Pair]:
    """The pairs to judge among `runs` (a `store.runs()` frame): completed runs grouped by
    question text and kind, one pair per two configurations, newest run of each, in a
    stable order (question, then configurations)."""
    if runs.empty:
        return []
    done = runs[runs["status"] == "completed"].sort_values("created_at", ascending=False)
    pairs: list[Pair] = []
    for (question, simulated), group in done.groupby(["question", "simulated"], sort=True):
        newest: dict[str, str] = {}
        for run in group.to_dict("records"):
            newest.setdefault(configuration(run), str(run["id"]))
        for first, second in combinations(sorted(newest), 2):
            pairs.append(Pair(str(question), newest[first], newest[second], bool(simulated)))
    return pairs


def judged(pairs: Iterable[Pair], preferences: pd.DataFrame, rater: str) -> set[str]:
    """The keys of `pairs` that `rater` has judged (in either order)."""
    mine = preferences[preferences["rater"] == rater] if not preferences.empty else preferences
    seen = {frozenset((a, b)) for a, b in zip(mine.get("run_a", []), mine.get("run_b", []),
                                               strict=True)}
    return {p.key for p in pairs if frozenset((p.run_a, p.run_b)) in seen}


def names(run: Mapping[str, Any]) -> set[str]:
    """Every name of a run that would tell its configuration apart."""
    specs = {m for m in str(run.get("models") or "").split(",") if m}  # each named every way
    found = {run[key] for key in ("label", "protocol") if isinstance(run.get(key), str)} | specs
    config = run.get("config")  # as the store reads it back: a mapping, or its empty default
    seats = config.get("seats", {}) if isinstance(config, Mapping) else {}
    if isinstance(seats, Mapping):
        found.update(str(slot) for slot in seats)
    for group in seats.values() if isinstance(seats, Mapping) else [seats]:
        for seat in group if isinstance(group, list) else [group]:
            if isinstance(seat, Mapping):
                found.update(str(seat[k]) for k in ("name", "model", "persona_name", "role")
                             if isinstance(seat.get(k), str) and len(seat[k]) <= 200)
                if isinstance(seat.get("model"), str):
                    specs.add(seat["model"])
    for turn in run.get("turns") or ():
        found.update(str(turn[k]) for k in ("seat", "model") if turn.get(k))
        if turn.get("model"):
            specs.add(str(turn["model"]))
    for spec in specs:
        found |= model_names(spec)
    return {n.strip() for n in found if len(n.strip()) >= 2} | set(VENDOR_NAMES)


def model_names(spec: str) -> set[str]:
    """Every way an answer could name a model spec: the spec whole and without its query,
    the model without its provider, without a date, `-latest` or a size tag, its last path
    part, its provider and its endpoint's name (`openai:gpt-4o-2024-08-06?endpoint=lab`:
    gpt-4o-2024-08-06, gpt-4o, openai, lab ...)."""
    spec = spec.strip()[:200]
    base, _, query = spec.partition("?")
    provider, colon, model = base.partition(":")
    if not colon:
        provider, model = "", base
    names = {spec, base, model, provider}
    for part in query.split("&"):
        key, _, value = part.partition("=")
        if key.strip() == "endpoint":
            names.add(value.strip())
    for variant in list(names - {provider}):
        last = variant.rsplit("/", 1)[-1]
        untagged = last.split(":", 1)[0]  # an ollama size tag: llama3.1:8b
        names |= {last, untagged, _DATED.sub("", last), _DATED.sub("", untagged)}
    return {n for n in names if n}


def blinded(text: str, hide: Iterable[str]) -> str:
    """`text` with each of `hide` (whole words, any case, longest first) as `HIDDEN`."""
    words = sorted(set(hide), key=len, reverse=True)
    if not words:
        return text
    pattern = re.compile("|".join(rf"(?<!\w){re.escape(w)}(?!\w)" for w in words),
                         re.IGNORECASE)
    return pattern.sub(HIDDEN, text)


def final_answer(run: Mapping[str, Any]) -> str:
    """A stored run's final answer as text (its metrics' `answer`)."""
    metrics = run.get("metrics")
    answer = metrics.get("answer") if isinstance(metrics, Mapping) else None
    return str(answer) if answer not in (None, "") else NO_ANSWER


# A result's fields that hold the reasoning behind its final answer, first found wins
# (a judge's or a synthesis's rationale, a chairman's whole reply); names of fields, read
# the same for every protocol.
REASONING_FIELDS = ("rationale", "reasoning", "final_text", "final_output")


def reasoning(run: Mapping[str, Any]) -> str:
    """The reasoning behind a stored run's final answer, as text: its result's rationale
    (`REASONING_FIELDS`), else the reply of its last successful call; "" when it has none.
    The Review page shows it collapsed under the answer, blinded like the answer."""
    result = run.get("result")
    if isinstance(result, Mapping):
        for field in REASONING_FIELDS:
            value = result.get(field)
            if isinstance(value, str) and value.strip():
                return value.strip()
    turns = run.get("turns") or []
    replies = [t.get("reply") for t in turns if isinstance(t, Mapping)
               and t.get("status") == "ok" and str(t.get("reply") or "").strip()]
    return str(replies[-1]).strip() if replies else ""
