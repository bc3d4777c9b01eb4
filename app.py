"""Parley: the Streamlit entry. Settings are read once here and handed to the pages.

Run it with `streamlit run app.py`. Streamlit finds the `st.App` at the end of this file, so
the server imports this module once as it starts (and warms itself, see `warm`) and then runs
this file as every session's script (`main`). A page is listed only when its file exists, so
the app works while pages are still being written.
"""
from __future__ import annotations

import gc
import logging
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from pages import _shared


def warm() -> str:
    """Fill the caches of the pages' first views from the store this process serves: the
    Insights overview (`_insights_data.warm`: the runs added up in the store, and the
    figures) and the newest experiment's results (`_experiment_results.warm`).
    Returns what it did, for the server's log; a store it cannot read is left to the pages,
    which say why."""
    from pages import _experiment_results, _insights_data
    start = time.perf_counter()
    # A cache's spinner looks for a session; this thread has none, and needs none.
    quiet = logging.getLogger("streamlit.runtime.scriptrunner_utils.script_run_context")
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        store = _shared.open_store(_shared.load_settings()["db_url"])
        _insights_data.warm(store)
        _experiment_results.warm(store)
    except Exception as exc:  # noqa: BLE001 - a warm-up never stops the server
        return f"Parley: caches not warmed ({type(exc).__name__}: {exc})"
    finally:
        quiet.setLevel(level)
    return f"Parley: caches warmed in {time.perf_counter() - start:.1f} s"


@asynccontextmanager
async def warm_before_serving(_app: Any) -> AsyncIterator[None]:
    """st.App's lifespan: the server answers once the caches are warm (`warm`), with what
    it loaded kept out of the garbage collector's way (`settle_heap`)."""
    print(await anyio.to_thread.run_sync(warm), file=sys.stderr, flush=True)
    settle_heap()
    yield


def settle_heap() -> None:
    """Move every object the start loaded (the imports, the warm caches: about 260,000) to
    the collector's permanent generation (`gc.freeze`). Streamlit collects garbage after
    every script run, and walking those objects took 0.15 s of each run, every click
    included; after this it takes under a millisecond. Objects still go away when nothing
    refers to them; only cycles among the frozen ones stay."""
    gc.collect()
    gc.freeze()


# (file, title, icon): the navigation, in order; Home is the default page.
PAGES = (
    ("pages/home.py", "Home", ":material/home:"),
    ("pages/run.py", "Run", ":material/play_circle:"),
    ("pages/runs.py", "Runs", ":material/history:"),
    ("pages/insights.py", "Insights", ":material/insights:"),
    ("pages/personas.py", "Personas & roles", ":material/groups:"),
    ("pages/experiments.py", "Experiments", ":material/science:"),
    ("pages/compare.py", "Compare runs", ":material/compare_arrows:"),
    ("pages/review.py", "Review", ":material/rate_review:"),
    ("pages/leaderboard.py", "Leaderboard", ":material/leaderboard:"),
)

# The pages' addresses (Streamlit names a page by its file; Home, the default, is "/").
URL_PATHS = tuple(Path(path).stem for path, _title, _icon in PAGES if path != "pages/home.py")


def main() -> None:
    """One script run: the page config, the sign-in when it is on, the navigation, the
    settings and store, the page."""
    st.set_page_config(page_title="Parley", page_icon="💬", layout="wide")
    # With [auth] in the secrets, a stranger (or a user with no role) gets the sign-in (or
    # "not authorised") screen and nothing else: no navigation, no page, no store opened.
    if not _shared.signed_in():
        return
    # .streamlit/config.toml turns sidebar navigation off, so a fresh server's first load never
    # draws Streamlit's file list of pages/ (before this script names the pages); this app's own
    # navigation is then switched on (Streamlit lets a script set this option).
    st.set_option("client.showSidebarNavigation", True)
    page = st.navigation([st.Page(path, title=title, icon=icon, default=path == "pages/home.py")
                          for path, title, icon in PAGES])
    _shared.settings()  # environment, then st.secrets; read again on every run
    _shared.store()     # open (and migrate) the database before any page needs it
    _shared.keep_form_state()  # a half-configured run survives a visit to another page
    _shared.user_badge()  # with sign-in on: who, their role, "Sign out"
    page.run()


if get_script_run_ctx(suppress_warning=True) is None and hasattr(st, "App"):
    # `streamlit run app.py` finds this st.App (it reads this file's source for one), imports
    # this module once as the server starts, and then runs this same file as the script of
    # every session (`main`, below). So Python's imports (pandas, SQLAlchemy, the engine,
    # plotly and its first figure: about 1.8 s) happen before the first browser connects,
    # not during the first page a user opens on a fresh server; its lifespan then fills the
    # pages' caches before the server answers (`warm`).
    from starlette.middleware import Middleware

    from pages._page_head import PageHead
    _shared.warm_up()
    # Every page's HTML says where the server is and names the other pages' widget and chart
    # code for the browser to fetch while it shows the first (`pages/_page_head.py`).
    app = st.App(__file__, lifespan=warm_before_serving,
                 middleware=[Middleware(PageHead, pages=URL_PATHS)])
elif get_script_run_ctx(suppress_warning=True) is not None:
    main()
