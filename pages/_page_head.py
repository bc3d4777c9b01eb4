"""What every page's HTML carries so that the page, and the next one, load sooner.

`PageHead` is an ASGI middleware (app.py hands it to st.App) that adds two things to the
HTML Streamlit serves for every page, just before </head>:

1. **Prefetch links for the widget and chart code of Parley's pages.** Streamlit's frontend
   loads each kind of element's code (a select box, a metric, a Vega-Lite chart and Vega
   itself: about 1.3 MB in some 60 files) the first time a page draws one, one round trip
   after the element arrives, from the same Python server that is running the page's script.
   On the first visit to Insights or an experiment's results those fetches, made in a chain
   as the page drew, were the largest part of the wait (Playwright: the chart's code asked
   for about 1 s after navigation, drawn half a second later). `<link rel="prefetch">` has
   the browser fetch them at its lowest priority, after what the page itself needs, into its
   HTTP cache (the files are named by their content and served as immutable), where the next
   page finds them. The list is computed once from Streamlit's own build (`chunks`): the files
   of the element kinds in `ENTRIES` and every file they import, less those `index.html`
   already loads. Plotly's 4.7 MB (a run's Sankey, the lines by round) is left to its pages.
2. **Where the server is** (`locate`), for a page opened by its address (`/runs`,
   `/experiments?...`). Streamlit's frontend does not know whether `/runs` is a page or the
   path the app is served under, so it asked `/runs/_stcore/health` first and, on its 404,
   waited 100 ms and more before asking `/_stcore/health`: a fifth of a second of every such
   load (measured in Chromium). A one-line script sets Streamlit's own `window.__streamlit`
   `BACKEND_BASE_URL` to the page's parent path when the last part of the address is one of
   Parley's pages, which is what the second probe found; any other address is left to
   Streamlit as before.
"""
from __future__ import annotations

import functools
import gzip
import json
import re
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

import streamlit

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

STATIC = Path(streamlit.__file__).parent / "static"
# The element kinds Parley's pages draw beyond Home's table: Vega-Lite charts (and Vega,
# loaded by loadVegaEmbed), the inputs of the run and experiment forms and filters (uploads
# included), metrics, progress bars, segmented controls and pills, and download buttons.
ENTRIES = ("ArrowVegaLiteChart", "loadVegaEmbed", "Selectbox", "Multiselect", "Metric",
           "NumberInput", "TextInput", "TextArea", "Checkbox", "Radio", "DateInput",
           "DownloadButton", "FileUploader", "ButtonGroup", "Progress")
# A file's references to other files of the build: static imports, dynamic imports and
# Vite's preload lists all name them as "./NAME.js".
REFERENCE = re.compile(r"""["'`]\./([\w.\-]+\.js)["'`]""")
BOOT = re.compile(r"static/js/([\w.\-]+\.js)")


@functools.cache
def chunks(static: Path = STATIC, entries: tuple[str, ...] = ENTRIES) -> tuple[str, ...]:
    """The build's files (names under static/js) that the `entries` need and `index.html`
    does not already load, in a stable order; () when the build is not where it is expected."""
    folder = static / "static" / "js"
    try:
        boot = set(BOOT.findall((static / "index.html").read_text(encoding="utf-8")))
        files = {path.name: path for path in folder.glob("*.js")}
    except OSError:
        return ()
    todo = [name for name in files for entry in entries if name.startswith(entry + ".")]
    found: set[str] = set()
    while todo:
        name = todo.pop()
        if name in found or name in boot:
            continue  # index.html loads it already; its own references are the whole app
        found.add(name)
        try:
            text = files[name].read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        todo.extend(ref for ref in REFERENCE.findall(text) if ref in files and ref not in found)
    return tuple(sorted(found))


def links(names: tuple[str, ...]) -> bytes:
    """The <link rel="prefetch"> tags for `names`, relative like Streamlit's own tags."""
    return "".join(f'<link rel="prefetch" crossorigin href="./static/js/{name}">'
                   for name in names).encode()


def locate(pages: tuple[str, ...]) -> bytes:
    """The script that tells Streamlit's frontend where the server is when the address ends
    in one of `pages` (their URL paths: "runs", "insights"...); b"" when there are none."""
    if not pages:
        return b""
    names = json.dumps(sorted(pages)).replace("</", "<\\/")
    return ("<script>(function(){var p=location.pathname.replace(/\\/+$/,\"\"),"
            "i=p.lastIndexOf(\"/\");if(!window.__streamlit&&" + names +
            ".indexOf(p.slice(i+1))>=0)window.__streamlit="
            "{BACKEND_BASE_URL:location.origin+p.slice(0,i+1)}})()</script>").encode()


def inject(html: bytes, tags: bytes) -> bytes:
    """`html` with `tags` just before </head> (unchanged when it has none)."""
    at = html.find(b"</head>")
    return html if at < 0 or not tags else html[:at] + tags + html[at:]


class PageHead:
    """ASGI middleware: every HTML page Streamlit serves gets `locate(pages)` and the
    prefetch links of `names` (by default `chunks()`). Other responses (the websocket, the
    static files, JSON) pass through untouched."""

    def __init__(self, app: ASGIApp, pages: tuple[str, ...] = (),
                 names: tuple[str, ...] | None = None) -> None:
        self.app = app
        self.tags = locate(pages) + links(chunks() if names is None else names)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "GET" or not self.tags:
            await self.app(scope, receive, send)
            return
        start: Message | None = None
        body: list[bytes] = []

        async def edit(message: Message) -> None:
            nonlocal start
            if message["type"] == "http.response.start":
                headers = {k.lower(): v for k, v in message.get("headers", [])}
                html = headers.get(b"content-type", b"").startswith(b"text/html")
                if not html or message.get("status") != 200:
                    await send(message)
                    return
                start = message
                return
            if start is None or message["type"] != "http.response.body":
                await send(message)
                return
            body.append(message.get("body", b""))
            if message.get("more_body", False):
                return
            await self._send_edited(start, b"".join(body), send)

        await self.app(scope, receive, edit)

    async def _send_edited(self, start: Message, content: bytes, send: Send) -> None:
        headers = [(k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"]
        encoding = dict((k.lower(), v) for k, v in headers).get(b"content-encoding", b"")
        if encoding == b"gzip":
            try:
                content = gzip.compress(inject(gzip.decompress(content), self.tags), mtime=0)
            except (OSError, EOFError):
                pass  # not the gzip it claims to be: sent as it came
        elif not encoding:
            content = inject(content, self.tags)
        headers.append((b"content-length", str(len(content)).encode()))
        await send({**start, "headers": headers})
        await send({"type": "http.response.body", "body": content, "more_body": False})
