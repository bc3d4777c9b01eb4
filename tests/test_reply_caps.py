"""What a reply may cost in memory and disk (DESIGN 4): a stored reply is capped (256 KB by
default, an endpoint's `max_reply_bytes` otherwise) with its size and a warning kept on the
turn; a response body is read no further than its cap, decompressed included; a run's page
reads each reply's start and its prompts only when opened.

Over loopback servers (`oversized_server.Oversized`) that answer 30 MB per call, or a gzip
body of 200 MB; the memory figures are tracemalloc's peaks of Python allocations while the
work ran (the run's or the page's), printed with `-s`.
"""
from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import tracemalloc
import zlib
from pathlib import Path

import pytest
from conftest import table_columns
from openai_stub import loopback_only
from oversized_server import ANSWER, MB, Oversized
from sqlalchemy import text
from streamlit.testing.v1 import AppTest

from engine import ConfigError, Seat, Store, run_vote
from engine.llm.calls import RunContext
from engine.llm.endpoints import EndpointRegistry
from engine.llm.sizes import REPLY_CAP, body_cap, cut_text, size_text, utf8_size
from engine.reports import runs as history
from engine.store.search_index import MAX_INDEXED

PAGE = str(Path(__file__).resolve().parent.parent / "pages" / "runs.py")
THIRTY_MB = 30 * MB
SPACES = b" " * MB  # a gzip body of 200 MB of them is about 200 KB


@pytest.fixture(autouse=True)
def loopback(monkeypatch):
    loopback_only(monkeypatch, "OPENAI_API_KEY", "OPENAI_BASE_URL", "PARLEY_ENDPOINTS")


@pytest.fixture(scope="module", autouse=True)
def warm():
    """One small call first: the SDK's modules load on a model's first request, and their
    import is no part of what a test measures."""
    with Oversized(10) as server, pytest.MonkeyPatch.context() as monkeypatch:
        loopback_only(monkeypatch, "OPENAI_API_KEY", "OPENAI_BASE_URL")
        assert one_call(register(monkeypatch, server)).ok


def register(monkeypatch, server: Oversized, **policy) -> str:
    """Register `server` as the endpoint `big` (with `policy`); the spec of a model there."""
    monkeypatch.setenv("PARLEY_ENDPOINTS", json.dumps({"big": {
        "base_url": server.base_url, **policy}}))
    return "openai:m?endpoint=big"


def peak(work):
    """(what `work()` returns, the peak of Python allocations while it ran, in MB)."""
    tracemalloc.start()
    try:
        out = work()
        _, top = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return out, top / MB


def one_call(spec: str, **run):
    """One guarded call of a seat on `spec` (its turn), as a protocol makes it."""
    async def go():
        ctx = RunContext("single", retries=run.pop("retries", 2), backoff=0.01, **run)
        return await ctx.call(Seat("a", spec), [{"role": "user", "content": "6 x 7?"}],
                              phase="answer")
    return asyncio.run(go())


def store_bytes(url: str) -> int:
    """The SQLite store's size on disk, its write-ahead log checkpointed into it."""
    path = url.removeprefix("sqlite:///")
    with sqlite3.connect(path) as connection:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))


def used_bytes(url: str) -> int:
    """The bytes of the SQLite store's pages that hold data: its pages less its free list
    (SQLite rewrites a whole row on UPDATE, so a turn's parsed fields written after its
    256 KB reply leave the reply's old pages free, for the next write to reuse)."""
    path = url.removeprefix("sqlite:///")
    with sqlite3.connect(path) as connection:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        pages = connection.execute("PRAGMA page_count").fetchone()[0]
        free = connection.execute("PRAGMA freelist_count").fetchone()[0]
        size = connection.execute("PRAGMA page_size").fetchone()[0]
    return (pages - free) * size


# --------------------------------------------------------------------------- the stored cap
def test_a_cut_keeps_whole_characters_within_the_cap():
    text = "é" * 200 + "😀" * 100
    for cap in range(1, 801, 7):
        kept = cut_text(text, cap)
        assert text.startswith(kept) and utf8_size(kept) <= cap
        assert utf8_size(text[:len(kept) + 1]) > cap  # the next character would not fit
    assert cut_text("short", REPLY_CAP) == "short"
    assert (size_text(REPLY_CAP), size_text(THIRTY_MB), size_text(900)) == \
        ("256 KB", "30 MB", "900 bytes")


