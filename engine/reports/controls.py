"""Is the deliberation worth it? Controls over an experiment's stored runs, with no model call
(DESIGN 2.13). Each keeps simulated and real runs apart, says its n and gives an interval.

- **Headroom** (arXiv 2605.09618): with two or more configurations, over the questions every
  one of them scored (a configuration's score on a question: the share of its counted runs
  right over the repeats):
  - `best_fixed`: the configuration with the highest mean score (ties: the spec's order);
  - `oracle`: per question the best score of any configuration, the most routing could gain;
  - `router`: a router that sees only round one's vote entropy. Each question falls in a
    bucket: round one unanimous (entropy 0 in every counted run with two or more votes),
    split, or unknown (no run gave round votes). It is sent to the configuration with the
    best mean score over the *other* questions of its bucket (leave one out: it never sees
    the question it routes; ties and an empty bucket: the best fixed one).
  Each arm's gain over the best fixed one, with a 95% percentile bootstrap interval over
  the questions, paired (2,000 resamples, seeded: the same runs give the same interval).
- `unanimous_wrong`: of the questions a deliberation fixed (a counted run with two rounds or
  more whose round-one plurality was wrong and final answer right), the share whose round
  one was unanimous and wrong in every run that fixed it (the paper reports 66%), with its
  Wilson interval.
- **Dropped seats** (`dropped_from`, `controls_of`): when some calls of a configuration's
  runs failed or timed out (a degraded turn), its accuracy over every question and over the
  questions on which every call of its runs came back, flagged when the second lies outside
  the first's 95% Wilson interval (slow, strong models drop first, so the partial runs can
  flatter or sink a configuration).
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from engine.analysis.answers import answers_match
from engine.analysis.rounds_dynamics import entropy
from engine.models import ConfigError
from engine.protocols.baselines import CONSULTANCY_KIND, PLACEBO_KIND
from engine.protocols.baselines import consultancy as consultancy_arm
from engine.protocols.baselines import placebo as placebo_arm
from engine.reports.consensus import clean_votes, fill_votes
from engine.reports.experiments import counted, runs_frame, scores
from engine.reports.positions import swapped_label
from engine.reports.references import findings, findings_note
from engine.store.experiments import row
from engine.views.aggregate import default_kind, interval, rate_text

if TYPE_CHECKING:
    from engine.store import Store

BOOTSTRAP = 2_000
SEED = 0
PAPER_UNANIMOUS_WRONG = 0.66  # arXiv 2605.09618: of the questions debate helped


@dataclass(frozen=True)
class Arm:
    """An accuracy over the headroom's questions: which configuration each question went to
    (`picks`, question index -> label), and the gain over the best fixed configuration with
    its paired bootstrap interval (`low`, `high`; NaN for the best fixed one itself)."""

    name: str
    accuracy: float
    picks: Mapping[int, str]
    gain: float = 0.0
    low: float = math.nan
    high: float = math.nan
    label: str = ""  # the configuration, for the best fixed one

    def __float__(self) -> float:
        return self.accuracy


@dataclass(frozen=True)
class Share:
    """`count` of `n` with its 95% Wilson interval (NaN when n is 0)."""

    count: int
    n: int

    @property
    def rate(self) -> float:
        return self.count / self.n if self.n else math.nan

    @property
    def low(self) -> float:
        return interval(self.count, self.n)[0]

    @property
    def high(self) -> float:
        return interval(self.count, self.n)[1]

    @property
    def text(self) -> str:
        return rate_text(self.count, self.n)

    def __float__(self) -> float:
        return self.rate


@dataclass(frozen=True)
class Headroom:
    """What routing between an experiment's configurations could gain (see the module)."""

    kind: str  # "real" or "simulated": the runs it is over
    configurations: tuple[str, ...]  # those with a scored run, in the spec's order
    questions: tuple[int, ...]  # question indexes every one of them scored
    best_fixed: Arm
    oracle: Arm
    router: Arm
    unanimous_wrong: Share
    # question -> its round one's votes: "unanimous", "split" or "unknown"
    buckets: Mapping[int, str] = field(default_factory=dict)
    left_out: tuple[str, ...] = ()  # configurations with no scored run
    note: str = ""  # why there is no headroom to measure, when there is none

    @property
    def simulated(self) -> bool:
        return self.kind == "simulated"


