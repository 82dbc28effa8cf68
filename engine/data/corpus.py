"""The default text corpus: English prose assembled at run time from the docstrings of
Python standard-library modules. It exists offline on every machine, is deterministic
for a given Python version, and nothing is copied into the repository.

It comes in two disjoint parts, so that no recipe is scored on text it was tuned on:

- the **evaluation part** (:func:`evaluation_part`): the paragraphs of
  :data:`EVALUATION_MODULES` (argparse .. difflib), i.e. the first ~34k characters of
  :func:`default_corpus` (about 7,500 tokens for the demo model's tokenizer). The accuracy
  phase scores only this part of the default corpus.
- the **calibration part** (:func:`calibration_part`): the paragraphs of the remaining
  modules (email .. zipfile, ~130k characters), less every paragraph that repeats a
  sentence (or a whole paragraph) of the evaluation part. GPTQ without a calibration
  file calibrates on this part only.
"""

from __future__ import annotations

import importlib
import inspect
import os
import re
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

EVALUATION_MODULES: tuple[str, ...] = (
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
)
CALIBRATION_MODULES: tuple[str, ...] = (
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
CORPUS_MODULES: tuple[str, ...] = EVALUATION_MODULES + CALIBRATION_MODULES


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


def _cache_file() -> Path | None:
    """Where the paragraphs of this Python's standard library are kept once assembled: the key is the
    interpreter's version and every corpus module's source file (size and time), so it never goes stale."""
    import hashlib
    import importlib.util

    from engine.settings import get_settings

    key = [sys.version]
    for name in CORPUS_MODULES:
        try:
            spec = importlib.util.find_spec(name)
            origin = Path(spec.origin) if spec is not None and spec.origin else None
            stat = origin.stat() if origin is not None else None
        except (ImportError, ValueError, OSError):
            stat = None
        key.append(f"{name}:{stat.st_size}:{stat.st_mtime_ns}" if stat else f"{name}:-")
    digest = hashlib.sha256("\n".join(key).encode()).hexdigest()[:16]
    try:
        return get_settings().cache_dir / "corpus" / f"paragraphs-{digest}.json"
    except (OSError, ValueError):  # pragma: no cover - no usable cache folder
        return None


@lru_cache(maxsize=1)
def _paragraphs() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Prose paragraphs of the evaluation modules and of the calibration modules, each paragraph once
    (the first module that has it keeps it); assembled once per Python and kept in the cache folder
    (importing 46 modules for their docstrings costs a third of a second at every start)."""
    import json

    cached = _cache_file()
    try:
        if cached is not None and cached.is_file():
            evaluation, calibration = json.loads(cached.read_text(encoding="utf-8"))
            return tuple(evaluation), tuple(calibration)
    except (OSError, ValueError, TypeError):
        pass
    parts = _assemble()
    if cached is not None:
        try:
            cached.parent.mkdir(parents=True, exist_ok=True)
            tmp = cached.with_name(f".{cached.name}.{os.getpid()}")
            tmp.write_text(json.dumps(parts), encoding="utf-8")
            tmp.replace(cached)  # atomic: a concurrent job never reads half a file
        except OSError:
            pass
    return parts


def _assemble() -> tuple[tuple[str, ...], tuple[str, ...]]:
    parts: tuple[list[str], list[str]] = ([], [])
    seen: set[str] = set()
    for module_name in CORPUS_MODULES:
        out = parts[0] if module_name in EVALUATION_MODULES else parts[1]
        for doc in _docstrings(module_name):
            for para in doc.split("\n\n"):
                text = " ".join(para.split())
                if _is_prose(text) and text not in seen:
                    seen.add(text)
                    out.append(text)
    return tuple(parts[0]), tuple(parts[1])


@lru_cache(maxsize=1)
def default_corpus() -> str:
    """Deterministic English text (about 165 kB) from standard-library docstrings: the
    evaluation part, then every paragraph of the calibration modules."""
    evaluation, calibration = _paragraphs()
    return "\n\n".join(evaluation + calibration)


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def _sentences(paragraph: str) -> set[str]:
    return {s for s in _SENTENCE_END.split(paragraph) if len(s.split()) >= 5}


@dataclass(frozen=True)
class CorpusPart:
    """One part of the default corpus: its text and where it lies in :func:`default_corpus`."""

    name: str  # "evaluation" or "calibration"
    text: str
    start: int  # offset of its first character in default_corpus()
    end: int  # offset just past its last character
    dropped: int = 0  # paragraphs left out because they repeat evaluation text

    def describe(self) -> str:
        """e.g. ``default corpus, calibration part (chars 33,811-164,715 of 164,715, ...)``."""
        total = len(default_corpus())
        where = f"chars {self.start:,}-{self.end:,} of {total:,}"
        if self.dropped:
            where += f"; {self.dropped} paragraphs that repeat evaluation text left out"
        py = f"Python {sys.version_info[0]}.{sys.version_info[1]}"
        return f"default corpus ({py} standard-library docstrings), {self.name} part ({where})"


@lru_cache(maxsize=1)
def evaluation_part() -> CorpusPart:
    """The part of the default corpus that accuracy is scored on (a prefix of it)."""
    evaluation, _ = _paragraphs()
    text = "\n\n".join(evaluation)
    return CorpusPart("evaluation", text, 0, len(text))


@lru_cache(maxsize=1)
def calibration_part() -> CorpusPart:
    """The part of the default corpus that calibrates (GPTQ): after the evaluation part,
    without any paragraph that shares a sentence with it or contains or is one of its paragraphs."""
    evaluation, calibration = _paragraphs()
    eval_text = "\n\n".join(evaluation)
    eval_sentences = set().union(*(_sentences(p) for p in evaluation))
    kept = [
        p
        for p in calibration
        if not (_sentences(p) & eval_sentences) and p not in eval_text and not any(e in p for e in evaluation)
    ]
    start = len(eval_text) + 2 if evaluation else 0  # past the paragraph break
    return CorpusPart("calibration", "\n\n".join(kept), start, len(default_corpus()), len(calibration) - len(kept))


def calibration_source(calibration_file: str | None) -> str:
    """What GPTQ calibrates on, as recorded in a run: the user's file, or this corpus's
    calibration part (with its character range)."""
    return calibration_file or calibration_part().describe()