def test_a_reply_past_the_cap_is_stored_cut_with_its_size_and_a_warning(recording_model, store):
    # a model reached without HTTP (a fake): the reply arrives whole, the store keeps 256 KB
    reply = "STANCE: 42\n" + "é" * MB  # 2 MB of UTF-8
    seen = []

    async def go():
        ctx = RunContext("single", recorder=store.recorder(store.start_run("single", "q")))
        return await ctx.call(Seat("a", recording_model([reply])), [
            {"role": "user", "content": "6 x 7?"}], phase="answer",
            parse=lambda text: (seen.append(len(text)) or {}, []))
    turn = asyncio.run(go())
    assert turn.ok and utf8_size(turn.reply) <= REPLY_CAP < utf8_size(turn.reply + "é")
    assert seen == [len(turn.reply)]  # the parser read the kept part only
    assert turn.reply_bytes == utf8_size(reply)
    assert turn.warnings == [f"reply cut at 256 KB of {size_text(utf8_size(reply))}: a stored "
                             "reply keeps its first 256 KB (max_reply_bytes); the parsers "
                             "read that part"]
    stored = store.turns()
    assert stored["reply_bytes"].tolist() == [utf8_size(reply)]
    assert len(stored["reply"].iloc[0]) == len(turn.reply)


def test_a_reply_within_the_cap_is_kept_whole(recording_model):
    reply = "x" * REPLY_CAP

    async def go():
        return await RunContext("single").call(Seat("a", recording_model([reply])), [
            {"role": "user", "content": "q"}], phase="answer")
    turn = asyncio.run(go())
    assert turn.reply == reply and turn.reply_bytes is None and turn.warnings == []


def test_an_endpoint_sets_its_own_cap(monkeypatch):
    with Oversized(100_000) as server:
        spec = register(monkeypatch, server, max_reply_bytes=4096)
        turn = one_call(spec)
    # the body passed this endpoint's body cap (2 x 4 KB + 64 KB): cut in transport too
    assert turn.ok and utf8_size(turn.reply) == 4096 and turn.reply.startswith(ANSWER)
    length = len(server.ends()[0]) + 100_000 + len(server.ends()[1])
    assert turn.reply_bytes == length
    assert turn.warnings == [f"reply cut at 4 KB of a {size_text(length)} response: Parley "
                             "read its start only and stopped; the parsers read the part kept"]
    registry = EndpointRegistry.from_settings(os.environ)
    assert "max_reply_bytes 4096" in registry.describe()[0]["call policy"]


@pytest.mark.parametrize("value", [100, 10 ** 12, "262144", 1.5, True])
def test_a_bad_reply_cap_is_refused_when_the_endpoints_are_read(value):
    with pytest.raises(ConfigError, match="max_reply_bytes must be a whole number in "
                                          "1024..6.71089e\\+07"):
        EndpointRegistry.from_settings({"PARLEY_ENDPOINTS": json.dumps({"big": {
            "base_url": "http://127.0.0.1:9/v1", "max_reply_bytes": value}})})


# --------------------------------------------------------------------------- the body cap
@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
def test_a_200_mb_compressed_body_is_never_inflated_past_the_cap(monkeypatch, encoding):
    with Oversized(200 * MB, encoding=encoding, filler=SPACES) as server:
        assert len(server.compressed) < 2 * MB
        spec = register(monkeypatch, server)
        turn, top = peak(lambda: one_call(spec))
    print(f"\none call, a 200 MB {encoding} body: peak {top:.1f} MB of Python allocations")
    assert server.requests == 1
    assert turn.ok and turn.reply.startswith(ANSWER) and utf8_size(turn.reply) == REPLY_CAP
    assert turn.reply_bytes == body_cap(REPLY_CAP)  # what was read: its size is unknown
    assert turn.warnings == [
        "reply cut at 256 KB: the server's response passed 576 KB (its whole size unknown: "
        "compressed, or not declared) and Parley read no further"]
    assert top < 32  # inflated whole, the body alone would be 200 MB


