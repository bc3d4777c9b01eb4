"""A database URL that cannot be opened (a server that does not answer, a bad port, an
unsupported scheme) is one line naming its host and port, the password masked: exit 2 in
the CLI, and the same line on every page, never a traceback."""
from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from app import PAGES
from engine import ConfigError, Store
from engine.cli.main import main

APP = str(Path(__file__).resolve().parent.parent / "app.py")
BAD = {  # url -> what the line must say
    "postgresql+psycopg://ana:hunter22@127.0.0.1:1/parley": "(host 127.0.0.1, port 1)",
    "postgresql+psycopg://ana:hunter22@127.0.0.1:99999/parley": "port 99999",
    "mysql://ana:hunter22@db.example/parley": "the scheme 'mysql' is not supported",
}


@pytest.mark.parametrize("url", list(BAD))
def test_the_store_and_the_cli_say_it_in_one_line(url, capsys):
    with pytest.raises(ConfigError) as err:
        Store(url)
    said = str(err.value)
    assert BAD[url] in said and "hunter22" not in said and "***" in said
    assert "\n" not in said
    assert main(["runs", "--db", url]) == 2
    err_text = capsys.readouterr().err
    assert err_text.strip().count("\n") == 0 and BAD[url] in err_text
    assert "Traceback" not in err_text and "hunter22" not in err_text


@pytest.mark.parametrize("page", [path for path, _title, _icon in PAGES])
def test_every_page_says_it_in_one_line(page, monkeypatch):
    url = next(iter(BAD))
    monkeypatch.setenv("PARLEY_DB_URL", url)
    at = AppTest.from_file(APP, default_timeout=60).run()
    if page != "pages/home.py":
        at.switch_page(page).run()
    assert not at.exception, at.exception
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and "host 127.0.0.1, port 1" in errors[0].replace("\\", "")
    assert "hunter22" not in errors[0]
