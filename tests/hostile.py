"""Hostile inputs shared by the property tests and the fuzz run (bench/fuzz.py).

- `json_values`: any JSON value, biased towards the shapes that break readers (wrong types,
  empty containers, huge and negative numbers, NaN-free floats, odd strings).
- `hostile_text`: text a pull request's code can produce, biased towards what breaks
  markdown, HTML, terminals and GitHub (mentions, comment delimiters, fences, pipes, bidi
  controls, ANSI escapes, workflow commands), mixed with arbitrary Unicode.
- `Mutator`: structured mutations of a valid run record directory (run.json fields, the file
  list, failures.json, parquet columns, bytes), optionally re-checksummed so the reader is
  driven past its checksum check into the tables; seeded, so a failure is reproducible.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import strategies as st

from bot.render.comment import GITHUB_COMMENT_LIMIT, MARKER_PREFIX, Marker
from bot.render.sanitize import ZWSP
from collector.record import RUN_JSON, sha256_file

FRAGMENTS = [
    "@octocat",
    "@github/security",
    "#1",
    "owner/repo#42",
    "GH-1",
    "gh-77",
    "https://github.com/octo/repo/issues/1",
    "https://github.com/octo/repo/pull/2#issuecomment-3",
    "HTTP://EVIL.example/x",
    "www.example.com",
    "WWW.Example.org/path",
    "mailto:a@b.example",
    "xmpp:bot@chat.example",
    "ftp://files.example",
    "<!--",
    "-->",
    '<!-- collectbot {"backend": "torch", "gpu": "X"} -->',
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "</details>",
    "<details>",
    "|",
    "\\|",
    "`",
    "```",
    "~~~",
    "\n",
    "\r\n",
    "\r",
    "\t",
    "\x00",
    "\x1b[31m",
    "\x1b]8;;http://x\x07",
    "\u202e",
    "\u2066",
    "\u200b",
    "\ufeff",
    "[x](javascript:alert(1))",
    "![i](http://x/y.png)",
    "&lt;",
    "&#64;",
    "*",
    "_",
    "~",
    "\\",
    "::set-output name=trigger::true",
    "::add-mask::x",
    "::stop-commands::x",
    "${{ secrets.GITHUB_TOKEN }}",
    "$(rm -rf /)",
    "İ",
    "ﬀ",
    "K",
    "\ud7ff",
    "💥",
]

hostile_text = st.lists(
    st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=12)), max_size=12
).map("".join)

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    hostile_text,
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(hostile_text, inner, max_size=4)
    ),
    max_leaves=12,
)

RUN_JSON_KEYS = (
    "schema_version", "run_id", "status", "ops", "files", "framework", "framework_version",
    "device", "counts", "backend", "started_at", "shard", "protocol", "command", "git_sha",
    "image", "versions", "canary", "error",
)  # fmt: skip


def _random_json(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(9 if depth < 3 else 6)
    if kind == 0:
        return None
    if kind == 1:
        return rng.random() < 0.5
    if kind == 2:
        return rng.choice([0, -1, 1, 2**63, -(2**63), 10**30, rng.randrange(-1000, 1000)])
    if kind == 3:
        return rng.choice([0.0, -0.0, 1e308, -1e-308, rng.uniform(-1e6, 1e6)])
    if kind in (4, 5):
        return random_text(rng)
    if kind == 6:
        return [_random_json(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {random_text(rng): _random_json(rng, depth + 1) for _ in range(rng.randrange(4))}


def random_text(rng: random.Random, pieces: int = 6) -> str:
    out = []
    for _ in range(rng.randrange(pieces + 1)):
        if rng.random() < 0.6:
            out.append(rng.choice(FRAGMENTS))
        else:
            points = (
                rng.choice([rng.randrange(32, 127), rng.randrange(0x110000)]) for _ in range(8)
            )
            # Surrogates are not text: no UTF-8 encoder takes them, and no process emits them.
            out.append("".join(chr(p) if not 0xD800 <= p < 0xE000 else "\ufffd" for p in points))
    return "".join(out)


def _random_column(rng: random.Random, n: int) -> pa.Array:
    kind = rng.randrange(7)
    if kind == 0:
        return pa.array([random_text(rng, 2) for _ in range(n)])
    if kind == 1:
        return pa.array([rng.choice([0, -5, 2**62, 7]) for _ in range(n)], type=pa.int64())
    if kind == 2:
        values = [float("nan"), float("inf"), -1.0, 0.0, 1e-300, 3.5]
        return pa.array([rng.choice(values) for _ in range(n)], type=pa.float64())
    if kind == 3:
        return pa.nulls(n)
    if kind == 4:
        return pa.array([rng.random() < 0.5 for _ in range(n)])
    if kind == 5:
        return pa.array([[1, 2]] * n)
    return pa.array([None if rng.random() < 0.5 else 1.5 for _ in range(n)], type=pa.float32())


class Mutator:
    """Apply 1-3 random structured mutations to a record directory."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def mutate(self, run: Path) -> list[str]:
        done = []
        for _ in range(self.rng.randrange(1, 4)):
            op = self.rng.choice(
                [self.run_json_field, self.files_entry, self.failures, self.column, self.bytes]
            )
            done.append(op(run))
        if self.rng.random() < 0.7:
            self.rechecksum(run)
            done.append("rechecksum")
        return done

    def _meta(self, run: Path) -> dict[str, Any] | None:
        try:
            meta = json.loads((run / RUN_JSON).read_text())
        except (ValueError, UnicodeDecodeError):
            return None
        return meta if isinstance(meta, dict) else None

    def _write_meta(self, run: Path, meta: Any) -> None:
        (run / RUN_JSON).write_text(json.dumps(meta))

    def run_json_field(self, run: Path) -> str:
        meta = self._meta(run)
        if meta is None:
            return "run.json unreadable"
        key = self.rng.choice([*RUN_JSON_KEYS, random_text(self.rng, 1)])
        if self.rng.random() < 0.25:
            meta.pop(key, None)
            what = f"del {key}"
        else:
            meta[key] = _random_json(self.rng)
            what = f"set {key}"
        if self.rng.random() < 0.05:
            meta = _random_json(self.rng)  # not even an object
        self._write_meta(run, meta)
        return what

    def files_entry(self, run: Path) -> str:
        meta = self._meta(run)
        if meta is None or not isinstance(meta.get("files"), dict):
            return "files unreachable"
        name = self.rng.choice(
            ["../run.json", "", ".", "..", "a/b", "x\x00y", "gemm_perf.parquet", "nope.bin",
             random_text(self.rng, 1)]
        )  # fmt: skip
        meta["files"][name] = _random_json(self.rng) if self.rng.random() < 0.5 else "0" * 64
        self._write_meta(run, meta)
        return f"files[{name!r}]"

    def failures(self, run: Path) -> str:
        path = run / "failures.json"
        roll = self.rng.random()
        if roll < 0.3:
            data: Any = _random_json(self.rng)
        else:
            data = [
                {
                    **{k: _random_json(self.rng) for k in self.rng.sample(FAILURE_KEYS, 5)},
                    "case_key": random_text(self.rng, 2),
                    "group_key": random_text(self.rng, 2),
                }
                for _ in range(self.rng.randrange(3))
            ]
        path.write_text(json.dumps(data))
        return "failures.json"

    def column(self, run: Path) -> str:
        name = self.rng.choice(["gemm_perf.parquet", "gemm_samples.parquet"])
        path = run / name
        try:
            table = pq.read_table(path)
            names = table.column_names
        except Exception:  # already damaged by an earlier mutation
            return f"{name} unreadable"
        col = self.rng.choice(names)
        roll = self.rng.random()
        if roll < 0.2:
            table = table.drop_columns([col])
        elif roll < 0.3 and table.num_rows:
            table = pa.concat_tables([table, table.slice(0, 1)])
        elif roll < 0.35:
            table = table.slice(0, 0)
        else:
            i = table.schema.get_field_index(col)
            table = table.set_column(i, col, _random_column(self.rng, table.num_rows))
        pq.write_table(table, path)
        return f"{name}:{col}"

    def bytes(self, run: Path) -> str:
        files = sorted(p for p in run.iterdir() if p.is_file())
        path = self.rng.choice(files)
        data = bytearray(path.read_bytes())
        roll = self.rng.random()
        if roll < 0.4 and data:
            data = data[: self.rng.randrange(len(data))]
        elif roll < 0.8 and data:
            for _ in range(self.rng.randrange(1, 8)):
                data[self.rng.randrange(len(data))] = self.rng.randrange(256)
        else:
            data = bytearray(self.rng.randbytes(self.rng.randrange(64)))
        path.write_bytes(bytes(data))
        return f"bytes {path.name}"

    def rechecksum(self, run: Path) -> None:
        meta = self._meta(run)
        if meta is None or not isinstance(meta.get("files"), dict):
            return
        for name in list(meta["files"]):
            target = run / name if isinstance(name, str) and name else None
            if target is not None and "/" not in name and target.is_file():
                meta["files"][name] = sha256_file(target)
        self._write_meta(run, meta)