def test_a_30_mb_answer_is_read_to_its_cap_and_the_rest_left_unread(monkeypatch):
    with Oversized(THIRTY_MB) as server:
        spec = register(monkeypatch, server)
        turn, top = peak(lambda: one_call(spec))
    print(f"\none call, a 30 MB body: peak {top:.1f} MB of Python allocations")
    length = len(server.ends()[0]) + THIRTY_MB + len(server.ends()[1])
    assert turn.ok and turn.reply_bytes == length and utf8_size(turn.reply) == REPLY_CAP
    assert turn.usage_estimated  # the usage came after the text, unread
    assert turn.warnings[0].startswith("reply cut at 256 KB of a 30 MB response")
    assert top < 32


@pytest.mark.parametrize("wbits", [15, -15, 31])  # zlib-wrapped or raw deflate, gzip
def test_inflating_gives_at_most_the_room_asked(wbits):
    from engine.llm.transport import _Inflate
    packer = zlib.compressobj(9, zlib.DEFLATED, wbits)
    body = packer.compress(b"a" * (50 * MB)) + packer.flush()
    inflate = _Inflate("gzip" if wbits == 31 else "deflate")
    assert inflate.decode(body[:100], 1000) == b"a" * 1000  # a bomb: no more than asked
    fits = _Inflate("gzip" if wbits == 31 else "deflate")
    small = zlib.compressobj(9, zlib.DEFLATED, wbits)
    assert fits.decode(small.compress(b"hello") + small.flush(), 1000) == b"hello"


def test_a_synchronous_call_reads_to_the_cap_too(monkeypatch):
    from langchain_core.messages import HumanMessage

    from engine.llm.providers import get_model
    with Oversized(THIRTY_MB) as server:
        model = get_model(register(monkeypatch, server))
        reply, top = peak(lambda: model.invoke([HumanMessage("6 x 7?")]))
    assert reply.content.startswith(ANSWER) and len(reply.content) < body_cap(REPLY_CAP)
    assert reply.response_metadata["headers"]["x-parley-cut"] == \
        f"read={body_cap(REPLY_CAP)}; size={len(b''.join(server.ends())) + THIRTY_MB}"
    assert top < 32


def test_a_chunked_answer_says_its_size_is_unknown(monkeypatch):
    with Oversized(THIRTY_MB, declare=False) as server:
        turn = one_call(register(monkeypatch, server))
    assert turn.ok and turn.reply_bytes == body_cap(REPLY_CAP)
    assert "its whole size unknown" in turn.warnings[0]


@pytest.mark.parametrize("shape, why", [
    ({"encoding": "br"}, "sent a body encoded as 'br', which Parley did not ask for (it "
                         "accepts gzip, deflate)"),
    ({"kind": "html"}, "sent more than 576 KB and what Parley read of it is not a chat "
                       "completion; it read no further")])
def test_an_unreadable_response_fails_its_call_once(monkeypatch, shape, why):
    with Oversized(THIRTY_MB, **shape) as server:
        turn = one_call(register(monkeypatch, server))
    assert turn.status == "degraded" and turn.reply == ""
    assert turn.error == f"UnreadableResponse: the server at {server.base_url[:-3]} {why}"
    assert server.requests == 1 and turn.attempts == 1  # not retried


def test_a_huge_error_body_is_read_to_the_cap_only(monkeypatch):
    with Oversized(THIRTY_MB, status=500) as server:
        turn, top = peak(lambda: one_call(register(monkeypatch, server), retries=1))
    assert turn.status == "degraded" and "Error code: 500" in turn.error
    assert len(turn.error) < 5000  # at most its first 4 KB: a message, not 30 MB of one
    assert server.requests == 2 and top < 32  # a 5xx is retried, each read to the cap


