"""User text shown literally in Streamlit's Markdown (pure: no Streamlit).

Every Streamlit element that displays text (``st.markdown``, ``st.warning``, ``st.caption``, widget labels)
renders it as Markdown with Streamlit's extensions: links and images, GFM autolinks of bare ``www.`` /
``http://`` / e-mail text, ``:material/icon:`` and emoji shortcodes, ``:red[...]`` directives and ``$...$``
LaTeX.  Text a user controls (a URL parameter, a file name, a value quoted in an error) goes through
``md_escape`` before it is interpolated; a message built with Markdown code spans around our own names goes
through ``md_message``.
"""
from __future__ import annotations

import re
from typing import Any

#: The ASCII punctuation Markdown (CommonMark, GFM and Streamlit's extensions) gives a meaning to; each is
#: backslash-escaped, which CommonMark renders as the character itself.
MD_SPECIALS = "\\`*_{}[]()#+-.!|<>~$:&"
_SPECIALS_RE = re.compile("([" + re.escape(MD_SPECIALS) + "])")
#: U+2060 WORD JOINER: invisible, and breaks what a backslash cannot.  Streamlit applies emoji shortcodes
#: (``:smile:``), ``:material/...:`` icons and GFM autolink literals (``http://``, ``www.``, ``a@b.c``) to the
#: text *after* Markdown parsing, so an escaped ``\\:smile\\:`` would still become an emoji: a joiner after
#: each ``:`` / ``@`` followed by a non-space and inside ``www.`` stops them.
WORD_JOINER = "\u2060"
_JOIN_AFTER_RE = re.compile(r"([:@])(?=\S)")
_WWW_RE = re.compile(r"(www)(?=\.)", re.IGNORECASE)
_LINE_BREAK_RE = re.compile(r"[\r\n\x0b\x0c\x85\u2028\u2029]+")
#: A code span this module keeps as code in ``md_message``: our own identifiers (parameter and field names).
_SAFE_CODE_RE = re.compile(r"(`[A-Za-z0-9_.]+`)")


def md_escape(text: Any) -> str:
    """``str(text)`` shown literally by Streamlit's Markdown: line breaks become spaces (no new block: heading,
    list, quote, table), every Markdown special (``MD_SPECIALS``: ``\\ ` * _ { } [ ] ( ) # + - . ! | < > ~ $ :
    &``) is backslash-escaped (no link, image, emphasis, code, HTML, directive, LaTeX), and a word joiner
    (``WORD_JOINER``, invisible) breaks emoji and icon shortcodes and autolinks of bare URLs and addresses.
    What the reader sees is the text itself (the joiners are zero-width)."""
    s = _LINE_BREAK_RE.sub(" ", str(text))
    s = _WWW_RE.sub(lambda m: m.group(1) + WORD_JOINER, s)
    s = _JOIN_AFTER_RE.sub(lambda m: m.group(1) + WORD_JOINER, s)
    return _SPECIALS_RE.sub(r"\\\1", s)


def md_message(text: Any) -> str:
    """A plain-text message (which may quote user text anywhere) as safe Markdown: code spans holding only
    identifier characters (``A-Z a-z 0-9 _ .``, e.g. ```gpu``` naming a parameter) stay code spans, and
    everything else goes through ``md_escape`` (a stray backtick included), so no user text can become a
    link, an image, an icon or formatting."""
    parts = _SAFE_CODE_RE.split(str(text))
    return "".join(p if i % 2 else md_escape(p) for i, p in enumerate(parts))
