"""The `run` command's flags read into a run: its configuration (a --config file, --model,
--base-url, --seat, --rounds, --option), its endpoint registry and its call policy
(--timeout-per-call, --retries), and the progress line each finished turn prints."""
from __future__ import annotations

import argparse
import os
from typing import Any

from engine.errors import SINGULAR, UNEXPLAINED
from engine.llm.policy import DEFAULTS, SPEC_FIELDS, CallPolicy, field_info
from engine.llm.policy import FIELDS as POLICY_FIELDS
from engine.models import ConfigError, Turn
from engine.yamlfile import load_mapping


def add_policy_flags(parser: argparse.ArgumentParser) -> None:
    """`--timeout-per-call S` and `--retries N` (run and experiment run), from the call
    policy's own table of its fields."""
    for name in SPEC_FIELDS:
        info = field_info(name)
        parser.add_argument(info["cli"], type=int if info["whole"] else float,
                            metavar="N" if info["whole"] else "S", help=f"{info['help']} "
                            f"(default: the endpoint's, else {getattr(DEFAULTS, name):g})")


def policy_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The call policy the flags give (only those given; the flags' destinations are the
    policy's field names), checked before any call by the policy's own rule, the error
    naming the flag."""
    given = {name: getattr(args, name, None) for name in SPEC_FIELDS}
    try:
        return CallPolicy.read(given).given()
    except ConfigError as exc:
        name = next(name for name in given if str(exc).startswith(name))
        raise ConfigError(field_info(name)["cli"] + str(exc).removeprefix(name),
                          exc.code) from None


def progress_line(turn: Turn) -> str:
    """One finished turn for the terminal: its final status (ok, or degraded with the kind of
    error) and the retries it took."""
    failure = turn.failure or UNEXPLAINED
    mark = "ok" if turn.ok else f"degraded ({SINGULAR.get(failure, failure)}): {turn.error}"
    retried = turn.attempts - 1
    tries = f" after {retried} retr{'y' if retried == 1 else 'ies'}" if retried > 0 else ""
    return f"  [{turn.index:>2}] {turn.phase:<16} {turn.seat:<14} {mark}{tries}"


def config_from_args(args: argparse.Namespace) -> dict[str, Any]:  # noqa: C901, PLR0912
    """A run configuration from `run`'s flags (a --config file first, flags on top)."""
    from engine.protocols import get_protocol
    spec = get_protocol(args.protocol)
    config: dict[str, Any] = (load_mapping(args.config, what="--config: ")
                              if args.config else {})
    config["protocol"] = spec.name
    config.setdefault("model", args.model)
    if args.model != "simulated":
        config["model"] = args.model
    if args.base_url:
        config["base_url"] = args.base_url
    if not isinstance(config.get("seats") or {}, dict) or not isinstance(
            config.get("options") or {}, dict):
        raise ConfigError("--config: seats must map slot names to seats and options must map "
                          "option names to values", "input")
    seats = dict(config.get("seats") or {})
    slots = {slot.name: slot for slot in spec.slots}
    for item in args.seat:
        name, sep, model = item.partition("=")
        if not sep or not name or not model:
            raise ConfigError(f"--seat takes NAME=SPEC, got {item!r}", "input")
        if name in slots and not slots[name].many:
            seats[name] = {**(seats.get(name) or {}), "model": model}
            continue
        for slot in (s for s in spec.slots if s.many):  # a list slot, or a seat in it by name
            entries = [dict(e) for e in (seats.get(slot.name) or slot.defaults)]
            hits = [e for e in entries if name in (slot.name, e.get("name"))]
            for entry in hits:
                entry["model"] = model
            if hits:
                seats[slot.name] = entries
                break
        else:
            names = list(slots) + [e.get("name", "") for s in spec.slots if s.many
                                   for e in (seats.get(s.name) or s.defaults)]
            raise ConfigError(f"--seat {name}: {spec.name} has no seat {name!r}; seats are "
                              f"{', '.join(n for n in names if n)}", "input")
    config["seats"] = seats
    options = dict(config.get("options") or {})
    if args.rounds is not None:
        if spec.rounds_option is None:
            raise ConfigError(f"--rounds: {spec.name} has no rounds; its options are "
                              f"{', '.join(o.name for o in spec.options) or 'none'}", "input")
        options[spec.rounds_option] = args.rounds
    known = {option.name for option in spec.options}
    for item in args.option:
        name, sep, raw = item.partition("=")
        if not sep or not name:
            raise ConfigError(f"--option takes NAME=VALUE, got {item!r}", "input")
        if name in POLICY_FIELDS:  # a run option that is a flag, not a protocol option
            raise ConfigError(f"--option {name}: {name} is not a protocol option; use "
                              f"{field_info(name)['cli']} {raw}", "input")
        if name not in known:
            raise ConfigError(f"--option {name}: {spec.name} has no option {name!r}; "
                              + (f"options are {', '.join(sorted(known))}" if known else
                                 f"{spec.name} takes no options"), "input")
        options[name] = _option_value(raw)
    if getattr(args, "swap_sides", False):
        if "swap_sides" not in known:
            raise ConfigError(f"--swap-sides: a {spec.name} has no sides to swap", "input")
        options["swap_sides"] = True
    config["options"] = options
    if args.label:
        config["label"] = args.label
    if getattr(args, "order_seed", None) is not None:
        config["order_seed"] = args.order_seed
    return config


def order_line(result: Any) -> str:
    """The order the run presented its seats in, and who argued what where sides were
    argued: `order: opponent, proponent; proponent argued against, opponent argued for`."""
    sides = getattr(result, "sides", None) or {}
    argued = "; " + ", ".join(f"{seat} argued {side}" for seat, side in sides.items()) \
        if sides else ""
    return f"order: {', '.join(result.order)}{argued}"


def store_from_args(args: argparse.Namespace) -> Any:
    """The store a command's `--db` names (`engine.protocols.storing.Store`: opened,
    migrated and its old rows back-filled), imported when a command opens it. Without one:
    `PARLEY_DB_URL` from the environment (read by the store itself), else from
    `.streamlit/secrets.toml`, as the app reads it."""
    from engine.llm.secretsfile import load_secrets
    from engine.protocols.storing import Store
    url = getattr(args, "db", None)
    if not url and not os.environ.get("PARLEY_DB_URL"):
        secret = load_secrets().get("PARLEY_DB_URL")
        url = secret.strip() if isinstance(secret, str) and secret.strip() else None
    return Store(url)


def endpoints_from_args(args: argparse.Namespace) -> Any:
    """The CLI's endpoint registry: the environment's and `.streamlit/secrets.toml`'s (as the
    app's), plus `--base-url` (typed by the operator, so it counts as registered and receives
    the provider's key)."""
    from engine.llm.endpoints import EndpointRegistry
    from engine.llm.secretsfile import load_secrets
    registry = EndpointRegistry.from_settings(os.environ, load_secrets(), allow_free_urls=True)
    if getattr(args, "base_url", None):
        registry.register(args.base_url, "cli")
    return registry


def _option_value(raw: str) -> Any:
    """A command-line option value: a whole number, a number, `none`, true / false, or text."""
    if raw.strip().lower() == "none":
        return None
    if raw.strip().lower() in ("true", "false"):
        return raw.strip().lower() == "true"
    for parse in (int, float):
        try:
            return parse(raw)
        except ValueError:
            pass
    return raw