def _counted(store: Store, experiment_id: str, kind: str | None,
             frame: pd.DataFrame | None = None) -> tuple[pd.DataFrame, str, dict[str, Any]]:
    """The experiment's counted runs of one kind (real unless it has only simulated ones),
    with round votes filled in, its kind and its spec (`frame`: its runs frame when read
    already)."""
    if kind not in (None, "real", "simulated"):
        raise ConfigError(f"runs must be real or simulated (never pooled here), got {kind!r}",
                          "input")
    spec = row(store, experiment_id)["spec"]
    frame = runs_frame(store, experiment_id) if frame is None else frame
    kind = kind or default_kind(frame)
    frame = counted(frame, simulated=kind == "simulated")
    if not frame.empty:
        frame = fill_votes(store, frame.reset_index(drop=True))
    return frame, kind, spec


def buckets(frame: pd.DataFrame) -> dict[int, str]:
    """Per question index: `unanimous` when round one's votes had one answer (entropy 0) in
    every counted run with two or more of them, `split` when any such run's did not,
    `unknown` when none of its runs gave round votes."""
    seen: dict[int, list[float]] = {}
    for q, value in zip(frame["q"].tolist(), frame["round_votes"].tolist(), strict=True):
        counts = clean_votes(value)
        if counts and sum(counts[0].values()) >= 2:
            seen.setdefault(int(q), []).append(entropy(counts[0]))
    return {q: ("unanimous" if max(values) == 0 else "split") for q, values in seen.items()}


def _bootstrap(diffs: Sequence[float]) -> tuple[float, float]:
    """The 95% percentile bootstrap interval of the mean of `diffs` (one per question):
    `BOOTSTRAP` draws of as many questions with replacement, seeded (`SEED`)."""
    if len(diffs) < 2:
        return math.nan, math.nan
    values = np.asarray(diffs, dtype=float)
    draws = np.random.default_rng(SEED).integers(0, len(values), (BOOTSTRAP, len(values)))
    means = np.sort(values[draws].mean(axis=1))
    return (float(means[int(0.025 * (BOOTSTRAP - 1))]),
            float(means[int(math.ceil(0.975 * (BOOTSTRAP - 1)))]))


def _arm(name: str, picks: Mapping[int, str], table: Mapping[str, Mapping[int, float]],
         fixed: Sequence[float]) -> Arm:
    got = [table[picks[q]][q] for q in picks]
    diffs = [a - b for a, b in zip(got, fixed, strict=True)]
    low, high = _bootstrap(diffs)
    return Arm(name, sum(got) / len(got), dict(picks), sum(diffs) / len(diffs), low, high)


def _route(questions: Sequence[int], bucket: Mapping[int, str], order: Sequence[str],
           table: Mapping[str, Mapping[int, float]], fixed: str) -> dict[int, str]:
    """Each question's configuration: the best over the other questions of its bucket (its
    bucket's total less its own, so a question costs one pass over the configurations)."""
    members: dict[str, list[int]] = {}
    for q in questions:
        members.setdefault(bucket.get(q, "unknown"), []).append(q)
    totals = {name: {label: sum(table[label][q] for q in qs) for label in order}
              for name, qs in members.items()}
    picks = {}
    for q in questions:
        name = bucket.get(q, "unknown")
        if len(members[name]) < 2:
            picks[q] = fixed
            continue
        # rounded: a tie of sums of repeat shares must not be split by float error
        means = {label: round(totals[name][label] - table[label][q], 9) for label in order}
        top = max(means.values())
        picks[q] = fixed if means[fixed] == top else next(
            label for label in order if means[label] == top)
    return picks


