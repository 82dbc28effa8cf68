"""Where the Launch page's file fields may point, said where they are typed: each path field's help and a caption.

The folders are the pre-flight's own (:func:`engine.settings.input_folders`): the operator's
``LATENCYLAB_ALLOWED_ROOTS``, else the data folder's ``traces/``, ``datasets/``, ``models/`` and ``prompts/``
with sign-in on; a local app without sign-in reads anywhere on its machine, and says so.
"""

from __future__ import annotations

import streamlit as st

from engine.settings import input_folders
from ui.text import escape_markdown

ANYWHERE = "This app reads files anywhere on this machine: sign-in is off."


def folders_note() -> str:
    """A path field's help: the folders its file must lie in (a symlink out of them is refused)."""
    folders = input_folders()
    if folders is None:
        return ANYWHERE
    return f"Files only from {escape_markdown(folders.words())} (a symlink out of them is refused)."


def folders_caption() -> None:
    """Launch's line on where jobs may read files."""
    folders = input_folders()
    if folders is None:
        st.caption(
            ANYWHERE, help="With sign-in on, jobs read only the data folder's traces/, datasets/, models/, prompts/"
        )
        return
    st.caption(f"Jobs read files only from {escape_markdown(folders.words())}.")
