"""The README's and the docs' examples stay true: every import they show works, the simulated
Python example runs as written (the real-model line beside it needs a key, so it is only
imported), and the paper presets the docs name are exactly those shipped."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
BLOCKS = [block for page in PAGES
          for block in re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), re.S)]
REPRODUCE = (ROOT / "docs" / "reproduce.md").read_text(encoding="utf-8")


def test_every_import_the_docs_show_works():
    imports = [line for block in BLOCKS for line in block.splitlines()
               if re.match(r"(from engine\S* import|import engine)", line)]
    assert imports
    for line in imports:
        exec(line, {})  # noqa: S102 - the docs' own import lines


def test_the_simulated_python_example_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    # Store() opens the project's data/parley.db from any folder: the test's own instead
    monkeypatch.setenv("PARLEY_DB_URL", f"sqlite:///{tmp_path / 'parley.db'}")
    block = next(b for b in BLOCKS if "run_panel" in b)
    simulated = block.split("# real")[0]
    scope: dict = {}
    exec(simulated, scope)  # noqa: S102
    result = scope["simulated"]
    assert all(turn.simulated for turn in result.turns)
    assert result.correct in (True, False)


def test_every_preset_the_docs_name_exists_and_every_preset_is_named():
    named = set(re.findall(r"presets/([\w.-]+\.yaml)", REPRODUCE))
    shipped = {p.name for p in (ROOT / "presets").glob("*.yaml")}
    assert named and named == shipped


def test_the_default_store_is_the_project_s_from_any_folder(tmp_path, monkeypatch):
    """The app and `Store()` in a Python session started elsewhere open the same file."""
    from engine.store.database import default_url
    monkeypatch.chdir(tmp_path)
    assert default_url() == f"sqlite:///{(ROOT / 'data' / 'parley.db').as_posix()}"
    assert "pip install -e ." in (ROOT / "docs" / "python.md").read_text(encoding="utf-8")
