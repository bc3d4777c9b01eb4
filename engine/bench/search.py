"""Search benchmark: full-text search over 10,000 stored runs (the dashboard's fixture, with
its turns), through the store's transcript filter (`Store.runs(transcript=...)`) and the Runs
page that reads it.

A word found in most runs (every ballot says it) costs the most: each match is read. A rare
word and a two-word phrase show the usual case. Figures are measured here, never asserted.
"""
from __future__ import annotations

import re
import tempfile
from collections import Counter
from pathlib import Path

from engine.bench.dashboard import make_fixture, runs_page
from engine.bench.table import Row, timed
from engine.store import RunFilters, Store


def _words(store: Store) -> tuple[str, str]:
    """The most frequent longer word in a sample of replies (a word most runs share), and a
    two-word phrase taken from a reply that holds it."""
    replies = store.turns(list(store.runs(limit=300, with_config=False)["id"]))["reply"]
    counts: Counter[str] = Counter()
    for reply in replies:
        counts.update({w.lower() for w in re.findall(r"[A-Za-z]{6,}", reply)})
    word = counts.most_common(1)[0][0] if counts else "question"
    for reply in replies:
        pairs = re.findall(rf"\b({word}\s+[A-Za-z]+)\b", reply, flags=re.IGNORECASE)
        if pairs:
            return word, " ".join(pairs[0].split())
    return word, word


def bench_search(n: int = 10_000) -> list[Row]:
    """Rows for the benchmark table: index size, then search and filter times."""
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{Path(folder) / 'search.db'}"
        size = f"{n:,} runs"
        rows = [timed(f"search fixture: {size} with turns, indexed by triggers on insert",
                      lambda: make_fixture(url, n), repeats=1)]
        store = Store(url)
        word, phrase = _words(store)
        found = len(store.runs(transcript=word, with_config=False))

        def newest(text: str) -> object:
            return store.runs(transcript=text, limit=50, with_config=False)
        rows += [
            timed(f"search: Store.runs, newest 50 of {found:,} runs matching '{word}' ({size})",
                  lambda: newest(word), "< 0.5 s"),
            timed(f"search: Store.runs, a word in no run ({size})",
                  lambda: newest("zyzzyva"), "< 0.5 s"),
            timed(f"search: Store.runs, a phrase (\"{phrase}\") ({size})",
                  lambda: newest(f'"{phrase}"'), "< 0.5 s"),
            timed(f"runs page, transcript search '{word}' (newest 200 + snippets) ({size})",
                  lambda: runs_page(store, RunFilters(transcript=word)), "< 2 s"),
        ]
        store.close()
    return rows

