"""Who may do what (DESIGN section 5): three roles, who holds which, and the one check.

When `.streamlit/secrets.toml` has Streamlit's `[auth]` section, the app signs people in
(`st.login`, OIDC) and `[parley.roles]` gives each signed-in e-mail address a role:

    [parley.roles]
    "alice@example.com" = "admin"      # one address
    "@example.com" = "analyst"         # everyone at this domain (exactly; not sub.example.com)
    "bob@example.com" = "viewer"       # an address beats its domain, either way round
    default = "viewer"                 # optional: every other signed-in address

- `viewer` reads: runs, transcripts, Insights, experiments' results, the library, exports.
- `analyst` also starts and stops runs, re-runs, experiments and the demo, and labels runs.
- `admin` also deletes runs, imports, and edits the library (personas, roles, saved
  configurations).

    "sub:00u1a2b3c4" = "admin"         # the provider's subject (`sub` claim), exactly

A signed-in address with no matching entry and no `default` has no role: it sees a "not
authorised" page and nothing else. An address is compared after trimming whitespace and
lower-casing ASCII letters only (`normalise`): no Unicode folding, so "ß" never matches
"ss" and a look-alike letter never matches the Latin one. A domain entry matches the text
after the address's last "@". Two keys that are one entry once compared ("Ada@x.org" and
"ada@x.org") are refused, naming both, rather than letting the last one win.

An address is only as good as the provider that vouches for it: its `email_verified` claim
is honoured as sent, and anything but an absent claim, `True` or the text "true" (any case)
means not verified, which gives no role (providers send the claim as a boolean or as text:
"false", "0", 0 are all refusals). A provider that sends no claim at all is trusted as it
is; for one whose e-mail claim the user controls, key the roles on its subject instead
(`sub:` entries, matched exactly, beat every address entry).

Without `[auth]` there is one user, `LOCAL` (the operator on the machine, the CLI too), who
is admin; the CLI records its runs and experiments as started by `cli:` and the
operating-system user (`cli_user`). A sign-in setting without `[auth]` (a `[parley.roles]`
table, or an `[Auth]` spelt otherwise) is refused (`sign_in_problem`): served as it is, it
would be an open admin app to whoever reaches it.

Every service that changes something takes an `actor` and calls `require` before it does
anything; the pages hide or disable what a role cannot use, but the services refuse it
either way (`NotAllowed`). The module is pure: no Streamlit, no store.
"""
from __future__ import annotations

import enum
import getpass
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.errors import ParleyError
from engine.models import ConfigError


class Role(enum.IntEnum):
    """A role; each includes what the ones below it may do."""

    VIEWER = 1
    ANALYST = 2
    ADMIN = 3

    @property
    def title(self) -> str:
        return self.name.lower()

    @classmethod
    def parse(cls, value: Any) -> Role:
        """A role from its name ("viewer", "analyst", "admin", any case); `ConfigError`
        otherwise."""
        name = str(value).strip().upper() if isinstance(value, str) else ""
        if name not in cls.__members__:
            raise ConfigError(f"[parley.roles]: {str(value)[:40]!r} is not a role (viewer, "
                              "analyst or admin)", "input")
        return cls[name]


# What each action needs: the pages' captions and the services' checks read this one table.
NEEDS: dict[str, Role] = {
    "read runs": Role.VIEWER,
    "start runs": Role.ANALYST,
    "stop runs": Role.ANALYST,
    "run experiments": Role.ANALYST,
    "label runs": Role.ANALYST,
    "delete runs": Role.ADMIN,
    "import": Role.ADMIN,
    "edit the library": Role.ADMIN,
}


@dataclass(frozen=True)
class Actor:
    """Who is acting: a signed-in e-mail address (or "local") and its role (None: none)."""

    user: str
    role: Role | None

    def can(self, action: str) -> bool:
        """True when this actor may do `action` (a key of `NEEDS`)."""
        return self.role is not None and self.role >= NEEDS[action]

    @property
    def role_title(self) -> str:
        return self.role.title if self.role is not None else "no role"


LOCAL = Actor("local", Role.ADMIN)  # no [auth]: the single local user, and the CLI
CLI_PREFIX = "cli"  # a CLI run's `started_by`: "cli:" and the operating-system user


def cli_user(user: str | None = None) -> str:
    """Who a CLI command runs as, for a run's `started_by`: `cli:` and the operating-system
    user (`getpass.getuser()`, or `user` when given), or plain `cli` when the system cannot
    say. The CLI acts as `LOCAL` (admin); this only records where a run came from."""
    if user is None:
        try:
            user = getpass.getuser()
        except (OSError, KeyError, ImportError):  # no LOGNAME/USER and no password entry
            user = ""
    name = " ".join(str(user).split())[:100]
    return f"{CLI_PREFIX}:{name}" if name else CLI_PREFIX


class NotAllowed(ParleyError, PermissionError):
    """An action this actor's role does not allow; its text says who, what and which role it
    needs."""

    def __init__(self, actor: Actor, action: str):
        self.actor, self.action, self.needs = actor, action, NEEDS[action]
        super().__init__(f"{actor.user} ({actor.role_title}) may not {action}: that needs "
                         f"the {self.needs.title} role")


