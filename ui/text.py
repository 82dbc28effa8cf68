"""User text (job and run names, model paths, error messages) shown literally in Streamlit markdown.

Streamlit renders ``st.markdown``, captions, alerts, subheaders and expander labels as
Markdown with its own extensions (``:red[...]``, ``:material/icon:``, ``$math$``): a job
named ``![b](http://host/x.png)`` would become a remote image. :func:`escape_markdown`
backslash-escapes every character Markdown or those extensions give a meaning, so the
text shows as typed; code spans (backticks) are the other way (:func:`code_span`). Emoji
shortcodes (``:x:`` would show as ❌) are matched after Markdown is parsed, on the text itself, so
no escape stops them: a word joiner (U+2060, invisible) goes after the colon that opens one. Every page
shows user text through these (names, paths, errors, query values): :func:`shown` quotes what a
user typed by a short prefix, escaped.
"""

from __future__ import annotations

import re
from typing import Any

from engine.spec.text import QUOTED_CHARS, quoted

# Characters that start markup anywhere, and the ones that do only in some places: "_" at a
# word's edge (emphasis; max_num_seqs stays readable), ":" before a name (``:red[``,
# ``:material/x:``, emoji), "&" of an entity, and a list marker at the start.
_SPECIAL = re.compile(
    r"[\\`*\[\]<>#|~$]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])|:(?=[A-Za-z])|&(?=#?\w+;)|^[-+]|^\d+(?=[.)])"
)
# An emoji shortcode's name in escaped text: word characters, + and - (Streamlit's remark-emoji matches
# ``:[\w-]+:``, ``:+1:`` and ``:-1:``), followed by a colon; only names with a letter and the four below are
# emoji (times such as 12:30:45 keep their colons as they are).
_SHORTCODE = re.compile(r":((?:[\w+\-]|\\[_+\-])+)(?=\\?:)")
_NAMES_WITHOUT_LETTERS = ("+1", "-1", "100", "1234")  # Streamlit 1.67's emoji names without a letter
WORD_JOINER = "\u2060"


def escape_markdown(text: Any) -> str:
    """``text`` on one line with every character that Markdown or Streamlit would turn into markup escaped."""
    value = " ".join(("" if text is None else str(text)).split())
    return _SHORTCODE.sub(_break_shortcode, _SPECIAL.sub(_escape, value))


def _break_shortcode(match: re.Match[str]) -> str:
    name = match.group(1)
    emoji = any(c.isalpha() for c in name) or name.replace("\\", "") in _NAMES_WITHOUT_LETTERS
    return f":{WORD_JOINER}{name}" if emoji else match.group()


def _escape(match: re.Match[str]) -> str:
    found = match.group()
    return found + "\\" if found[0].isdigit() else "\\" + found  # "1." -> "1\." (the list marker's dot)


def code_span(text: Any) -> str:
    """``text`` as an inline code span that no backtick in it can close (shown literally)."""
    value = " ".join(("" if text is None else str(text)).split())
    longest = max((len(m) for m in re.findall(r"`+", value)), default=0)
    fence = "`" * (longest + 1)
    return f"{fence} {value} {fence}" if longest else f"{fence}{value}{fence}"


def shown(value: Any, most: int = QUOTED_CHARS) -> str:
    """A user's value quoted in a message: a short prefix of it (:func:`engine.spec.text.quoted`), escaped."""
    return escape_markdown(quoted("" if value is None else value, most))
