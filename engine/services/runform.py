"""The Run page's configuration form, as plain functions: seat pickers from library names,
a configuration built from them, and how each protocol option is shown and checked.

Pages call them as `runform.build_config` ...; the library entries they read are
`engine.services.library`'s.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from engine.config import RunConfig
from engine.llm.policy import DEFAULTS, CallPolicy, sentence
from engine.llm.policy import FIELDS as POLICY_FIELDS
from engine.models import ConfigError
from engine.protocols import Resolved, check_options, get_protocol, prompt_templates
from engine.services.library import entries, find
from engine.text import fold_name

if TYPE_CHECKING:
    from engine.llm.endpoints import EndpointRegistry
    from engine.store import Store

AS_SAVED = "(as saved)"  # a seat's persona text that matches no library persona
# The Run page's default model: the simulated model at about a second a call, so a first run
# can be watched turn by turn (at no latency a panel is over in 0.4 s). Tests, benchmarks
# and saved configurations that name their model keep their own pace.
PACED_MODEL = "simulated?latency=1"


def slot_choices(store: Store, protocol: str, config: Mapping[str, Any] | None = None
                 ) -> dict[str, list[dict[str, str]]]:
    """What a page's seat pickers start from: per slot, a list of choices
    `{name, persona, role, model, persona_text}` with library names where they match.

    Seats come from `config` when it has the slot, else from the slot's defaults (also for an
    optional slot, so that a page can offer it pre-filled; `slot_included` says whether it is
    in use).
    """
    spec = get_protocol(protocol)
    seats = (config or {}).get("seats") or {}
    seats = seats if isinstance(seats, Mapping) else {}  # a malformed save: start afresh
    personas = entries(store, "persona")
    out: dict[str, list[dict[str, str]]] = {}
    for slot in spec.slots:
        given = seats.get(slot.name)
        defaults = given is None
        if defaults:
            given = list(slot.defaults) or [{}]
        items = given if isinstance(given, list) else [given]
        out[slot.name] = [_choice(item, slot.name, personas, defaults) for item in items]
    return out


def slot_included(slot: Any, config: Mapping[str, Any] | None) -> bool:
    """Whether an optional slot is in use in `config` (a run leaves it out by default)."""
    seats = (config or {}).get("seats") or {}
    return not slot.optional or (isinstance(seats, Mapping) and slot.name in seats)


def _choice(item: Any, slot: str, personas: list[dict[str, Any]],
            defaults: bool = False) -> dict[str, str]:
    """One seat picker's start. `name` is what the user typed, "" when the seat's name
    follows its persona: a slot's default name, or a stored name that is its persona's own,
    was never typed (`default_name` keeps a default that is not a persona's, such as a
    roundtable's Ada, for a seat without one)."""
    item = {"model": item} if isinstance(item, str) else dict(item) if isinstance(
        item, Mapping) else {}
    text = str(item.get("persona") or "")
    wanted = str(item.get("persona_name") or "")
    match = next((p["name"] for p in personas if wanted and p["name"] == wanted), "") or \
        next((p["name"] for p in personas if text and p.get("prompt", "").strip() == text.strip()),
             "")
    persona = match or (AS_SAVED if text else "")
    name = str(item.get("name") or "").strip()
    own = bool(match) and fold_name(name) == fold_name(match)
    return {"name": "" if defaults or own or not name else name,
            "default_name": "" if own or not defaults else name, "persona": persona,
            "persona_text": text if persona == AS_SAVED else "",
            "role": str(item.get("role") or ""), "model": str(item.get("model") or ""),
            # not a widget: kept as saved, so loading a configuration never drops it
            "temperature": item.get("temperature")}


def seat_name(slot: str, *, name: str = "", persona: str = "", default_name: str = "") -> str:
    """A seat's name: what the user typed, else its persona's name, else the slot's default
    name for the seat, else the slot's name."""
    return ((name or "").strip() or (persona if persona and persona != AS_SAVED else "")
            or (default_name or "").strip() or slot)


def seat(store: Store, slot: str, *, name: str = "", persona: str = "", role: str = "",
         model: str = "", persona_text: str = "", temperature: Any = None,
         default_name: str = "") -> dict[str, Any]:
    """A seat dict for a configuration from library names, named by `seat_name` (a name
    not typed follows the persona). The persona's prompt and icon are copied in, so a saved
    configuration does not change when the persona is edited later; `persona=AS_SAVED`
    keeps `persona_text` as it is; the persona's declared simulated traits are copied too,
    with its role's over them (what the simulated model reads of both); a `temperature` is
    kept as given (the configuration's check refuses one that is not a number)."""
    out: dict[str, Any] = {"name": seat_name(slot, name=name, persona=persona,
                                             default_name=default_name)}
    if model and model.strip():
        out["model"] = model.strip()
    if persona == AS_SAVED:
        out["persona"] = persona_text
    elif persona:
        found = find(store, "persona", persona)
        if found is None:
            raise ConfigError(f"{slot}: there is no persona named {persona!r} in the library",
                              "input")
        out.update(persona=found.get("prompt", ""), persona_name=persona,
                   icon=found.get("icon", ""))
        if found.get("traits"):
            out["traits"] = dict(found["traits"])
    if role and role.strip():
        out["role"] = role.strip()
        played = find(store, "role", role.strip()) or {}
        if not out.get("icon"):
            out["icon"] = played.get("icon", "")
        if played.get("traits"):  # a role's declared trait overrides its persona's
            out["traits"] = {**out.get("traits", {}), **played["traits"]}
    if temperature is not None:
        out["temperature"] = temperature
    return out


def build_config(store: Store, protocol: str,
                 choices: Mapping[str, Sequence[Mapping[str, str]]], *,
                 model: str = "simulated", options: Mapping[str, Any] | None = None,
                 prompts: Mapping[str, str] | None = None, label: str = "",
                 order_seed: int | None = None, adversary: Mapping[str, Any] | None = None
                 ) -> RunConfig:
    """A configuration from a page's seat choices (every slot a list of seats); `order_seed`
    None keeps the configured order (DESIGN 2.10).

    A list slot takes every choice; a single slot its first, or none when the list is empty.
    """
    spec = get_protocol(protocol)
    seats: dict[str, Any] = {}
    taken = {fold_name(str(c.get("name") or "")) for slot in spec.slots
             for c in choices.get(slot.name, []) if str(c.get("name") or "").strip()}
    for slot in spec.slots:
        made = []
        for c in choices.get(slot.name, [])[:None if slot.many else 1]:
            made.append(seat(store, slot.name, temperature=c.get("temperature"), **{
                k: str(v or "") for k, v in c.items() if k in (
                    "name", "persona", "role", "model", "persona_text", "default_name")}))
            if not str(c.get("name") or "").strip():  # a name that follows: made unique
                made[-1]["name"] = _unique(made[-1]["name"], taken)
        if made:
            seats[slot.name] = made
    config: dict[str, Any] = {"protocol": spec.name, "model": (model or "").strip() or
                              "simulated", "seats": seats,
                              "options": dict(options or {}), "prompts": dict(prompts or {})}
    if label and label.strip():
        config["label"] = label.strip()
    if order_seed is not None:
        config["order_seed"] = order_seed
    if adversary:  # a saved configuration's planted adversary, kept as saved
        config["adversary"] = dict(adversary)
    return RunConfig.parse(config)


def _unique(name: str, taken: set[str]) -> str:
    """`name`, or `name 2`, `name 3` ... when another seat has it (two seats on one
    persona); the name taken is added to `taken`."""
    out, number = name, 2
    while fold_name(out) in taken:
        out, number = f"{name} {number}", number + 1
    taken.add(fold_name(out))
    return out


def option_kind(option: Any) -> str:
    """How a page asks for an option: `bool`, `int`, `float` or `text` (from its default)."""
    return {bool: "bool", int: "int", float: "float"}.get(type(option.default), "text")


def option_value(option: Any, value: Any) -> Any:
    """A page's widget value as the option's value: empty text means `None` for an option
    whose default is `None`."""
    if option_kind(option) == "text" and isinstance(value, str):
        return None if option.default is None and not value.strip() else value
    return value


def option_problem(protocol: str, option: Any, value: Any) -> str:
    """Why a saved option value cannot be shown by the form's widget for it ("" when it can):
    out of the option's range, or not of its kind. The form shows such a value and refuses
    it, never silently replacing it."""
    kind = option_kind(option)
    if kind == "bool" and not isinstance(value, bool):
        return f"{option.name} must be true or false, got {value!r}"
    if kind == "float" and (isinstance(value, bool) or not isinstance(value, (int, float))):
        return f"{option.name} must be a number, got {value!r}"
    if kind == "int" and option.minimum is None and option.maximum is None and (
            isinstance(value, bool) or not isinstance(value, int)):
        return f"{option.name} must be a whole number, got {value!r}"
    try:
        check_options(get_protocol(protocol), {option.name: value})
    except ConfigError as exc:
        return str(exc)
    return ""


def prompt_overrides(protocol: str, edited: Mapping[str, str]) -> dict[str, str]:
    """The edited templates that differ from the protocol's defaults."""
    defaults = prompt_templates(protocol)
    return {name: text for name, text in edited.items()
            if name in defaults and text.strip() != defaults[name]["template"].strip()}


# ---------------------------------------------------------------------- call policy
def with_call_policy(config: Resolved, values: Mapping[str, Any], defaults: CallPolicy
                     ) -> Resolved:
    """`config` with the call policy a form gives: each field that differs from what the
    seats' endpoints (or the defaults) would use is kept on the configuration, so the run
    and a Re-run of it keep it; a field left at that value is unset (the endpoint then
    decides, as before). Checked as a run checks it (`ConfigError` names the field); the
    seats are not resolved again."""
    changed = {name: value for name in POLICY_FIELDS
               if (value := values.get(name)) is not None and value != getattr(defaults, name)}
    return config.with_policy(CallPolicy.read(changed))


def policy_line(config: Mapping[str, Any], endpoints: EndpointRegistry | None = None) -> str:
    """A run's call policy in one line: per-call timeout, retries and calls at once, each
    with where it comes from (this run's configuration, an endpoint, or the default)."""
    from engine.reports.timing import policy_defaults
    try:
        defaults, sources = policy_defaults(config, endpoints)
    except ConfigError:  # a stored run this session may not call: its values, no endpoint
        defaults, sources = DEFAULTS, {}
    try:
        given = CallPolicy.read(config)
    except ConfigError:  # a stored value this version refuses: shown as the defaults' words
        given = CallPolicy()
    return sentence(given, defaults, sources)
