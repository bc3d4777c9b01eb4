"""The Home page (AppTest): providers without key values, demo runs made and removed."""
from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from engine import REGISTRY, Store
from engine.services.demo import demo_plan, model_configs
from engine.questions import DEMO
from apptest_helpers import poll

APP = str(Path(__file__).resolve().parent.parent / "app.py")
SECRET = "sk-test-never-shown-0123456789"


@pytest.fixture
def db_url(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'parley.db'}"
    monkeypatch.setenv("PARLEY_DB_URL", url)  # the store is cached per URL: no leaks
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    return url


def everything_shown(at: AppTest) -> str:
    parts = [str(e.value) for kind in ("markdown", "caption", "text", "success", "warning")
             for e in getattr(at, kind)]
    parts += [at.dataframe[i].value.to_csv() for i in range(len(at.dataframe))]
    return "\n".join(parts)


def test_home_shows_providers_and_makes_demo_runs(db_url):
    at = AppTest.from_file(APP, default_timeout=300).run()
    assert not at.exception, at.exception
    assert at.title[0].value.endswith("Parley")
    providers = at.dataframe[0].value.set_index("Provider")
    assert {"simulated", "openai", "anthropic", "ollama"} <= set(providers.index)
    assert providers.loc["openai", "API key"] == "present"
    assert providers.loc["anthropic", "API key"] == "missing (ANTHROPIC_API_KEY)"
    assert SECRET not in everything_shown(at)

    store = Store(db_url)
    assert store.runs().empty
    at.button(key="demo_run").click().run()
    assert not at.exception, at.exception
    poll(at, lambda a: bool(a.success))  # the demo runs in the background; the page polls
    demo = store.runs(tag="demo")
    assert len(demo) == len(demo_plan()) == len(DEMO) * (len(REGISTRY) + len(model_configs()))
    assert set(demo["protocol"]) == set(REGISTRY)
    assert set(demo["status"]) == {"completed"}
    assert demo["simulated"].all()
    assert all("demo" in tags for tags in demo["tags"])
    assert at.success and at.success[0].value.startswith(f"Stored {len(demo)} demo runs")
    at.run()  # the button no longer offers runs that exist
    assert at.button(key="demo_run").label == f"All {len(demo)} demo runs are stored"
    assert SECRET not in everything_shown(at)

    other = store.start_run("debate", "not a demo")  # removing demo runs keeps the others
    at.button(key="demo_remove").click().run()
    at.button(key="demo_remove_yes").click().run()  # removal asks first
    assert store.runs(tag="demo").empty
    assert list(store.runs()["id"]) == [other]
    assert at.success[0].value == f"Removed {len(demo)} demo runs."