def unanimous_wrong(frame: pd.DataFrame) -> Share:
    """Of the questions a deliberation fixed, those whose round one was unanimous (one
    answer, two votes or more) and wrong in every run that fixed it. Round one's plurality
    (the first of its stored votes) is scored only for the runs that ended right after two
    rounds or more, each distinct (plurality, expected answer) once."""
    fixed: dict[int, bool] = {}
    wrong: dict[tuple[str, str], bool] = {}
    for q, value, correct, expected in zip(
            frame["q"].tolist(), frame["round_votes"].tolist(), frame["correct"].tolist(),
            frame["expected"].tolist(), strict=True):
        if correct is not True or not isinstance(expected, str) or not expected.strip():
            continue
        counts = clean_votes(value)
        first = counts[0] if counts and len(counts) >= 2 else {}
        plurality = next(iter(first), None)
        if plurality is None:
            continue
        key = (plurality, expected)
        if key not in wrong:
            wrong[key] = not answers_match(plurality, expected)
        if wrong[key]:
            alone = len(first) == 1 and sum(first.values()) >= 2
            fixed[int(q)] = fixed.get(int(q), True) and alone
    return Share(sum(fixed.values()), len(fixed))


def headroom(store: Store, experiment_id: str, kind: str | None = None) -> Headroom:
    """The routing headroom of an experiment's configurations over its `kind` runs (real
    unless it has only simulated ones; never both pooled; placebo arms are controls, not
    protocols to route to, so they are left out). Reads the store, calls no model."""
    return controls_of(store, experiment_id, kind)[0]


def routable(spec: Mapping[str, Any]) -> list[str]:
    """The spec's configuration labels without its placebo arms (`placebo_pairs`)."""
    arms = {arm for _, arm in placebo_pairs(spec)}
    return [label for label in labels_of(spec) if label not in arms]


def labels_of(spec: Mapping[str, Any]) -> list[str]:
    """The spec's configuration labels, in its order."""
    return [str(c["label"]) for c in spec["configs"]]


def _headroom(frame: pd.DataFrame, kind: str, labels: Sequence[str]) -> Headroom:
    """`headroom` over the experiment's counted runs of `kind`."""
    table = scores(frame)
    order = [label for label in labels if label in table]
    left_out = tuple(label for label in labels if label not in table)
    questions = sorted(set.intersection(*(set(table[label]) for label in order))) if order \
        else []
    share = unanimous_wrong(frame) if not frame.empty else Share(0, 0)
    bucket = buckets(frame) if not frame.empty else {}
    if len(order) < 2 or not questions:
        note = ("headroom needs two or more configurations with scored runs" if len(order) < 2
                else "no question was scored by every configuration")
        empty = Arm("", math.nan, {})
        return Headroom(kind, tuple(order), tuple(questions), empty, empty, empty, share,
                        {q: bucket.get(q, "unknown") for q in questions}, left_out, note)
    means = {label: sum(table[label][q] for q in questions) / len(questions) for label in order}
    best = next(label for label in order if means[label] == max(means.values()))
    fixed = [table[best][q] for q in questions]
    oracle = {q: next(label for label in order if table[label][q] == max(
        table[other][q] for other in order)) for q in questions}
    routed = _route(questions, bucket, order, table, best)
    return Headroom(
        kind, tuple(order), tuple(questions),
        Arm("best fixed", means[best], {q: best for q in questions}, label=best),
        _arm("oracle", oracle, table, fixed), _arm("entropy router", routed, table, fixed),
        share, {q: bucket.get(q, "unknown") for q in questions}, left_out)


