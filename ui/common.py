"""Shared UI helpers: the cached database handle, query-parameter parsing, the sidebar."""

from __future__ import annotations

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
        st.error(f"The database cannot be opened: {exc}")
        return None


def query_int(name: str) -> tuple[int | None, str | None]:
    """An integer query parameter: (value, None), (None, None) if absent, or (None, problem)."""
    raw = st.query_params.get(name)
    if raw is None or raw == "":
        return None, None
    try:
        value = int(raw)
    except ValueError:
        return None, f"'{raw}' is not a valid {name} id"
    if value < 1:
        return None, f"'{raw}' is not a valid {name} id"
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
        if part.isdigit() and int(part) > 0:
            if int(part) not in ids:
                ids.append(int(part))
        else:
            bad.append(part)
    return ids, bad


def viewer_mode() -> bool:
    return get_settings().viewer_mode


def sidebar() -> None:
    with st.sidebar:
        st.caption("LatencyLab: latency and accuracy of LLM inference recipes")
        if viewer_mode():
            st.info("Viewer mode: read-only", icon=":material/visibility:")
