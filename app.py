"""LatencyLab: the sign-in gate, the st.navigation router and the shared sidebar; nothing else."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from ui import auth
from ui.common import sidebar

ROOT = Path(__file__).resolve().parent

# (file, title, icon, url path, section); pages whose file does not exist are left out.
PAGES: list[tuple[str, str, str, str, str]] = [
    ("views/runs.py", "Runs", ":material/table_rows:", "runs", "Results"),
    ("views/run.py", "Run", ":material/insights:", "run", "Results"),
    ("views/explore.py", "Explore", ":material/scatter_plot:", "explore", "Results"),
    ("views/loadcurve.py", "Load curves", ":material/show_chart:", "loadcurve", "Results"),
    ("views/compare.py", "Compare", ":material/compare_arrows:", "compare", "Results"),
    ("views/launch.py", "Launch", ":material/rocket_launch:", "launch", "Benchmark"),
    ("views/jobs.py", "Jobs", ":material/pending_actions:", "jobs", "Benchmark"),
    ("views/optimize.py", "Optimize", ":material/tune:", "optimize", "Benchmark"),
    ("views/history.py", "History", ":material/timeline:", "history", "Results"),
    ("views/whatif.py", "What-if", ":material/calculate:", "whatif", "Estimate"),
]


def main() -> None:
    st.set_page_config(page_title="LatencyLab", page_icon=":material/speed:", layout="wide")
    if not auth.gate([p[3] for p in PAGES]):  # refused (open address, no sign-in) or signed out: nothing runs
        return
    sections: dict[str, list] = {}
    for i, (file, title, icon, url_path, section) in enumerate(PAGES):
        if (ROOT / file).is_file():
            page = st.Page(file, title=title, icon=icon, url_path=url_path, default=(i == 0))
            sections.setdefault(section, []).append(page)
    nav = st.navigation(sections)
    sidebar()
    with st.sidebar:
        auth.sidebar_identity()
    nav.run()


main()
