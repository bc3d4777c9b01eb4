"""Baselines at equal compute or equal tokens: beside a configuration, the self-consistency
vote that makes the same number of model calls (`equal_compute`), or spends about the same
tokens per run (`equal_tokens`), so "the debate beat the vote" is never 7 calls against 3, nor
20,000 tokens against 2,000.

Either baseline is a vote of N independent samples on the configuration's models, within the
vote's `MIN_VOTERS..MAX_VOTERS`. Equal compute: N = the configuration's calls per run when
nothing fails (`estimate`). Equal tokens: N = the sample count whose tokens per run come
closest to the configuration's measured mean (Tran & Kiela, arXiv 2604.02460), and the label
states the ratio that achieves. When the range binds, the baseline is not equal and says so in
its label and its note, never silently.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.config import RunConfig
from engine.protocols import Resolved, get_protocol, resolve_config
from engine.protocols.vote import MAX_VOTERS, MIN_VOTERS, SPEC
from engine.text import NAME_MAX

KIND = "equal-compute"  # the experiment spec's `baseline:` values
TOKENS_KIND = "equal-tokens"
SAMPLER = SPEC.name  # the protocol a baseline is: a vote of independent samples


@dataclass(frozen=True)
class Baseline:
    """The equal-compute vote beside configuration `of`: `calls` is what `of` makes per run,
    `samples` the vote's voters (its calls per run), `config` the vote's configuration."""

    of: str
    calls: int
    samples: int
    config: dict[str, Any]

    @property
    def label(self) -> str:
        return str(self.config["label"])

    @property
    def equal(self) -> bool:
        """True when the baseline makes as many calls per run as its configuration."""
        return self.samples == self.calls

    @property
    def note(self) -> str:
        """One plain sentence on what the baseline matches, and where it falls short."""
        if self.equal:
            return (f"equal-compute baseline of {self.of}: {self.samples} samples, "
                    f"{self.calls} calls per run like {self.of}")
        bound = (f"the vote's maximum is {MAX_VOTERS} voters" if self.samples < self.calls
                 else f"the vote's minimum is {MIN_VOTERS} voters")
        return (f"NOT equal compute: {self.of} makes {_calls(self.calls)} per run, but "
                f"{bound}, so this baseline makes {self.samples}")

    def as_dict(self) -> dict[str, Any]:
        """The pairing as the plan, the CLI and the results show it."""
        return {"of": self.of, "label": self.label, "kind": KIND, "calls": self.calls,
                "samples": self.samples, "equal": self.equal, "note": self.note}


def _calls(n: int) -> str:
    return f"{n} call{'s' * (n != 1)}"


def _detail(samples: int, calls: int) -> str:
    """`N samples`; a capped or raised one says so."""
    return f"{samples} samples" if samples == calls else \
        f"{samples} samples, capped below {_calls(calls)}" if samples < calls else \
        f"{samples} samples, raised above {_calls(calls)}"


def _labelled(of: str, suffix: str, spare: int = 0) -> str:
    """`<of><suffix>`, `of` shortened with `…` so that the whole, and `spare` characters
    more, fit the label limit."""
    room = NAME_MAX - len(suffix) - spare
    return (of if len(of) <= room else of[:room - 1] + "…") + suffix


def _vote(resolved: Resolved, samples: int, suffix: str) -> dict[str, Any]:
    """The baseline vote beside a resolved configuration: `samples` plain voters on its
    seats' models in turn (`equal_compute` says why), labelled `<label><suffix>` (the
    configuration's label shortened with `…` when the whole would pass the label limit)."""
    seats = [seat for slot in resolved.config.seats.values() for seat in slot]
    label = _labelled(resolved.given.label or resolved.given.protocol, suffix)
    voters = [{"name": f"sample-{n + 1}", "model": seats[n % len(seats)].model,
               "temperature": seats[n % len(seats)].temperature} for n in range(samples)]
    return RunConfig.parse({"protocol": SPEC.name, "label": label, "model": seats[0].model,
                            "seats": {"voters": voters}}).stored()


