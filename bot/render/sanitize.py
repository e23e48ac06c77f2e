"""Neutralise untrusted text before it reaches markdown.

Anything a PR's code can produce (exception messages, tracebacks, case names, branch names)
is untrusted. After these functions it cannot ping anyone, inject HTML, break out of its
table cell or code block, become a live link, or forge the bot's hidden marker.
"""

from __future__ import annotations

import re

from markupsafe import Markup

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
# C0/C1 controls except tab and newline, bidi overrides (trojan source), zero-width joiners.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ufeff]")
_MENTION = re.compile(r"@(?=[A-Za-z0-9_-])")
_ISSUE_REF = re.compile(r"#(?=\d)")
# What GitHub turns into links by itself: `GH-1`, `https://...` (full issue and PR URLs become
# cross-references), `www.` and `mailto:`/`xmpp:` autolinks. A zero-width space breaks each.
_AUTOLINK = re.compile(r"(?i)gh-(?=\d)|:(?=//)|www(?=\.)|(?:mailto|xmpp):")
# A link target the bot itself builds (the run's artifacts page): https, no markdown syntax.
_SAFE_URL = re.compile(r"https://[A-Za-z0-9.-]+(?::[0-9]+)?(?:/[A-Za-z0-9._~/%=&?+-]*)?")
_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~])")
ZWSP = "\u200b"


def clean(text: object, limit: int = 2000) -> str:
    """Strip terminal escapes and invisible controls; neutralise comment delimiters; cap size."""
    s = str(text)
    s = _ANSI.sub("", s)
    s = _CONTROL.sub("", s)
    # `<!--` and `-->` could open, close or forge the bot's hidden marker.
    s = s.replace("<!--", "<" + ZWSP + "!--").replace("-->", "--" + ZWSP + ">")
    if len(s) > limit:
        s = s[: limit - 1] + "…"
    return s


def _no_pings(s: str) -> str:
    """No mention, issue reference or autolink: GitHub would ping, cross-reference or link."""
    s = _AUTOLINK.sub(lambda m: m.group() + ZWSP, s)
    return _ISSUE_REF.sub("#" + ZWSP, _MENTION.sub("@" + ZWSP, s))


def md_text(text: object, limit: int = 300) -> Markup:
    """Inline text: one line, markdown and HTML special characters escaped, no pings."""
    s = clean(text, limit).replace("\r", " ").replace("\n", " ")
    s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    s = _MD_SPECIAL.sub(r"\\\1", s)
    return Markup(_no_pings(s))


def md_code(text: object, limit: int = 200) -> Markup:
    """An inline code span that is safe inside a table cell."""
    s = clean(text, limit).replace("\r", " ").replace("\n", " ")
    longest = max((len(m) for m in re.findall(r"`+", s)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if s.startswith("`") or s.endswith("`") or not s.strip() else ""
    # GitHub splits table cells on `|` before parsing code spans; `\|` survives inside them.
    s = _no_pings(s.replace("|", "\\|"))
    return Markup(f"{fence}{pad}{s}{pad}{fence}")


def html_code(text: object, limit: int = 200) -> Markup:
    """Inline code inside an HTML element (a `<summary>`), where markdown's backticks would
    show literally: `<code>` with the text HTML-escaped, no pings."""
    s = clean(text, limit).replace("\r", " ").replace("\n", " ")
    s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return Markup(f"<code>{_no_pings(s)}</code>")


def md_block(text: object, limit: int = 4000, lang: str = "") -> Markup:
    """A fenced code block whose fence is longer than any backtick run inside it."""
    s = clean(text, limit).replace("\r\n", "\n").replace("\r", "\n")
    longest = max((len(m) for m in re.findall(r"`{3,}|~{3,}", s)), default=0)
    fence = "`" * max(3, longest + 1)
    # GitHub does not ping from code blocks, but the body must not carry a mention at all.
    return Markup(f"{fence}{lang}\n{_no_pings(s)}\n{fence}")


def md_url(url: str | None) -> Markup | None:
    """A link target for `[text](url)`: only a plain https URL passes, anything else is dropped."""
    if url is None or not _SAFE_URL.fullmatch(url):
        return None
    return Markup(url)


def finalize(value: object) -> object:
    """Jinja finalize hook: every `{{ }}` output not already marked safe is escaped."""
    if value is None:
        return ""
    if isinstance(value, Markup):
        return value
    if isinstance(value, bool | int | float):
        return value
    return md_text(value)
