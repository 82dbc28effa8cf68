"""Shared UI helpers: the cached database handle, query-parameter parsing, the sidebar."""

from __future__ import annotations

import re
from typing import Any

import streamlit as st

from engine.settings import database_url, get_settings


@st.cache_resource(show_spinner=False)
def _database(url: str) -> Any:
    from storage import open_database

    return open_database(url)


def database() -> Any | None:
    """The app's database, or None after showing a friendly error."""
    from storage import StorageError

    url = database_url()
    try:
        return _database(url)
    except StorageError as exc:
        from ui.text import escape_markdown

        st.error(f"The database cannot be opened: {escape_markdown(exc)}")
        return None


MAX_ID = 2**63 - 1  # the largest id the databases store
_DIGITS = re.compile(r"[0-9]{1,19}")  # ASCII digits only: int() would also take "٣", "１" and "1_0"


def parse_id(raw: str) -> int | None:
    """``raw`` as an id (1 .. MAX_ID in ASCII digits), or None."""
    raw = raw.strip()
    if not _DIGITS.fullmatch(raw) or not 1 <= int(raw) <= MAX_ID:
        return None
    return int(raw)


def parse_whole(raw: str, low: int, high: int) -> int | None:
    """``raw`` as a whole number in ``[low, high]`` (ASCII digits, optional sign), or None."""
    raw = raw.strip()
    if not re.fullmatch(r"[+-]?[0-9]{1,19}", raw) or not low <= int(raw) <= high:
        return None
    return int(raw)


def shown(raw: str, most: int = 40) -> str:
    """A query value quoted for a message, cut to ``most`` characters and escaped (:func:`ui.text.shown`)."""
    from ui.text import shown as quoted_text

    return quoted_text(raw, most)


def query_int(name: str) -> tuple[int | None, str | None]:
    """An id query parameter: (value, None), (None, None) if absent, or (None, problem)."""
    raw = st.query_params.get(name)
    if raw is None or raw == "":
        return None, None
    value = parse_id(raw)
    if value is None:
        return None, f"{shown(raw)} is not a valid {name} id"
    return value, None


def query_int_list(name: str) -> tuple[list[int], list[str]]:
    """A comma-separated id list: (valid ids in order, unique), (bad parts)."""
    raw = st.query_params.get(name) or ""
    ids: list[int] = []
    bad: list[str] = []
    for part in raw.split(","):
        part = part.strip()
        if not part:
            continue
        value = parse_id(part)
        if value is None:
            bad.append(part if len(part) <= 40 else part[:40] + "...")
        elif value not in ids:
            ids.append(value)
    return ids, bad


def viewer_mode() -> bool:
    return get_settings().viewer_mode


def sidebar() -> None:
    with st.sidebar:
        st.caption("LatencyLab: latency and accuracy of LLM inference recipes")
        if viewer_mode():
            st.info("Viewer mode: read-only", icon=":material/visibility:")
