"""The browser tests' fixtures and helpers (Playwright + Debian's Chromium).

What every browser test shares, a pytest plugin (tests/conftest.py loads it; the tests
import its helpers, never another test module):
- one Chromium and one browser context for the whole session, a new page per test (`page`:
  its own listeners and dialogs, the context's cookies cleared and the page's storage emptied
  after each test), stopped as soon as the next test needs no browser: Playwright's sync API
  keeps an event loop running in this thread, and `asyncio.run` fails in any other test
  while it lives. The one context keeps its HTTP cache: the tests on the shared server load
  Streamlit's frontend once, not once each (a new context compiled it again: about 1 s of
  CPU a test); a server of a module's own is another origin, and starts cold;
- one app server for the session (`shared_app`) for the tests whose checks read only the
  data they stored themselves; `app` stays a fresh server of a module's own (a first visit to
  a fresh server, or a check over every stored run);
- waits on conditions only, never a fixed sleep: `settle` waits until the script runs asked
  of the server have finished (counted on the page's websocket), `rerun` until the run an
  action asked for has, and checks of the page use Playwright's auto-retrying `expect`.

Skipped when /usr/bin/chromium or Playwright is missing, unless PARLEY_REQUIRE_BROWSER=1.
"""
from __future__ import annotations

import contextlib
import itertools
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from engine import REGISTRY
from engine.bench.browser import ARGS, CHROMIUM, server
from engine.bench.browser import missing as _browser_missing

ROOT = Path(__file__).resolve().parents[2]
PAYLOAD = "<img src=x onerror=alert(1)>"
# A markdown image as a run's label: Chromium loaded it from the run's title before issue 10.
MD_IMAGE = "![x](http://127.0.0.1:9/x.png)"
GENEROUS_MS = 120_000  # only a broken app ever waits this long
VIEWPORT: Any = {"width": 1400, "height": 1800}
# The issue asks for a panel; the debate is the stand-in while the panel is not registered.
PROTOCOL = "panel" if "panel" in REGISTRY else "debate"


def require_browser() -> None:
    """Skip (or, with PARLEY_REQUIRE_BROWSER=1, fail) when Chromium or Playwright is
    missing."""
    missing = _browser_missing()
    if missing:
        if os.environ.get("PARLEY_REQUIRE_BROWSER") == "1":
            pytest.fail(f"PARLEY_REQUIRE_BROWSER=1 but {missing}")
        pytest.skip(missing)


@contextlib.contextmanager
def serving(tmp_path_factory) -> Iterator[tuple[str, str]]:
    """The app served on a free loopback port over a new temporary database
    (`engine.bench.browser.server`, as the browser benchmark serves it); yields (base URL,
    database URL)."""
    db_url = f"sqlite:///{tmp_path_factory.mktemp('db') / 'parley.db'}"
    try:
        with server(db_url, timeout=GENEROUS_MS / 1000) as base:
            yield base, db_url
    except RuntimeError as exc:  # it did not start: its log says why
        pytest.fail(str(exc))


class Session:
    """The session's one Chromium (and its Playwright) and its one shared app server, each
    started when a test first needs it and stopped by `stop`."""

    def __init__(self) -> None:
        self._browser_stack: contextlib.ExitStack | None = None
        self._server_stack: contextlib.ExitStack | None = None
        self._browser: Any = None
        self._context: Any = None
        self._app: tuple[str, str] | None = None
        self._cleanup_registered = False

    def _register(self, config) -> None:
        if not self._cleanup_registered:  # whatever happens, nothing outlives the session
            config.add_cleanup(self.stop)
            self._cleanup_registered = True

    def browser(self, config) -> Any:
        if self._browser is None:
            from playwright.sync_api import expect, sync_playwright
            self._register(config)
            stack = contextlib.ExitStack()
            playwright = stack.enter_context(sync_playwright())
            self._browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            stack.callback(self._browser.close)
            self._browser_stack = stack
            expect.set_options(timeout=GENEROUS_MS)  # every `expect` of the browser tests
        return self._browser

    def context(self, config) -> Any:
        if self._context is None:
            self._context = new_context(self.browser(config))
        return self._context

    def app(self, config, tmp_path_factory) -> tuple[str, str]:
        if self._app is None:
            self._register(config)
            stack = contextlib.ExitStack()
            self._app = stack.enter_context(serving(tmp_path_factory))
            self._server_stack = stack
        return self._app

    def stop_browser(self) -> None:
        stack, self._browser_stack, self._browser = self._browser_stack, None, None
        self._context = None
        if stack is not None:
            stack.close()

    def stop(self) -> None:
        self.stop_browser()
        stack, self._server_stack, self._app = self._server_stack, None, None
        if stack is not None:
            stack.close()