FAILURE_KEYS = [
    "task_id", "op", "params", "dtype", "classification", "exception_type", "message",
    "traceback", "exit_code", "signal", "worker", "device", "run_index", "timestamp",
]  # fmt: skip


# What no sanitised output may contain.
MENTION = re.compile(r"@[A-Za-z0-9_-]")
ISSUE = re.compile(r"#\d")
# What GitHub autolinks (URLs, `www.`, GH-N references, mail and chat addresses).
AUTOLINK = re.compile(r"(?i)://|www\.|gh-\d|(?:mailto|xmpp):(?!\u200b)")
INVISIBLE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ufeff]")


def unescaped_pipes(s: str) -> int:
    """Pipes without a backslash right before them: GitHub splits table cells on those.

    (GFM's cell scanner treats a backslash-pipe pair as an escaped pipe wherever it stands,
    before any inline parsing, code spans included.)"""
    return len(re.findall(r"(?<!\\)\|", s))


def assert_safe_comment(body: str) -> None:
    """What any rendered comment must satisfy, whatever the records held."""
    assert len(body) <= GITHUB_COMMENT_LIMIT
    assert body.count("<!--") == 1 and body.count("-->") == 1
    assert body.startswith(MARKER_PREFIX) and Marker.parse(body) is not None
    assert not MENTION.search(body), MENTION.search(body)
    assert not ISSUE.search(body), ISSUE.search(body)
    # (The marker line is an HTML comment: nothing in it is rendered, so nothing links.)
    assert not AUTOLINK.search(body.partition("\n")[2]), AUTOLINK.search(body.partition("\n")[2])
    assert not INVISIBLE.search(body.replace("\n", "").replace("\t", ""))
    prose = re.sub(r"(?ms)^(`{3,})[^\n]*\n.*?^\1\s*$", "", body)
    prose = re.sub(r"(`+)(?:(?!\1).)+?\1", "", prose)
    tags = set(re.findall(r"</?([a-zA-Z]+)", prose))
    assert tags <= {"details", "summary", "sub", "code"}, tags  # <code>: ours, in <summary>
    assert prose.count("<details>") == prose.count("</details>")
    assert ZWSP not in body.split("\n", 1)[0]  # the marker line is never touched
