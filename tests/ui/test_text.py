"""User text shown literally in Streamlit markdown: no image, link, emphasis, directive or HTML from it."""

from __future__ import annotations

import html

import pytest
from markdown_it import MarkdownIt

from ui.text import code_span, escape_markdown

MD = MarkdownIt("commonmark")


@pytest.mark.parametrize(
    "text",
    [
        "![b](http://127.0.0.1:9/x.png)",
        "[click](http://evil.example/)",
        "**bold** _em_ ~~gone~~ `code`",
        "<img src=http://127.0.0.1:9/x.png>",
        "# heading",
        "1. a list",
        "- a bullet",
        "| a | table |",
        "a\\![b](http://x/y.png)",
        "&amp; &#60;",
    ],
)
def test_escaped_text_renders_as_typed(text):
    rendered = MD.render(escape_markdown(text))
    assert "<img" not in rendered and "<a " not in rendered and "<strong>" not in rendered and "<em>" not in rendered
    assert "<h1>" not in rendered and "<ol>" not in rendered and "<ul>" not in rendered and "<code>" not in rendered
    inner = rendered.strip().removeprefix("<p>").removesuffix("</p>")
    assert html.unescape(inner) == text


def test_streamlit_directives_and_math_are_escaped_but_plain_words_stay_readable():
    assert escape_markdown(":red[x] :material/home: $x$") == "\\:red\\[x\\] \\:material/home: \\$x\\$"
    assert escape_markdown("HTTP 401: max_num_seqs (SIGKILL)") == "HTTP 401: max_num_seqs (SIGKILL)"
    assert escape_markdown("two\nlines") == "two lines" and escape_markdown(None) == ""
    assert code_span("a`b") == "`` a`b ``" and code_span("ab") == "`ab`"


# Streamlit's remark-emoji replaces these in the parsed text (after escapes are undone), so the escape must break them.
# Its names hold a letter, but for +1, -1, 100 and 1234.
EMOJI = __import__("re").compile(r":[+-]1:|:100:|:1234:|:[0-9_-]*[A-Za-z][A-Za-z0-9_-]*:")


@pytest.mark.parametrize(
    "text",
    ["root:x:0:0:root:/root:/bin/bash", ":smile: :+1: :-1: :100:", "a :_x_: b", ":heavy_check_mark:", "x:ok:y"],
)
def test_emoji_shortcodes_render_literally(text):
    rendered = MD.render(escape_markdown(text))
    inner = html.unescape(rendered.strip().removeprefix("<p>").removesuffix("</p>"))
    assert not EMOJI.search(inner)  # nothing left for remark-emoji to turn into a picture
    assert inner.replace("\u2060", "") == text  # and the text is the same once the invisible joiners go


def test_times_and_ratios_keep_their_colons():
    assert escape_markdown("12:30:45 and 1:2:3") == "12:30:45 and 1:2:3"