def equal_compute(config: RunConfig | dict[str, Any]) -> Baseline | None:
    """The equal-compute vote beside `config` (None when `config` is itself a vote: it is
    its own baseline).

    Models: the voters take the models of the configuration's seats in turn (slot order, with
    each seat's temperature). A protocol's answer comes from different seats (a judge, a
    synthesiser, the last reviewer, every debater), so no one seat is "the answering model"
    in general; taking the seats in turn equals the answering seat's model whenever the
    configuration runs on one model (the usual case), and for a mixed configuration keeps the
    same models in the proportions they hold seats, so neither side of the comparison gets a
    stronger model. Voters are plain samples (`sample-1` ...): no persona, the vote's own
    prompt, so the baseline is self-consistency of the same model(s).
    """
    typed = RunConfig.parse(config)
    if typed.protocol == SPEC.name:
        return None
    resolved = resolve_config(typed)
    calls = resolved.estimate()["calls"]
    samples = min(max(calls, MIN_VOTERS), MAX_VOTERS)
    config = _vote(resolved, samples, f" · {KIND} {SPEC.name} ({_detail(samples, calls)})")
    return Baseline(typed.label or typed.protocol, calls, samples, config)


@dataclass(frozen=True)
class TokenBaseline:
    """The equal-tokens vote beside configuration `of`: `tokens` is what `of` spends per run
    (measured over `runs` stored runs; 0 runs: the preflight's estimate), `per_sample` what one
    vote sample spends (measured over `sample_runs` stored votes on the same model, else the
    estimate), `samples` the vote's voters and `config` the vote's configuration."""

    of: str
    tokens: float
    runs: int
    per_sample: float
    sample_runs: int
    samples: int
    config: dict[str, Any]

    @property
    def label(self) -> str:
        return str(self.config["label"])

    @property
    def ratio(self) -> float:
        """The baseline's tokens per run over the configuration's, as planned."""
        return self.samples * self.per_sample / self.tokens

    @property
    def equal(self) -> bool:
        """True when the vote's range does not bind: no sample count at all, inside it or
        outside, would come closer to the configuration's tokens."""
        whole = int(self.tokens // self.per_sample)
        unbounded = min({max(whole, 1), whole + 1},
                        key=lambda n: (abs(n * self.per_sample - self.tokens), n))
        return unbounded == self.samples

    @property
    def note(self) -> str:
        """One plain sentence: what was matched, from what measurements, and how closely."""
        source = (f"{self.of}'s mean over {self.runs} stored run{'s' * (self.runs != 1)}"
                  if self.runs else f"{self.of}'s estimate (no run of it measured yet)")
        sample = (f"{self.per_sample:,.0f} tokens per sample measured over "
                  f"{self.sample_runs} stored vote{'s' * (self.sample_runs != 1)}"
                  if self.sample_runs else
                  f"{self.per_sample:,.0f} tokens per sample estimated (no vote measured)")
        head = "equal-tokens" if self.equal else "NOT equal tokens (the vote's limits bind)"
        return (f"{head} baseline of {self.of}: {self.samples} samples x {sample} = "
                f"{self.ratio:.2f}x {source} of {self.tokens:,.0f} tokens per run")

    def as_dict(self) -> dict[str, Any]:
        return {"of": self.of, "label": self.label, "kind": TOKENS_KIND,
                "tokens": round(self.tokens, 1), "runs": self.runs,
                "per_sample": round(self.per_sample, 1), "sample_runs": self.sample_runs,
                "samples": self.samples, "ratio": round(self.ratio, 3), "equal": self.equal,
                "note": self.note, "config": self.config}


def _closest(tokens: float, per_sample: float) -> int:
    """The sample count in the vote's range whose tokens come closest to `tokens` (ties: the
    smaller count)."""
    return min(range(MIN_VOTERS, MAX_VOTERS + 1),
               key=lambda n: (abs(n * per_sample - tokens), n))


def equal_tokens(config: RunConfig | dict[str, Any], *, tokens: float | None = None,
                 runs: int = 0, per_sample: float | None = None, sample_runs: int = 0
                 ) -> TokenBaseline | None:
    """The equal-tokens vote beside `config` (None when `config` is itself a vote).

    `tokens`: the configuration's measured mean tokens per run over `runs` runs (None: the
    preflight's estimate); `per_sample`: one vote sample's measured mean tokens over
    `sample_runs` votes (None: the estimate of one call). The voters are the configuration's
    models in turn, as `equal_compute` explains.
    """
    typed = RunConfig.parse(config)
    if typed.protocol == SPEC.name:
        return None
    resolved = resolve_config(typed)
    planned = resolved.estimate()
    if tokens is None or tokens <= 0:
        tokens, runs = float(planned["tokens"]), 0
    if per_sample is None or per_sample <= 0:
        per_sample, sample_runs = float(planned["tokens"]) / max(planned["calls"], 1), 0
    samples = _closest(tokens, per_sample)
    ratio = samples * per_sample / tokens
    suffix = f" · {TOKENS_KIND} {SPEC.name} ({samples} samples, {ratio:.2f}x tokens" + \
        ("" if runs else ", estimated") + ")"
    return TokenBaseline(typed.label or typed.protocol, float(tokens), runs,
                         float(per_sample), sample_runs, samples, _vote(resolved, samples, suffix))


def achieved_tokens(pair: dict[str, Any], mine: float, theirs: float) -> str:
    """One sentence on an equal-tokens baseline (`TokenBaseline.as_dict`) in an experiment:
    the tokens per run it spent (`mine`) against its configuration's (`theirs`), the ratio
    achieved beside the one planned; NaN: not measured yet."""
    if mine != mine or theirs != theirs or not theirs:
        return (f"{pair['label']}: planned at {pair['ratio']:.2f}x {pair['of']}'s tokens per "
                "run; no completed runs of both yet to measure what it achieved.")
    return (f"{pair['label']}: achieved {mine / theirs:.2f}x {pair['of']}'s tokens per run "
            f"in this experiment ({mine:,.0f} against {theirs:,.0f}; planned "
            f"{pair['ratio']:.2f}x).")


SWAPPED = " · sides swapped"  # what a sides-swapped twin's label adds
CONSULTANCY_KIND = "consultancy"
CONSULTANCY_SUFFIX = " · consultancy"


def consultancy(config: RunConfig | dict[str, Any]) -> dict[str, Any] | None:
    """The consultancy baseline beside a debate configuration (Khan et al., ICML 2024): the
    same seats, models and judge, with `consultancy: true` (the proponent seat argues its side
    alone and the judge reads that one case), labelled `<label> · consultancy`; None for a
    configuration that is not a debate, or is already a consultancy. Its sides-swapped twin
    (the same seat arguing the other side) is planned beside it, so each side is consulted in
    turn. The pairing: `of`, `label`, `kind`, `note`."""
    typed = RunConfig.parse(config)
    if typed.protocol != "debate" or typed.options.get("consultancy"):
        return None
    of = typed.label or typed.protocol
    label = _labelled(of, CONSULTANCY_SUFFIX, len(SWAPPED))
    stored = typed.stored()
    stored.update(label=label, options={**stored.get("options", {}), "consultancy": True})
    return {"of": of, "label": label, "kind": CONSULTANCY_KIND, "config": stored,
            "note": f"consultancy baseline of {of}: the judge reads one debater's case alone "
                    "(the proponent seat, for and, sides swapped, against), scored like the "
                    "debate (Khan et al. 2024: judge accuracy with debate against "
                    "consultancy)"}


PLACEBO_KIND = "placebo"
PLACEBO_SUFFIX = " · placebo"


def placebo(config: RunConfig | dict[str, Any]) -> dict[str, Any] | None:
    """The placebo arm beside a configuration whose protocol shows agents each other's
    messages (DESIGN 2.13, the noise control of "The Cost of Consensus", arXiv 2605.00914):
    the same seats, options and prompts, labelled `<label> · placebo`; in its runs every
    message from another agent that a prompt carries is that agent's message of the same
    phase and round in the configuration's run on another question of the set (its donor,
    `engine.config.Donor`). None for a protocol that shows no peers, a consultancy (one seat
    argues alone) or a placebo arm itself.
    The pairing: `of`, `label`, `kind`, `note`, `config`."""
    typed = RunConfig.parse(config)
    of = typed.label or typed.protocol
    if not get_protocol(typed.protocol).shows_peers or of.endswith(PLACEBO_SUFFIX) or \
            typed.options.get("consultancy"):  # a consultant argues alone: it reads no peer
        return None
    label = _labelled(of, PLACEBO_SUFFIX, len(SWAPPED))
    stored = typed.stored()
    stored["label"] = label
    return {"of": of, "label": label, "kind": PLACEBO_KIND, "config": stored,
            "note": f"placebo arm of {of}: the same seats and prompts, each agent reading "
                    "the others' messages of the same round on another question of the set "
                    "(the noise control of arXiv 2605.00914)"}