def test_a_server_cannot_claim_a_cut_it_did_not_make(monkeypatch):
    with Oversized(10, headers={"x-parley-cut": "read=1; size=999999"}) as server:
        turn = one_call(register(monkeypatch, server))
    # no cut is claimed (the stub's usage for its 30 MB answers is disbelieved on 10 bytes:
    # that warning is the usage check's, engine.llm.prices)
    assert turn.ok and turn.reply_bytes is None
    assert not [w for w in turn.warnings if "cut" in w], turn.warnings


# --------------------------------------------------------------------------- a whole run
@pytest.mark.parametrize("body", ["30 MB", "200 MB gzip"])
def test_a_vote_against_an_endpoint_of_huge_answers(monkeypatch, tmp_path, body):
    """DESIGN 4's cap, end to end: a 6-call vote whose every answer is 30 MB (or a 200 MB
    gzip body) completes with every ballot read, its store a few MB, the run and its page
    within a bounded memory."""
    url = f"sqlite:///{tmp_path / 'parley.db'}"
    monkeypatch.setenv("PARLEY_DB_URL", url)
    store = Store(url)
    empty, empty_used = store_bytes(url), used_bytes(url)
    server = Oversized(THIRTY_MB) if body == "30 MB" else \
        Oversized(200 * MB, encoding="gzip", filler=SPACES)
    with server:
        spec = register(monkeypatch, server)
        voters = [Seat(f"voter {i}", spec) for i in range(6)]
        result, run_peak = peak(lambda: run_vote("What is 6 x 7?", voters=voters,
                                                 store=store))
    assert server.requests == 6
    assert [t.status for t in result.turns] == ["ok"] * 6  # no turn failed for its size
    assert result.tally.counts == {"42": 6}
    assert all(utf8_size(t.reply) == REPLY_CAP and t.reply_bytes >= body_cap(REPLY_CAP)
               and t.warnings[0].startswith("reply cut at 256 KB") for t in result.turns)
    run = store.get(result.run_id)
    assert run["status"] == "completed" and not run["degraded_run"]
    with store.engine.connect() as connection:
        kept = connection.execute(text("SELECT sum(length(reply)) FROM turns")).scalar()
        indexed = connection.execute(text("SELECT sum(length(body)) FROM search_docs "
                                          "WHERE kind = 'turn'")).scalar()
    assert kept == 6 * REPLY_CAP and indexed == 6 * MAX_INDEXED
    store.engine.dispose()
    size, used = store_bytes(url), used_bytes(url)
    # the replies (6 x 256 KB), the search index's copy of each one's first 20,000
    # characters and its full-text index: the run holds under 2 MB of the store, and the
    # file grew by that and at most one reply's pages left free by an update
    assert used - empty_used < 2 * MB
    assert size < empty + 6 * (REPLY_CAP + 2 * MAX_INDEXED) + REPLY_CAP + 16 * 4096

    at = AppTest.from_file(PAGE, default_timeout=120)
    at.query_params["run"] = result.run_id
    opened, page_peak = peak(lambda: at.run())
    assert not opened.exception, opened.exception
    at.session_state["runs_tab"] = "Transcript"
    _, transcript_peak = peak(lambda: at.run())
    assert not at.exception, at.exception
    assert len([e for e in at.text if e.value.startswith(ANSWER)]) == 6
    assert [c.value for c in at.caption].count(
        f"The first 20,000 of its {REPLY_CAP:,} characters.") == 6
    print(f"\n6-call vote, {body} answers: store {size / MB:.2f} MB (empty {empty / MB:.2f}), "
          f"the run's pages {(used - empty_used) / MB:.2f} MB; "
          f"peak {run_peak:.1f} MB running it, {page_peak:.1f} MB opening its page, "
          f"{transcript_peak:.1f} MB its transcript")
    assert run_peak < 32 and max(page_peak, transcript_peak) < 300