@dataclass(frozen=True)
class Dropped:
    """One configuration's accuracy over every question it scored (`every`) and over the
    questions on which every call of its counted runs came back (`answered`), and how many
    of its scored runs lost a call (`dropped`)."""

    label: str
    every: Share
    answered: Share
    dropped: int

    @property
    def flagged(self) -> bool:
        """The accuracy over the fully answered questions lies outside the 95% Wilson
        interval of the accuracy over every question (or there is no such question)."""
        if not self.answered.n:
            return self.every.n > 0
        return not self.every.low <= self.answered.rate <= self.every.high


def dropped_from(frame: pd.DataFrame, labels: Sequence[str]) -> list[Dropped]:
    """Per configuration whose counted, scored runs (`frame`, an experiment's of one kind)
    lost a call (a degraded turn: a call that failed, timed out or gave no usable reply):
    its accuracy over every question and over the questions none of its runs lost a call
    on. Configurations that lost none are left out."""
    scored = frame[frame["correct"].notna()] if not frame.empty else frame
    out = []
    for label in labels:
        mine = scored[scored["label"] == label] if not scored.empty else scored
        if mine.empty:
            continue
        lost = pd.to_numeric(mine["degraded"], errors="coerce").fillna(0).to_numpy() > 0
        if not lost.any():
            continue
        broken = set(mine["q"][lost].astype(int).tolist())
        whole = mine[~mine["q"].astype(int).isin(broken).to_numpy()]
        right = mine["correct"].astype(bool)
        out.append(Dropped(label, Share(int(right.sum()), len(mine)),
                           Share(int(whole["correct"].astype(bool).sum()), len(whole)),
                           int(lost.sum())))
    return out


def dropped_text(found: Sequence[Dropped], simulated: bool = False) -> str:
    """A line per configuration that lost calls, flagged ones marked; "" when none did."""
    if not found:
        return ""
    lines = [("Simulated: " if simulated else "") + "Dropped seats (calls that failed or timed "
             "out): accuracy over every question, and over the questions on which every call "
             "came back"]
    for item in found:
        lines.append(f"  {item.label}: {item.dropped} run(s) lost a call; every question "
                     f"{item.every.text}, fully answered {item.answered.text}"
                     + (" - FLAGGED: they differ beyond the interval; the partial runs "
                        "change this configuration's accuracy" if item.flagged else ""))
    return "\n".join(lines)


def dropped_rows(found: Sequence[Dropped]) -> pd.DataFrame:
    """The table a page shows, one row per configuration that lost calls."""
    return pd.DataFrame([(d.label, d.dropped, d.every.text, d.answered.text, d.flagged)
                         for d in found],
                        columns=["configuration", "runs that lost a call",
                                 "accuracy, every question",
                                 "accuracy, questions every seat answered",
                                 "differ beyond the interval"])


def controls_of(store: Store, experiment_id: str, kind: str | None = None
                ) -> tuple[Headroom, list[Dropped]]:
    """`headroom` and the dropped seats (`dropped_from`) from one read of the experiment's
    runs of `kind` (real unless it has only simulated ones). Reads the store, calls no
    model."""
    frame, kind, spec = _counted(store, experiment_id, kind)
    return _headroom(frame, kind, routable(spec)), dropped_from(frame, labels_of(spec))


def controls_text(store: Store, experiment_id: str) -> str:
    """What `experiment show` prints of the controls: per kind of run the experiment has
    (real, simulated: never pooled), its headroom when it has two or more configurations
    and a scored run, and its dropped seats when a call was lost."""
    every = runs_frame(store, experiment_id)
    kinds = sorted({"simulated" if s else "real" for s in every["simulated"].astype(bool)}) \
        if not every.empty else []
    parts = []
    spec = row(store, experiment_id)["spec"]
    pairs = placebo_pairs(spec)
    rejudged = store.runs(experiment_id=experiment_id, tag=ANSWERS_ONLY_TAG)
    labels = routable(spec)
    for kind in kinds:
        frame, _, _ = _counted(store, experiment_id, kind, every)
        room = _headroom(frame, kind, labels) if len(labels) >= 2 else None
        parts += [text for text in (  # each "" when it has nothing to say
            headroom_text(room) if room is not None and room.configurations else "",
            dropped_text(dropped_from(frame, labels), kind == "simulated"),
            placebo_text(placebo_from(frame, kind, pairs)),
            answers_only_text(answers_only_from(frame, rejudged, kind, spec))) if text]
    theirs = findings_note(findings(spec))
    if theirs and parts:
        parts.append(theirs)
    return "\n".join(parts)


