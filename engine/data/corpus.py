"""The default text corpus: English prose assembled at run time from the docstrings of
Python standard-library modules. It exists offline on every machine, is deterministic
for a given Python version, and nothing is copied into the repository."""

from __future__ import annotations

import importlib
import inspect
from functools import lru_cache

CORPUS_MODULES: tuple[str, ...] = (
    "argparse",
    "asyncio",
    "bisect",
    "calendar",
    "collections",
    "configparser",
    "contextlib",
    "csv",
    "dataclasses",
    "datetime",
    "decimal",
    "difflib",
    "email",
    "fractions",
    "functools",
    "heapq",
    "http.client",
    "inspect",
    "ipaddress",
    "itertools",
    "json",
    "logging",
    "pathlib",
    "pickle",
    "queue",
    "random",
    "sched",
    "secrets",
    "shutil",
    "smtplib",
    "socket",
    "sqlite3",
    "statistics",
    "string",
    "subprocess",
    "tarfile",
    "tempfile",
    "textwrap",
    "threading",
    "timeit",
    "typing",
    "unittest",
    "urllib.parse",
    "urllib.request",
    "uuid",
    "zipfile",
)


def _docstrings(module_name: str) -> list[str]:
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        return []
    docs = [inspect.getdoc(module) or ""]
    for name in sorted(vars(module)):
        obj = getattr(module, name, None)
        if name.startswith("_") or getattr(obj, "__module__", None) != module.__name__:
            continue
        if inspect.isclass(obj) or inspect.isfunction(obj):
            docs.append(inspect.getdoc(obj) or "")
    return docs


def _is_prose(paragraph: str) -> bool:
    words = paragraph.split()
    if len(words) < 8:
        return False
    letters = sum(ch.isalpha() or ch.isspace() for ch in paragraph)
    return letters / len(paragraph) > 0.85 and not paragraph.lstrip().startswith((">>>", "...", "|"))


@lru_cache(maxsize=1)
def default_corpus() -> str:
    """Deterministic English text (about 300 kB) from standard-library docstrings."""
    paragraphs: list[str] = []
    seen: set[str] = set()
    for module_name in CORPUS_MODULES:
        for doc in _docstrings(module_name):
            for para in doc.split("\n\n"):
                text = " ".join(para.split())
                if _is_prose(text) and text not in seen:
                    seen.add(text)
                    paragraphs.append(text)
    return "\n\n".join(paragraphs)
