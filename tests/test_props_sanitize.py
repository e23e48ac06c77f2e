"""Property tests: the comment sanitisers hold for any text, not only the examples we thought of.

Untrusted text (anything a PR's code can print or write into a record) reaches the comment
only through `md_text`, `md_code` and `md_block`. For every input: no mention can ping, no
issue reference, URL or `GH-1` reference can link, no HTML or comment delimiter gets through, a table cell cannot be
broken out of, a code span or block cannot be closed early, no terminal or bidi control
survives; and plain text comes through unchanged.
"""

from __future__ import annotations

import re

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from bot.render.comment import MARKER_PREFIX, Marker
from bot.render.sanitize import clean, md_block, md_code, md_text
from tests.hostile import (
    AUTOLINK,
    INVISIBLE,
    ISSUE,
    MENTION,
    hostile_text,
    unescaped_pipes,
)

any_text = st.one_of(hostile_text, st.text())


def common(out: str, one_line: bool = False) -> None:
    """Nothing in `out` pings, links, hides or comments; with `one_line`, no line break."""
    assert not (one_line and ("\n" in out or "\r" in out)), repr(out)
    assert not MENTION.search(out), out
    assert not ISSUE.search(out), out
    assert not AUTOLINK.search(out), out
    assert "<!--" not in out and "-->" not in out
    assert not INVISIBLE.search(out.replace("\n", "")), repr(out)


@settings(max_examples=500)
@given(text=any_text, limit=st.integers(1, 400))
def test_md_text_is_one_inert_line(text: str, limit: int) -> None:
    out = str(md_text(text, limit=limit))
    common(out, one_line=True)
    assert "<" not in out and ">" not in out  # no HTML at all: &lt; &gt;
    assert unescaped_pipes(out) == 0
    # Unescaped markdown specials would start emphasis, links or code.
    assert not re.search(r"(?<!\\)(?:\\\\)*[`*_\[\]~]", out.replace("\\\\", ""))
    assert len(out) <= 12 * limit + 1


@settings(max_examples=500)
@given(text=any_text, limit=st.integers(1, 400))
def test_md_code_is_one_span_that_cannot_be_closed_early(text: str, limit: int) -> None:
    out = str(md_code(text, limit=limit))
    common(out, one_line=True)
    fence = re.match(r"`+", out)
    assert fence is not None and out.endswith(fence.group())
    inner = out[len(fence.group()) : -len(fence.group())]
    assert fence.group() not in inner  # no backtick run as long as the fence inside
    assert unescaped_pipes(inner) == 0


@settings(max_examples=500)
@given(text=any_text, lang=st.sampled_from(["", "text", "python"]))
def test_md_block_is_one_block_that_cannot_be_closed_early(text: str, lang: str) -> None:
    out = str(md_block(text, lang=lang))
    common(out)
    first, _, rest = out.partition("\n")
    fence = first[: len(first) - len(lang)]
    assert set(fence) == {"`"} and len(fence) >= 3 and first.endswith(lang)
    inner, _, last = rest.rpartition("\n")
    assert last == fence
    assert fence not in inner
    for line in inner.split("\n"):  # no line may close the block (backticks or tildes)
        n = len(fence)
        assert not re.match(rf" {{0,3}}(`{{{n},}}|~{{{n},}})\s*$", line)


PLAIN = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 ,.:;()+=/'\""


@given(text=st.text(alphabet=PLAIN, max_size=299))
def test_plain_text_comes_through_unchanged(text: str) -> None:
    assume(not AUTOLINK.search(text))  # links are broken up on purpose
    assert str(md_text(text)) == text
    assert clean(text) == text
    assert str(md_code(text)).strip("`").strip(" ") == text.strip(" ") or not text.strip()


@settings(max_examples=300)
@given(text=any_text)
def test_clean_removes_controls_and_comment_delimiters(text: str) -> None:
    out = clean(text)
    assert "\x1b" not in out
    assert "<!--" not in out and "-->" not in out
    assert not INVISIBLE.search(out.replace("\n", "").replace("\t", ""))


@settings(max_examples=300)
@given(fields=st.lists(any_text, min_size=5, max_size=5))
def test_the_marker_survives_any_field_values(fields: list[str]) -> None:
    marker = Marker(*fields)
    line = marker.render()
    assert "\n" not in line and line.startswith(MARKER_PREFIX) and line.endswith(" -->")
    assert line.count("-->") == 1 and line.count("<!--") == 1
    parsed = Marker.parse(line + "\nbody")
    assert parsed is not None
    assert parsed == Marker.parse(Marker(**parsed.__dict__).render())  # a fixed point
    # Nothing after the first line can forge one.
    assert Marker.parse("text\n" + line) is None