def require(actor: Actor, action: str) -> None:
    """Raise `NotAllowed` unless `actor` may do `action` (a key of `NEEDS`)."""
    if not actor.can(action):
        raise NotAllowed(actor, action)


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def normalise(address: str) -> str:
    """An address as compared: whitespace trimmed, ASCII letters lower-cased, nothing else."""
    return address.strip().translate(_ASCII_LOWER)


SUBJECT_PREFIX = "sub:"  # a roles key naming the provider's subject (`sub` claim)


def verified_claim(verified: Any) -> bool:
    """True when a provider's `email_verified` claim, as sent, vouches for the address: the
    claim absent (None), `True`, or the text "true" in any ASCII case. Anything else ("false",
    "0", 0, "yes", a list ...) does not: a claim that cannot be read is not a yes."""
    if verified is None or verified is True:
        return True
    return isinstance(verified, str) and verified.translate(_ASCII_LOWER) == "true"


@dataclass(frozen=True)
class Roles:
    """`[parley.roles]` read and checked: subjects, addresses, domains and the default."""

    addresses: Mapping[str, Role]
    domains: Mapping[str, Role]
    default: Role | None = None
    subjects: Mapping[str, Role] = field(default_factory=dict)

    @classmethod
    def parse(cls, table: Any) -> Roles:
        """The roles of a `[parley.roles]` table; `ConfigError` for anything it cannot read
        (a broken table lets nobody in rather than guessing), including two keys that are
        one entry once compared (both named)."""
        if table is None:
            return cls({}, {})
        if not isinstance(table, Mapping):
            raise ConfigError("[parley.roles] must be a table of address = role", "input")
        addresses: dict[str, Role] = {}
        domains: dict[str, Role] = {}
        subjects: dict[str, Role] = {}
        default = None
        seen: dict[str, str] = {}  # the compared key -> the key as written
        for raw_key, value in table.items():
            role = Role.parse(value)
            written = str(raw_key)
            key = normalise(written)
            if key.startswith(SUBJECT_PREFIX):  # a subject is opaque: compared exactly
                key = SUBJECT_PREFIX + written.strip()[len(SUBJECT_PREFIX):].strip()
            if key in seen:
                raise ConfigError(f"[parley.roles]: {seen[key][:60]!r} and {written[:60]!r} "
                                  "are the same entry (keys are compared after trimming "
                                  "spaces and lower-casing ASCII letters); keep one", "input")
            seen[key] = written
            if key == "default":
                default = role
            elif key.startswith(SUBJECT_PREFIX) and len(key) > len(SUBJECT_PREFIX):
                subjects[key[len(SUBJECT_PREFIX):]] = role
            elif key.startswith("@") and len(key) > 1 and "@" not in key[1:]:
                domains[key[1:]] = role
            elif not key.startswith("@") and "@" in key[1:-1] and \
                    not any(c.isspace() for c in key):
                addresses[key] = role
            else:
                raise ConfigError(f"[parley.roles]: {written[:60]!r} is neither an address "
                                  "(name@example.com), a domain (@example.com), a subject "
                                  "(sub:ID) nor default", "input")
        return cls(addresses, domains, default, subjects)

    def role_for(self, email: Any, verified: Any = None, subject: Any = None) -> Role | None:
        """The role of a signed-in user: its subject's entry (`sub` claim) when there is one;
        else its address's own entry, its domain's, or the default; None for no address, or
        one the provider does not vouch for (`verified_claim`)."""
        if isinstance(subject, str) and subject.strip() in self.subjects:
            return self.subjects[subject.strip()]
        if not isinstance(email, str) or not verified_claim(verified):
            return None
        address = normalise(email)
        local, at, domain = address.rpartition("@")
        if not at or not local or not domain:
            return None
        return self.addresses.get(address, self.domains.get(domain, self.default))


def role_for(email: Any, table: Any, verified: Any = None, subject: Any = None
             ) -> Role | None:
    """The role `[parley.roles]` (`table`) gives `email` (see `Roles.role_for`): `verified` is
    the provider's `email_verified` claim as sent (None: absent)."""
    return Roles.parse(table).role_for(email, verified, subject)


def sign_in_problem(secrets: Mapping[str, Any]) -> str:
    """Why the secrets' sign-in settings cannot be served ("" when they can): a roles table
    (or any `[parley]` sign-in setting) with no `[auth]` section to sign anyone in, or an
    `[auth]` section spelt otherwise (`[Auth]`). Either way the app would serve everyone as
    the local admin, so every page refuses instead and says this."""
    if "auth" in secrets:
        return ""
    misspelt = [str(k) for k in secrets if str(k).strip().lower() == "auth"]
    if misspelt:
        return (f"the secrets have a [{misspelt[0][:40]}] section, not [auth] (lower case): "
                "sign-in is not on. Rename it [auth], or remove it to run Parley as a local "
                "single-user tool")
    parley = secrets.get("parley")
    roles = [str(k) for k in parley if str(k).strip().lower() == "roles"] \
        if isinstance(parley, Mapping) else []
    if roles:
        return (f"[parley.{roles[0][:40]}] gives roles, but the secrets have no [auth] "
                "section to sign anyone in: served as it is, everyone would be the local "
                "admin. Add Streamlit's [auth] section (docs/exposing.md), or remove the roles "
                "to run Parley as a local single-user tool")
    return ""
