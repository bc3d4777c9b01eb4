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

A signed-in address with no matching entry and no `default` has no role: it sees a "not
authorised" page and nothing else. An address is compared after trimming whitespace and
lower-casing ASCII letters only (`normalise`): no Unicode folding, so "ß" never matches
"ss" and a look-alike letter never matches the Latin one. A domain entry matches the text
after the address's last "@". Without `[auth]` there is one user, `LOCAL` (the operator on
the machine, the CLI too), who is admin; the CLI records its runs and experiments as started
by `cli:` and the operating-system user (`cli_user`).

Every service that changes something takes an `actor` and calls `require` before it does
anything; the pages hide or disable what a role cannot use, but the services refuse it
either way (`NotAllowed`). The module is pure: no Streamlit, no store.
"""
from __future__ import annotations

import enum
import getpass
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

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


class NotAllowed(PermissionError):
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


@dataclass(frozen=True)
class Roles:
    """`[parley.roles]` read and checked: addresses, domains and the default."""

    addresses: Mapping[str, Role]
    domains: Mapping[str, Role]
    default: Role | None = None

    @classmethod
    def parse(cls, table: Any) -> Roles:
        """The roles of a `[parley.roles]` table; `ConfigError` for anything it cannot read
        (a broken table lets nobody in rather than guessing)."""
        if table is None:
            return cls({}, {})
        if not isinstance(table, Mapping):
            raise ConfigError("[parley.roles] must be a table of address = role", "input")
        addresses: dict[str, Role] = {}
        domains: dict[str, Role] = {}
        default = None
        for raw_key, value in table.items():
            role = Role.parse(value)
            key = normalise(str(raw_key))
            if key == "default":
                default = role
            elif key.startswith("@") and len(key) > 1 and "@" not in key[1:]:
                domains[key[1:]] = role
            elif not key.startswith("@") and "@" in key[1:-1] and \
                    not any(c.isspace() for c in key):
                addresses[key] = role
            else:
                raise ConfigError(f"[parley.roles]: {str(raw_key)[:60]!r} is neither an "
                                  "address (name@example.com), a domain (@example.com) nor "
                                  "default", "input")
        return cls(addresses, domains, default)

    def role_for(self, email: Any, verified: Any = True) -> Role | None:
        """The role of a signed-in address: its own entry, else its domain's, else the
        default; None for no address, or one the provider says is not verified."""
        if not isinstance(email, str) or verified is False:
            return None
        address = normalise(email)
        local, at, domain = address.rpartition("@")
        if not at or not local or not domain:
            return None
        if address in self.addresses:
            return self.addresses[address]
        if domain in self.domains:
            return self.domains[domain]
        return self.default


def role_for(email: Any, table: Any, verified: Any = True) -> Role | None:
    """The role `[parley.roles]` (`table`) gives `email` (see `Roles.role_for`)."""
    return Roles.parse(table).role_for(email, verified)
