"""The text rules shared by the store, the CLI, CSV exports and charts (engine.text)."""
from __future__ import annotations

import pytest

from engine.text import (clean_text, clean_value, csv_cell, fold_name, has_visible, html_text,
                         terminal_safe)


def test_clean_text_replaces_lone_surrogates_and_nul():
    assert clean_text("a\ud800b\x00c") == "a\ufffdb\ufffdc"
    assert clean_text("plain ✓") == "plain ✓"
    assert clean_value({"k\x00": ["x\udfff", 3]}) == {"k\ufffd": ["x\ufffd", 3]}


@pytest.mark.parametrize("text, visible", [
    ("", False), ("   ", False), ("\u200b\u200c\u200d\ufeff", False), ("\u2028\t\n", False),
    ("a", True), ("\u200b?", True), ("😀", True), ("數", True)])
def test_has_visible(text, visible):
    assert has_visible(text) is visible


@pytest.mark.parametrize("a, b", [("Ana", " ana "), ("Ana", "ＡＮＡ"), ("Ana", "A\u200bna"),
                                  ("two  words", "Two Words"), ("ﬁle", "file")])
def test_fold_name_collides_lookalikes(a, b):
    assert fold_name(a) == fold_name(b)


def test_fold_name_keeps_different_names_apart():
    assert fold_name("Ana") != fold_name("Anna")


def test_terminal_safe_strips_escape_sequences():
    raw = "ok\x1b[31mred\x1b[0m \x1b]0;title\x07bell\x07 \x9b2J tab\tnl\n"
    out = terminal_safe(raw)
    assert "\x1b" not in out and "\x07" not in out and "\x9b" not in out
    assert out.startswith("okred") and "tab\tnl\n" in out


@pytest.mark.parametrize("cell", ["=1+1", "+cmd", "-2+3", "@SUM(A1)", "\tx", "\rx"])
def test_csv_cell_neutralises_formulas(cell):
    assert csv_cell(cell) == "'" + cell


def test_csv_cell_leaves_other_values():
    assert csv_cell("plain") == "plain" and csv_cell(-3) == -3 and csv_cell(None) is None


def test_html_text_escapes_tags():
    assert html_text("<b>x</b> & y") == "&lt;b&gt;x&lt;/b&gt; &amp; y"
