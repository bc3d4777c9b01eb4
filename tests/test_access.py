"""Roles and the one check (engine/access.py, DESIGN section 5): who holds which role, how an
address is compared, and that a refusal says who, what and what it needs."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine import ConfigError, access
from engine.access import (LOCAL, NEEDS, SUBJECT_PREFIX, Actor, NotAllowed, Role, Roles, normalise,
                           require)

role_for = access.role_for

TABLE = {"alice@example.com": "admin", "@example.com": "analyst", "bob@example.com": "viewer",
         "@partner.org": "viewer"}


def test_an_address_beats_its_domain_and_a_domain_matches_exactly():
    assert role_for("alice@example.com", TABLE) is Role.ADMIN
    assert role_for("bob@example.com", TABLE) is Role.VIEWER  # below its domain's analyst
    assert role_for("carol@example.com", TABLE) is Role.ANALYST
    assert role_for("dan@partner.org", TABLE) is Role.VIEWER
    # no sub-domains, no look-alike suffixes
    assert role_for("eve@sub.example.com", TABLE) is None
    assert role_for("eve@badexample.com", TABLE) is None
    assert role_for("eve@example.com.evil", TABLE) is None


def test_unknown_missing_or_unverified_addresses_have_no_role_unless_a_default_says_so():
    for nobody in ("stranger@else.net", "", None, 42, "no-at-sign", "@example.com",
                   "alice@", "   "):
        assert role_for(nobody, TABLE) is None
    assert role_for("alice@example.com", TABLE, verified=False) is None
    assert role_for("alice@example.com", TABLE, verified=None) is Role.ADMIN  # no claim
    with_default = {**TABLE, "default": "viewer"}
    assert role_for("stranger@else.net", with_default) is Role.VIEWER
    assert role_for("alice@example.com", with_default) is Role.ADMIN
    assert role_for("", with_default) is None  # a default is for addresses, not for none


def test_the_quoted_local_part_trick_takes_the_domain_after_the_last_at():
    assert role_for('"alice@example.com"@evil.net', TABLE) is None
    assert role_for("x@evil.net@example.com", TABLE) is Role.ANALYST  # its domain is example


@pytest.mark.parametrize("table", [
    {"alice@example.com": "superuser"}, {"alice@example.com": 3}, {"example.com": "viewer"},
    {"@": "viewer"}, {"@a@b": "viewer"}, {"al ice@example.com": "viewer"}, ["alice"],
    {"": "viewer"}])
def test_a_broken_roles_table_is_refused_not_guessed(table):
    with pytest.raises(ConfigError, match=r"\[parley.roles\]"):
        Roles.parse(table)


def test_roles_order_and_what_each_may_do():
    viewer, analyst, admin = (Actor("v@x.org", r) for r in Role)
    nobody = Actor("n@x.org", None)
    assert [a for a in NEEDS if viewer.can(a)] == ["read runs"]
    assert {a for a in NEEDS if analyst.can(a)} == {"read runs", "start runs", "stop runs",
                                                    "run experiments", "label runs"}
    assert all(admin.can(a) for a in NEEDS) and all(LOCAL.can(a) for a in NEEDS)
    assert not any(nobody.can(a) for a in NEEDS)
    with pytest.raises(NotAllowed) as refused:
        require(viewer, "start runs")
    assert str(refused.value) == ("v@x.org (viewer) may not start runs: that needs the "
                                  "analyst role")
    assert isinstance(refused.value, PermissionError) and refused.value.needs is Role.ANALYST
    with pytest.raises(NotAllowed, match=r"n@x.org \(no role\) may not read runs"):
        require(nobody, "read runs")
    require(analyst, "start runs")  # allowed: returns quietly


# ------------------------------------------------------------------ Hypothesis over addresses
# A roles key starting "sub:" names a subject (SUBJECT_PREFIX), so a local part starting so is
# not an address the table can hold (unquoted, an address cannot hold a ":" anyway).
local_parts = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="@"),
                      min_size=1, max_size=20).filter(
    lambda s: not any(c.isspace() for c in s) and not s.lower().startswith(SUBJECT_PREFIX))
domains = st.from_regex(r"[a-z][a-z0-9-]{0,10}\.(com|org|net)", fullmatch=True)
spaces = st.sampled_from(["", " ", "\t", "\n ", "\u3000"])


def _ascii_case(text: str, flips: list[bool]) -> str:
    return "".join(c.upper() if c.isascii() and flip else c
                   for c, flip in zip(text, flips + [False] * len(text)))


@given(local_parts, domains, spaces, spaces, st.lists(st.booleans(), max_size=40))
def test_case_of_ascii_letters_and_surrounding_whitespace_never_change_a_role(
        local, domain, before, after, flips):
    address = f"{local}@{domain}"
    table = {address: "admin", f"@{domain}": "viewer"}
    typed = before + _ascii_case(address, flips) + after
    assert role_for(typed, table) is Role.ADMIN


@given(local_parts, local_parts, domains)
def test_two_different_addresses_never_share_an_address_entry(mine, theirs, domain):
    """Only ASCII case and outer whitespace are folded: a Unicode look-alike, a ß for ss or a
    different letter is another person (and gets only what the domain gives)."""
    table = {f"{mine}@{domain}": "admin"}
    same = normalise(mine) == normalise(theirs)
    assert (role_for(f"{theirs}@{domain}", table) is Role.ADMIN) is same


@given(st.text(max_size=60), st.dictionaries(st.text(max_size=30), st.sampled_from(
    ["viewer", "analyst", "admin"]), max_size=5))
def test_any_address_against_any_table_gives_a_role_none_or_a_config_error(email, table):
    try:
        roles = Roles.parse(table)
    except ConfigError:
        return
    found = roles.role_for(email)
    assert found is None or isinstance(found, Role)
    if found is not None:
        assert "@" in email and normalise(email).rpartition("@")[0]


def test_unicode_case_is_not_folded():
    table = {"straße@example.de": "admin", "ÉLODIE@example.fr": "admin"}
    assert role_for("strasse@example.de", table) is None
    assert role_for("STRAßE@EXAMPLE.DE", table) is Role.ADMIN  # ASCII letters fold only
    assert role_for("élodie@example.fr", table) is None  # É is not ASCII
    assert role_for("ÉLODIE@Example.FR", table) is Role.ADMIN


# ------------------------------------------------------------------ what a provider vouches for
UNVERIFIED = [False, "false", "False", "FALSE", 0, "0", 1, "1", "yes", "", " true", "true ",
              "t", [], {}, ["true"], 0.0, float("nan"), "\u0074rue\u200b"]


@pytest.mark.parametrize("claim", UNVERIFIED, ids=repr)
def test_an_unverified_address_in_any_spelling_gets_no_role(claim):
    """Providers send `email_verified` as a boolean or as text: "false", 0 and "0" said no
    and used to give the full role (only the boolean False was refused)."""
    table = {**TABLE, "default": "viewer"}
    assert role_for("alice@example.com", table, verified=claim) is None
    assert role_for("someone@else.net", table, verified=claim) is None  # nor the default


@pytest.mark.parametrize("claim", [None, True, "true", "TRUE", "True", "tRuE"])
def test_an_absent_or_true_claim_counts_as_verified(claim):
    assert role_for("alice@example.com", TABLE, verified=claim) is Role.ADMIN
    assert access.verified_claim(claim)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8)
    | st.sampled_from(["true", "True", "TRUE", "false", "False", "0", "1", "yes"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                max_size=3), max_leaves=6)


@given(json_values)
def test_any_claim_gives_the_role_only_when_absent_true_or_the_text_true(claim):
    vouched = claim is None or claim is True or (
        isinstance(claim, str) and claim.lower() == "true" and claim.isascii())
    assert (role_for("alice@example.com", TABLE, verified=claim) is Role.ADMIN) is vouched


def test_a_subject_entry_gives_its_role_whatever_the_address_says():
    """A provider whose e-mail claim the user controls: key the role on its subject."""
    table = {"sub:00u-Ada-42": "admin", "@example.com": "viewer"}
    assert role_for(None, table, subject="00u-Ada-42") is Role.ADMIN
    assert role_for("mallory@evil.net", table, verified="false",
                    subject="00u-Ada-42") is Role.ADMIN  # the subject, not the address
    assert role_for(None, table, subject="00u-ada-42") is None  # opaque: compared exactly
    assert role_for("ann@example.com", table, subject="00u-Other") is Role.VIEWER
    assert role_for("ann@example.com", {" sub: 00u-x ": "analyst"},
                    subject="00u-x") is Role.ANALYST  # outer spaces trimmed


@pytest.mark.parametrize("table, both", [
    ({"Ada@Example.com": "viewer", "ada@example.com": "admin"},
     ("Ada@Example.com", "ada@example.com")),
    ({"@example.com": "viewer", " @EXAMPLE.COM": "admin"}, ("@example.com", " @EXAMPLE.COM")),
    ({"default": "viewer", "Default": "admin"}, ("default", "Default")),
    ({"sub:x1": "viewer", "sub: x1": "admin"}, ("sub:x1", "sub: x1")),
])
def test_two_keys_for_one_entry_are_refused_naming_both(table, both):
    """They used to be both accepted, the last one winning."""
    with pytest.raises(ConfigError) as refused:
        Roles.parse(table)
    assert all(repr(key) in str(refused.value) for key in both)


@given(st.lists(st.tuples(st.sampled_from(["ada@example.com", "@example.com", "default",
                                           "bob@partner.org", "sub:abc"]),
                          st.lists(st.booleans(), max_size=20), spaces,
                          st.sampled_from(["viewer", "analyst", "admin"])),
                min_size=1, max_size=6))
def test_a_roles_table_is_read_the_same_whatever_the_case_or_refused_when_keys_collide(rows):
    table = {_ascii_case(key, flips) if not key.startswith("sub:") else key + pad: role
             for key, flips, pad, role in rows}
    compared = {}
    for written in table:
        key = normalise(written) if not written.startswith("sub:") else written.strip()
        compared.setdefault(key, []).append(written)
    collide = any(len(keys) > 1 for keys in compared.values())
    try:
        roles = Roles.parse(table)
    except ConfigError as exc:
        assert collide
        assert any(all(repr(k[:60]) in str(exc) for k in keys[:2])
                   for keys in compared.values() if len(keys) > 1)
        return
    assert not collide
    assert role_for("ada@example.com", table) is roles.role_for("ADA@example.com")


# ------------------------------------------------------------------ sign-in settings
@pytest.mark.parametrize("secrets, words", [
    ({"parley": {"roles": {"ada@example.com": "admin"}}}, "no [auth]"),
    ({"Auth": {"client_id": "x"}, "parley": {"roles": {"ada@example.com": "admin"}}},
     "[Auth] section, not [auth]"),
    ({"AUTH ": {"client_id": "x"}}, "not [auth]"),
    ({"parley": {"Roles": {}}}, "[parley.Roles] gives roles"),
])
def test_sign_in_settings_without_auth_are_a_problem(secrets, words):
    assert words in access.sign_in_problem(secrets)


@pytest.mark.parametrize("secrets", [
    {}, {"OPENAI_API_KEY": "sk-x"}, {"auth": {}, "parley": {"roles": {"a@b.c": "admin"}}},
    {"parley": {"other": 1}}, {"auth": {}, "Auth": {}}])
def test_no_sign_in_settings_or_auth_present_is_no_problem(secrets):
    assert access.sign_in_problem(secrets) == ""