SESSION = Session()


def _next_test_uses_a_browser(item) -> bool:
    """Whether the test this process runs next asks for a page (conftest notes which it is:
    under pytest-xdist a worker's next test is not the next one collected)."""
    from conftest import NEXT_ITEM
    after = item.stash.get(NEXT_ITEM, None)
    return after is not None and "page" in after.fixturenames


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    folder = Path(os.environ.get("PARLEY_SCREENSHOTS") or tmp_path_factory.mktemp("shots"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    """A fresh app server of this module's own over its own database; yields (base URL,
    database URL). For a module that needs the server's very first page load, or checks
    over every run stored; the others share `shared_app`."""
    require_browser()
    with serving(tmp_path_factory) as served:
        yield served


@pytest.fixture
def shared_app(request, tmp_path_factory) -> tuple[str, str]:
    """The session's one app server and its database, shared by every test whose checks
    read only what it stored itself (its own runs, experiments and labels): (base URL,
    database URL). Import it as `app`."""
    require_browser()
    return SESSION.app(request.config, tmp_path_factory)


WATCH_RUNS = r"""
(() => {
  if (window.__parleyRuns) return;
  // Counted on the websocket itself, not on what React has drawn: every rerun_script the
  // page asks for (BackMsg field 11) and every script_finished the server sends
  // (ForwardMsg field 6), except "stopped early for a rerun" (2), which another run follows.
  const runs = window.__parleyRuns = {
    page: Math.random(), seq: 0, asked: 0, lastAsked: 0, finished: 0, lastFinished: 0};
  const bytesOf = data => data instanceof ArrayBuffer ? new Uint8Array(data)
    : ArrayBuffer.isView(data) ? new Uint8Array(data.buffer, data.byteOffset, data.byteLength)
    : null;
  // A protobuf message's top-level fields: [number, varint value or null], in order.
  const fields = bytes => {
    const found = [];
    let i = 0;
    const varint = () => {
      let value = 0, scale = 1, byte;
      do { byte = bytes[i++]; value += (byte & 0x7f) * scale; scale *= 128; }
      while (byte & 0x80 && i < bytes.length);
      return value;
    };
    while (i < bytes.length) {
      const key = varint(), number = Math.floor(key / 8), wire = key % 8;
      if (wire === 0) found.push([number, varint()]);
      else if (wire === 2) { const size = varint(); found.push([number, null]); i += size; }
      else if (wire === 1) i += 8;
      else if (wire === 5) i += 4;
      else break;
    }
    return found;
  };
  const Native = window.WebSocket;
  window.WebSocket = class extends Native {
    constructor(...args) {
      super(...args);
      this.addEventListener("message", event => {
        const bytes = bytesOf(event.data);
        if (bytes && fields(bytes).some(([n, v]) => n === 6 && v !== null && v !== 2)) {
          runs.finished += 1;
          runs.lastFinished = ++runs.seq;
        }
      });
    }
    send(data) {
      const bytes = bytesOf(data);
      if (bytes && fields(bytes).some(([n]) => n === 11)) {
        runs.asked += 1;
        runs.lastAsked = ++runs.seq;
      }
      return super.send(data);
    }
  };
})();
"""

# True once every script run asked for so far (and at least one after `mark`) has finished,
# React has drawn it (the app says notRunning, no element is left stale), and that has held
# for three animation frames in a row.
IDLE = r"""
([mark, token]) => {
  const runs = window.__parleyRuns;
  const app = document.querySelector("[data-testid='stApp']");
  const idle = !!runs && !!app && (runs.page !== mark.page || runs.asked > mark.asked)
    && runs.lastFinished > runs.lastAsked
    && app.getAttribute("data-test-script-state") === "notRunning"
    && !document.querySelector("[data-stale='true']");
  if (!idle || window.__parleyCalm?.token !== token) window.__parleyCalm = {token, frames: 0};
  return idle && ++window.__parleyCalm.frames >= 3;
}
"""
_TOKENS = itertools.count()


def asked(page) -> dict[str, Any]:
    """How many script runs this page has asked for so far (and which page it is)."""
    return page.evaluate(
        "() => { const r = window.__parleyRuns; return {page: r ? r.page : null, "
        "asked: r ? r.asked : 0}; }")


def settle(page, mark: dict[str, Any] | None = None) -> None:
    """Wait until Streamlit has finished every script run this page asked for (with `mark`,
    from `asked`: also one asked after it) and has drawn it."""
    page.wait_for_function(IDLE, arg=[mark or {"page": None, "asked": 0}, next(_TOKENS)],
                           polling="raf", timeout=GENEROUS_MS)


def rerun(page, action: Callable[[], Any]) -> None:
    """Do `action` (a click or a commit that reruns the script) and wait until the run it
    asked for has finished and is drawn."""
    mark = asked(page)
    action()
    settle(page, mark)


def new_context(browser, **options) -> Any:
    """A new browser context of `browser` (its own cookies and cache) whose pages keep count
    of their script runs."""
    context = browser.new_context(viewport=VIEWPORT, **options)
    context.add_init_script(WATCH_RUNS)
    context.set_default_timeout(GENEROUS_MS)
    return context


def new_page(browser, **options) -> Any:
    """A page in a new browser context of `browser`: a new visitor."""
    return new_context(browser, **options).new_page()


EMPTY_STORAGE = "() => { try { localStorage.clear(); sessionStorage.clear(); } catch (e) {} }"


@pytest.fixture
def page(request):
    """A new page of the session's browser context (no cookies), with the dialogs it tried to
    open in `page.dialogs`."""
    require_browser()
    context = SESSION.context(request.config)
    context.clear_cookies()
    tab = context.new_page()
    tab.dialogs = []  # every alert/confirm/prompt the page tries to open

    def on_dialog(dialog):
        tab.dialogs.append(dialog.message)
        dialog.dismiss()

    tab.on("dialog", on_dialog)
    yield tab
    with contextlib.suppress(Exception):  # a page that ended on a file:// URL has no storage
        tab.evaluate(EMPTY_STORAGE)
    tab.close()
    if not _next_test_uses_a_browser(request.node):
        SESSION.stop()


def expect(actual, message: str | None = None):
    """Playwright's auto-retrying assertion (imported here: the modules are collected without
    Playwright); its timeout is GENEROUS_MS."""
    from playwright.sync_api import expect as playwright_expect
    return playwright_expect(actual, message)


def typed(text: str) -> re.Pattern[str]:
    """`text` as shown, word joiners allowed anywhere (`pages._shared.md` puts them in
    addresses so they never become links)."""
    return re.compile("\u2060*".join(re.escape(c) for c in text))


def exactly_typed(text: str) -> re.Pattern[str]:
    return re.compile(f"^\u2060*{typed(text).pattern}\u2060*$")


def goto(page, base: str, path: str) -> None:
    page.goto(base + path)
    page.wait_for_selector("[data-testid='stSidebarNav']")
    settle(page)


VEGA_BAR = "path[aria-roledescription='bar']"  # a bar of a Vega-Lite chart (SVG)


def vega_groups(bars) -> list[str]:
    """The group (x value) of each Vega-Lite bar, from the description Vega gives it
    ("group: careful; ...")."""
    return [label.split(";", 1)[0].removeprefix("group: ")
            for label in bars.evaluate_all("es => es.map(e => e.getAttribute('aria-label'))")]


def group_css(group: str) -> str:
    """A CSS selector of the Vega-Lite bars whose group (x value) is `group`."""
    quoted = group.replace("\\", "\\\\").replace('"', '\\"')
    return f'{VEGA_BAR}[aria-label^="group: {quoted};"]'


def group_bar(chart, group: str):
    """The Vega-Lite bars of `chart` whose group (x value) is `group`."""
    return chart.locator(group_css(group))


# Resolves once the element's box has stayed the same for three animation frames in a row.
STILL = r"""
element => new Promise(resolve => {
  let last = null, same = 0;
  const step = () => {
    const r = element.getBoundingClientRect();
    const now = [r.x, r.y, r.width, r.height].join();
    same = now === last ? same + 1 : 0;
    last = now;
    if (same >= 3) resolve(true); else requestAnimationFrame(step);
  };
  requestAnimationFrame(step);
})
"""


def ready(page, target) -> None:
    """Wait until Streamlit has finished every script run asked of it and drawn it, and
    `target` is visible, in view and has stopped moving: a click then lands on what it aims
    at, on a chart already listening, and is made once (on a loaded machine a click made
    while the page was still being redrawn asked for nothing)."""
    settle(page)
    target.wait_for(state="visible")
    target.scroll_into_view_if_needed()
    target.evaluate(STILL)


def click_bar(page, bar) -> None:
    """Click the middle of a Vega-Lite bar once it is ready, as a user does (the mouse, not
    a synthetic event), and wait for the script run the click asks for."""
    ready(page, bar)
    box = bar.bounding_box()
    rerun(page, lambda: page.mouse.click(box["x"] + box["width"] / 2,
                                         box["y"] + box["height"] / 2))


def click_point(page, chart, point) -> None:
    """Click a marker of a plotly chart as a user does: once it is ready, the mouse onto it,
    and the click once plotly shows its hover label (plotly's drag layer lies over the
    markers, and a click that arrives before its hover names no point); then wait for the
    script run it asks for."""
    ready(page, point)
    box = point.bounding_box()
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    page.mouse.move(x, y)
    chart.locator(".hoverlayer .hovertext").first.wait_for(timeout=GENEROUS_MS)
    rerun(page, lambda: page.mouse.click(x, y))


def open_tab(page, name: str) -> None:
    """Click the tab `name` (an experiment's results draw only their open tab; a click reruns
    the script) and wait until that run has finished. A view of an experiment's results is
    a tab inside its group's tab: the group's is clicked first when it is not open."""
    from pages._experiment_results import GROUP_OF
    group = GROUP_OF.get(name)
    for label in ([group] if group and group != name else []) + [name]:
        tab = page.get_by_role("tab", name=label, exact=True)
        if tab.get_attribute("aria-selected") != "true":
            rerun(page, tab.click)
        expect(tab).to_have_attribute("aria-selected", "true")


def shown_as_text(page, text: str) -> None:
    """Wait until the page shows `text` as text (word joiners, which keep URLs from becoming
    links, are invisible and ignored)."""
    expect(page.locator("[data-testid='stMain']")).to_contain_text(typed(text),
                                                                   use_inner_text=True)


def field(page, key: str, tag: str = "input"):
    return page.locator(f".st-key-{key} {tag}").first


def commit(locator, text: str, in_form: bool = False) -> None:
    """Type into a Streamlit input and commit it (Streamlit commits on blur); wait for the
    script run the new value asks for (in a form, `in_form`: none until it is submitted)."""
    locator.click()
    locator.fill(text)
    if in_form:
        locator.blur()
        expect(locator).to_have_value(text)
    else:
        rerun(locator.page, locator.blur)

