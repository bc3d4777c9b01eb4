"""The README's examples stay true: every import it shows works, and its simulated Python
example runs as written (the real-model line beside it needs a key, so it is only imported)."""
from __future__ import annotations

import re
from pathlib import Path

README = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"```python\n(.*?)```", README, re.S)


def test_every_import_the_readme_shows_works():
    imports = [line for block in BLOCKS for line in block.splitlines()
               if re.match(r"(from engine\S* import|import engine)", line)]
    assert imports
    for line in imports:
        exec(line, {})  # noqa: S102 - the README's own import lines


def test_the_simulated_python_example_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # Store() writes data/parley.db under the working directory
    block = next(b for b in BLOCKS if "run_panel" in b)
    simulated = block.split("# real")[0]
    scope: dict = {}
    exec(simulated, scope)  # noqa: S102
    result = scope["simulated"]
    assert all(turn.simulated for turn in result.turns)
    assert result.correct in (True, False)


def test_every_preset_the_readme_names_exists_and_every_preset_is_named():
    root = Path(__file__).resolve().parent.parent
    named = set(re.findall(r"presets/([\w.-]+\.yaml)", README))
    shipped = {p.name for p in (root / "presets").glob("*.yaml")}
    assert named and named == shipped
