"""Equal-compute baselines: beside a configuration, the self-consistency vote that makes the
same number of model calls, so "the debate beat the vote" is never 7 calls against 3.

The baseline is a vote of N independent samples, N = the configuration's calls per run when
nothing fails (`estimate`), within the vote's `MIN_VOTERS..MAX_VOTERS`. When that range binds,
the baseline is not equal compute and says so in its label and its note, never silently.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.config import RunConfig
from engine.protocols import estimate, resolve_config
from engine.protocols.vote import MAX_VOTERS, MIN_VOTERS, SPEC
from engine.text import NAME_MAX

KIND = "equal-compute"  # the experiment spec's `baseline:` value


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
        return {"of": self.of, "label": self.label, "calls": self.calls,
                "samples": self.samples, "equal": self.equal, "note": self.note}


def _calls(n: int) -> str:
    return f"{n} call{'s' * (n != 1)}"


def _label(of: str, samples: int, calls: int) -> str:
    """`<of> · equal-compute vote (N samples)`; a capped one says so. The configuration's
    label is shortened (with `…`) when the whole would pass the label limit."""
    detail = f"{samples} samples" if samples == calls else \
        f"{samples} samples, capped below {_calls(calls)}" if samples < calls else \
        f"{samples} samples, raised above {_calls(calls)}"
    suffix = f" · {KIND} {SPEC.name} ({detail})"
    room = NAME_MAX - len(suffix)
    return (of if len(of) <= room else of[:room - 1] + "…") + suffix


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
    seats = [seat for slot in resolved.seats.values() for seat in slot]
    calls = estimate(typed)["calls"]
    samples = min(max(calls, MIN_VOTERS), MAX_VOTERS)
    of = typed.label or typed.protocol
    voters = [{"name": f"sample-{n + 1}", "model": seats[n % len(seats)].model,
               "temperature": seats[n % len(seats)].temperature} for n in range(samples)]
    vote = RunConfig.parse({"protocol": SPEC.name, "label": _label(of, samples, calls),
                            "model": seats[0].model, "seats": {"voters": voters}})
    return Baseline(of, calls, samples, vote.stored())