# --------------------------------------------------------------------------- placebo
@dataclass(frozen=True)
class Placebo:
    """A configuration against its placebo arm (DESIGN 2.13) over its `kind` runs: their
    accuracies over the `questions` both scored (NaN when none), the configuration minus the
    placebo with its 95% paired bootstrap interval over those questions, and each one's mean
    tokens per counted run (`tokens`, `placebo_tokens`) over `runs` and `placebo_runs`."""

    label: str
    arm: str
    kind: str
    questions: int
    accuracy: float
    placebo: float
    difference: float
    low: float
    high: float
    tokens: float
    placebo_tokens: float
    runs: int
    placebo_runs: int

    @property
    def ratio(self) -> float:
        """The placebo arm's tokens per run over its configuration's (NaN: not measured)."""
        return self.placebo_tokens / self.tokens if self.tokens else math.nan  # NaN stays NaN


def findings_of(store: Store, experiment_id: str) -> str:
    """The published findings the experiment's spec names (`reference`), in one sentence
    that says they are theirs ("" when it names none)."""
    return findings_note(findings(row(store, experiment_id)["spec"]))


def placebo_pairs(spec: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The spec's (configuration, placebo arm) label pairs, sides-swapped twins paired
    with theirs, in the spec's order; empty without `baseline: placebo`."""
    out: list[tuple[str, str]] = []
    for pair, labels in _arms(spec, PLACEBO_KIND, placebo_arm):
        for of, arm in ((pair["of"], pair["label"]),
                        (swapped_label(pair["of"]), swapped_label(pair["label"]))):
            if of in labels and arm in labels and (of, arm) not in out:
                out.append((of, arm))
    return out


def placebo_from(frame: pd.DataFrame, kind: str, pairs: Sequence[tuple[str, str]]
                 ) -> list[Placebo]:
    """`placebo` over an experiment's counted runs of one kind."""
    table = scores(frame)
    # per label: its mean tokens per run and its runs
    spent = {} if frame.empty else {label: (float(tokens.mean()), len(tokens)) for label, tokens
                                    in pd.to_numeric(frame["tokens"], errors="coerce")
                                    .groupby(frame["label"])}
    out = []
    for label, arm in pairs:
        mine, theirs = table.get(label, {}), table.get(arm, {})
        shared = sorted(set(mine) & set(theirs))
        (tokens, runs), (placebo_tokens, placebo_runs) = (
            spent.get(name, (math.nan, 0)) for name in (label, arm))
        if not shared and not runs + placebo_runs:
            continue  # neither has a run of this kind
        diffs = [mine[q] - theirs[q] for q in shared]
        low, high = _bootstrap(diffs)
        accuracy = sum(mine[q] for q in shared) / len(shared) if shared else math.nan
        placebo = sum(theirs[q] for q in shared) / len(shared) if shared else math.nan
        out.append(Placebo(label, arm, kind, len(shared), accuracy, placebo,
                           accuracy - placebo, low, high, tokens, placebo_tokens, runs,
                           placebo_runs))
    return out


def placebo(store: Store, experiment_id: str, kind: str | None = None) -> list[Placebo]:
    """Each configuration against its placebo arm over the experiment's `kind` runs (real
    unless it has only simulated ones; never pooled): configuration minus placebo, paired
    over the questions both scored, and tokens per run of both. No model call."""
    frame, kind, spec = _counted(store, experiment_id, kind)
    return placebo_from(frame, kind, placebo_pairs(spec))


def placebo_rows(found: Sequence[Placebo]) -> pd.DataFrame:
    """The table a page shows, one row per configuration with a placebo arm."""
    return pd.DataFrame([(
        p.label, p.questions, _shown(p.accuracy, ".1%"), _shown(p.placebo, ".1%"),
        _points(p.difference), f"[{_points(p.low)}, {_points(p.high)}]",
        _shown(p.tokens, ",.0f"), _shown(p.placebo_tokens, ",.0f"),
        "-" if p.ratio != p.ratio else f"{p.ratio:.2f}x") for p in found],
        columns=["configuration", "questions", "accuracy", "placebo accuracy",
                 "minus placebo (points)", "95% interval", "tokens per run",
                 "placebo tokens per run", "token ratio"])


def placebo_text(found: Sequence[Placebo]) -> str:
    """A few lines for a terminal, one per configuration with a placebo arm; "" when none.
    Simulated numbers say so first."""
    if not found:
        return ""
    head = ("Simulated: " if found[0].kind == "simulated" else "") + "Placebo (peers' " \
        "messages from another question, arXiv 2605.00914): configuration minus placebo, " \
        "paired over the questions both scored"
    lines = [head]
    for p in found:
        score = (f"{_points(p.difference)} points [{_points(p.low)}, {_points(p.high)}] "
                 f"(95% paired bootstrap over {p.questions} question"
                 f"{'s' * (p.questions != 1)}; {p.accuracy:.1%} against {p.placebo:.1%})"
                 if p.questions else "no question scored by both")
        ratio = "" if p.ratio != p.ratio else f", {p.ratio:.2f}x"
        lines.append(f"  {p.label}: {score}; tokens per run {_shown(p.tokens, ',.0f')} "
                     f"against {_shown(p.placebo_tokens, ',.0f')} for the placebo{ratio}")
    return "\n".join(lines)


# --------------------------------------------------------------------------- answers only
ANSWERS_ONLY_SUFFIX = " · answers-only judge"  # the label suffix of a re-judge's runs
ANSWERS_ONLY_TAG = "answers-only-judge"  # the tag every re-judge run carries
PAPER_ANSWERS_ONLY = ("Elasky and Nakasako (2026): a judge shown only the final answers "
                      "matched or beat one shown the debate")


@dataclass(frozen=True)
class AnswersOnly:
    """A judged configuration's judge read two ways over its `kind` runs: from the
    transcript (`transcript`: its counted runs that were re-judged) and from the final
    positions alone (`answers`: their re-judges), the second minus the first paired over
    those runs with its 95% bootstrap interval, the consultancy baseline's judge accuracy
    (None without one), and the re-judges' cost: `tokens` and `cost_usd` (None: unknown)."""

    label: str
    kind: str
    transcript: Share
    answers: Share
    difference: float
    low: float
    high: float
    consultancy: Share | None
    runs: int
    tokens: int
    cost_usd: float | None


def _arms(spec: Mapping[str, Any], kind: str,
          arm_of: Callable[[dict[str, Any]], dict[str, Any] | None]
          ) -> Iterator[tuple[dict[str, Any], set[str]]]:
    """Each configuration's baseline arm (`arm_of`'s pair: `of`, `label`) when the spec runs
    the `kind` baseline, with the spec's labels. A stored configuration that no longer
    parses has no arm."""
    if kind not in str(spec.get("baseline") or ""):
        return
    configs = list(spec.get("configs") or ())
    labels = {str(c.get("label")) for c in configs}
    for config in configs:
        try:
            pair = arm_of(config)
        except ConfigError:
            continue
        if pair is not None:
            yield pair, labels


def _consultancy_labels(spec: Mapping[str, Any]) -> dict[str, list[str]]:
    """Each debate configuration's consultancy arms (both sides) among the spec's."""
    return {pair["of"]: [arm for arm in (pair["label"], swapped_label(pair["label"]))
                         if arm in labels]
            for pair, labels in _arms(spec, CONSULTANCY_KIND, consultancy_arm)}


def answers_only_from(frame: pd.DataFrame, judged: pd.DataFrame, kind: str,
                      spec: Mapping[str, Any]) -> list[AnswersOnly]:
    """`answers_only` from the experiment's counted runs of one kind (`frame`) and its
    re-judge runs (`judged`: `Store.runs` rows with their metrics)."""
    if frame.empty or judged.empty:
        return []
    source = {str(i): (str(label), right) for i, label, right in zip(
        frame["id"], frame["label"], frame["correct"], strict=True)}
    latest: dict[str, Any] = {}
    for item in judged.sort_values("created_at").itertuples(index=False):
        metrics: dict[str, Any] = item.metrics if isinstance(item.metrics, dict) else {}
        ran = str(metrics.get("source_run") or "")
        if item.status == "completed" and ran in source:
            latest[ran] = item
    by_label: dict[str, list[tuple[Any, Any]]] = {}  # label -> (run's score, its re-judge)
    for ran, item in latest.items():
        by_label.setdefault(source[ran][0], []).append((source[ran][1], item))
    consulted = _consultancy_labels(spec)
    out = []
    for label in labels_of(spec):
        if not by_label.get(label):
            continue
        pairs = [(right, item) for right, item in by_label[label]
                 if right is not None and item.correct is not None]
        before = [bool(right) for right, _ in pairs]
        after = [bool(item.correct) for _, item in pairs]
        low, high = _bootstrap([float(b) - float(a) for a, b in zip(before, after, strict=True)])
        arms = frame[frame["label"].isin(consulted.get(label, []))]
        arms = arms[arms["correct"].notna()] if not arms.empty else arms
        items = [item for _, item in by_label[label]]
        costs = [item.cost_usd for item in items]
        out.append(AnswersOnly(
            label, kind, Share(sum(before), len(before)), Share(sum(after), len(after)),
            (sum(after) - sum(before)) / len(pairs) if pairs else math.nan, low, high,
            Share(int(arms["correct"].astype(bool).sum()), len(arms))
            if consulted.get(label) else None, len(items),
            int(sum(int(i.tokens_in or 0) + int(i.tokens_out or 0) for i in items)),
            None if any(c is None or c != c for c in costs) else float(sum(costs))))
    return out


def answers_only(store: Store, experiment_id: str, kind: str | None = None
                 ) -> list[AnswersOnly]:
    """Each judged configuration's judge accuracy from the transcript, from the final
    positions alone (`python -m engine rejudge EXPERIMENT --answers-only`) and the
    consultancy baseline's, over the experiment's `kind` runs; empty before a re-judge."""
    frame, kind, spec = _counted(store, experiment_id, kind)
    judged = store.runs(experiment_id=experiment_id, tag=ANSWERS_ONLY_TAG)
    return answers_only_from(frame, judged, kind, spec)


def answers_only_rows(found: Sequence[AnswersOnly]) -> pd.DataFrame:
    """The table a page shows, one row per judged configuration: the judge's accuracy read
    both ways, their difference, the consultancy baseline's, and the re-judge's own calls,
    tokens and cost."""
    return pd.DataFrame([(
        a.label, a.transcript.text, a.answers.text, _points(a.difference),
        f"[{_points(a.low)}, {_points(a.high)}]",
        a.consultancy.text if a.consultancy is not None else "not run", a.runs,
        f"{a.tokens:,}", "unknown" if a.cost_usd is None else f"${a.cost_usd:,.4f}")
        for a in found],
        columns=["configuration", "from the transcript", "from the answers alone",
                 "difference (points)", "95% interval", "consultancy", "calls", "tokens",
                 "cost"])


def answers_only_text(found: Sequence[AnswersOnly]) -> str:
    """A few lines for a terminal, one per judged configuration; "" before a re-judge."""
    if not found:
        return ""
    lines = [("Simulated: " if found[0].kind == "simulated" else "") + "Answers-only judge "
             "(the judge's accuracy from the transcript, from the final answers alone, and "
             "the consultancy baseline's)"]
    for a in found:
        consulted = f"; consultancy {a.consultancy.text}" if a.consultancy is not None else ""
        cost = "unknown cost" if a.cost_usd is None else f"${a.cost_usd:,.4f}"
        lines.append(f"  {a.label}: transcript {a.transcript.text}, answers only "
                     f"{a.answers.text} ({_points(a.difference)} points [{_points(a.low)}, "
                     f"{_points(a.high)}], paired){consulted}; the re-judge made {a.runs} "
                     f"call{'s' * (a.runs != 1)}, {a.tokens:,} tokens, {cost}")
    return "\n".join(lines)


# --------------------------------------------------------------------------- text
def _shown(value: float, spec: str) -> str:
    """A number formatted by `spec`, "-" for NaN (not measured)."""
    return "-" if value != value else format(value, spec)


def _points(value: float) -> str:
    return _shown(value * 100, "+.1f")


def headroom_rows(found: Headroom) -> pd.DataFrame:
    """The table a page shows: one row per arm, its accuracy, its gain over the best fixed
    configuration in percentage points and the gain's interval."""
    fixed = found.best_fixed
    arms = ((fixed, f"best fixed: {fixed.label}"),
            (found.oracle, "oracle: the best configuration per question"),
            (found.router, "router: by round one's vote entropy"))
    return pd.DataFrame([(what, arm.accuracy, "–" if arm is fixed else _points(arm.gain),
                          "" if arm is fixed else f"[{_points(arm.low)}, {_points(arm.high)}]")
                         for arm, what in arms],
                        columns=["arm", "accuracy", "gain over best fixed (points)",
                                 "95% interval (paired bootstrap)"])


def headroom_text(found: Headroom) -> str:
    """A few lines for a terminal: the three arms, the router's interval, the share of fixed
    questions with a unanimous wrong round one. Simulated numbers say so first."""
    head = ("Simulated: " if found.simulated else "") + "Which protocol when?"
    if found.note:
        return f"{head} {found.note[:1].upper()}{found.note[1:]}."
    n = len(found.questions)
    lines = [f"{head} Over the {n} question{'s' * (n != 1)} every configuration scored "
             f"({found.kind} runs):",
             f"  best fixed configuration: {found.best_fixed.label}, "
             f"{found.best_fixed.accuracy:.1%}"]
    for arm, what in ((found.oracle, "oracle (the best configuration per question)"),
                      (found.router, "router by round-one vote entropy")):
        lines.append(f"  {what}: {arm.accuracy:.1%}, {_points(arm.gain)} points over the "
                     f"best fixed [{_points(arm.low)}, {_points(arm.high)}] (95% paired "
                     "bootstrap over questions)")
    lines.append("  " + unanimous_text(found.unanimous_wrong))
    if found.left_out:
        lines.append(f"  left out (no scored run): {', '.join(found.left_out)}")
    return "\n".join(lines)


def unanimous_text(share: Share) -> str:
    """The unanimous-but-wrong share as a sentence, beside the paper's figure."""
    if not share.n:
        return ("no question was fixed by a deliberation (round one's plurality wrong, the "
                "final answer right)")
    return (f"of the {share.n} question{'s' * (share.n != 1)} a deliberation fixed, "
            f"{share.count} had a unanimous wrong round one: {share.text} (arXiv 2605.09618 "
            f"reports {PAPER_UNANIMOUS_WRONG:.0%})")