# --------------------------------------------------------------------------- the run page
def test_the_run_page_never_reads_every_reply_whole(store, tmp_path, monkeypatch):
    """A run stored with 30 MB replies (by an older Parley, or an import): its page reads
    each reply's first 20,000 characters, and one turn's up to the cap when asked."""
    url = str(store.engine.url)
    monkeypatch.setenv("PARLEY_DB_URL", url)
    result = run_vote("What is 6 x 7?", voters=["simulated"] * 6, store=store)
    with store.engine.begin() as connection:  # 30 MB each, made by SQLite, not Python
        connection.execute(text("UPDATE turns SET reply = replace(hex(zeroblob(:half)), "
                                "'0', 'z') WHERE run_id = :rid"),
                           {"half": THIRTY_MB // 2, "rid": result.run_id})
    warm = AppTest.from_file(PAGE, default_timeout=120)
    warm.run()  # the page's imports, before measuring
    at = AppTest.from_file(PAGE, default_timeout=120)
    at.query_params["run"] = result.run_id
    _, page_peak = peak(lambda: at.run())
    at.session_state["runs_tab"] = "Transcript"
    _, transcript_peak = peak(lambda: at.run())
    assert not at.exception, at.exception
    print(f"\na run of 6 stored 30 MB replies: peak {page_peak:.1f} MB opening its page, "
          f"{transcript_peak:.1f} MB its transcript")
    replies = [e.value for e in at.text if e.value.startswith("zzz")]
    assert [len(r) for r in replies] == [history.PREVIEW_CHARS] * 6
    assert "The first 20,000 of its 31,457,280 characters." in [c.value for c in at.caption]
    assert max(page_peak, transcript_peak) < 64  # one reply whole would be 30 MB, all 180

    at.button(key="runs_whole_0_ask").click().run()
    assert not at.exception, at.exception
    replies = [e.value for e in at.text if e.value.startswith("zzz")]
    assert sorted(len(r) for r in replies) == [history.PREVIEW_CHARS] * 5 + [
        history.PAGE_CHARS]
    assert any(c.value == "The first 262,144 of its 31,457,280 characters; the run's JSON "
               "export holds it whole." for c in at.caption)


def test_a_page_read_of_a_run_gives_each_replys_start_and_length(backend):
    result = run_vote("What is 6 x 7?", voters=["simulated"] * 2, store=backend)
    whole = backend.get(result.run_id)
    part = backend.get(result.run_id, reply_chars=5)
    for full, cut in zip(whole["turns"], part["turns"], strict=True):
        assert cut["reply"] == full["reply"][:5] and cut["reply_length"] == len(full["reply"])
        assert cut["messages"] is None and full["messages"]
        read = backend.turn_text(result.run_id, full["idx"], 10)
        assert read == {"reply": full["reply"][:10], "reply_length": len(full["reply"]),
                        "messages": full["messages"]}
    with pytest.raises(KeyError):
        backend.turn_text(result.run_id, 99, 10)


# --------------------------------------------------------------------------- the store
def test_a_cut_reply_keeps_its_size_through_export_and_import(backend, recording_model):
    reply = "STANCE: 42\n" + "x" * MB
    voters = [Seat("a", recording_model([json.dumps({"stance": "42"}) + reply])),
              Seat("b", recording_model([json.dumps({"stance": "41"})]))]
    result = run_vote("What is 6 x 7?", voters=voters, store=backend)
    sizes = [t["reply_bytes"] for t in backend.get(result.run_id)["turns"]]
    assert sorted(sizes, key=str) == [len(json.dumps({"stance": "42"}) + reply), None]
    exported = backend.export_run(result.run_id)
    backend.delete([result.run_id])
    assert backend.import_runs(exported) == [result.run_id]
    assert [t["reply_bytes"] for t in backend.get(result.run_id)["turns"]] == sizes


def test_migration_0019_adds_reply_bytes_to_older_turns(backend):
    result = run_vote("What is 6 x 7?", voters=["simulated"] * 2, store=backend)
    with backend.engine.begin() as connection:  # as 0018 left it
        connection.execute(text("ALTER TABLE turns DROP COLUMN reply_bytes"))
        connection.execute(text("DELETE FROM schema_migrations "
                                "WHERE name = '0019_reply_bytes'"))
    backend.engine.dispose()
    reopened = Store(backend.url)
    assert "reply_bytes" in table_columns(reopened, "turns")
    assert [t["reply_bytes"] for t in reopened.get(result.run_id)["turns"]] == [None, None]
    assert reopened.migrate() == []
