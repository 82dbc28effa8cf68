"""A user's prompt file, read streamed and bounded: one prompt per line, or JSON lines with a ``prompt`` (or
``text``) string.

A line whose first non-blank character is ``{`` is a JSON object (:func:`engine.data.reading.json_line`: its
depth bounded); any other non-blank line is a prompt as it is (its line ending dropped). Lines are split at
``\\n`` only. The file is at most :data:`MAX_PROMPT_FILE_BYTES` (every prompt is tokenized before the run; a
larger corpus is a dataset, streamed and sampled). Problems fail in one line naming the file, the line and the
field (``prompts.jsonl line 3: field 'prompt': must be text, not a list``), never quoting a line.
"""

from __future__ import annotations

from pathlib import Path

from engine.data.reading import json_line, kind_of, line_place, problem, text_lines
from engine.spec import SpecError

MAX_PROMPT_FILE_BYTES = 64 << 20
PROMPT_FIELDS = ("prompt", "text")


def prompt_file(path: str | Path) -> Path:
    """``path`` as a readable file no larger than :data:`MAX_PROMPT_FILE_BYTES`; SpecError in one line otherwise."""
    file = Path(path).expanduser()
    if file.is_dir():
        raise SpecError(f"prompt file {file} is a folder, not a file")
    if not file.is_file():
        raise SpecError(f"prompt file {file} does not exist")
    size = file.stat().st_size
    if size > MAX_PROMPT_FILE_BYTES:
        raise SpecError(
            f"prompt file {file} is {size / (1 << 20):,.0f} MiB; at most {MAX_PROMPT_FILE_BYTES >> 20} MiB "
            "(a larger corpus is a dataset: streamed and sampled)"
        )
    return file


def read_prompts(path: str | Path, most: int | None = None) -> list[str]:
    """The prompts of a prompt file in order (the first ``most`` of them when given); at least one."""
    file = prompt_file(path)
    prompts: list[str] = []
    try:
        for number, text in text_lines(file):
            if most is not None and len(prompts) >= most:
                break
            if not text.strip():
                continue
            prompts.append(_prompt(text, line_place(file, number)))
    except OSError as exc:
        raise SpecError(f"prompt file {file} cannot be read ({exc.strerror or type(exc).__name__})") from exc
    except SpecError as exc:  # a line the reader refuses (not UTF-8, too long): said as the prompt file's
        text = str(exc)
        raise (exc if text.startswith("prompt file") else SpecError(f"prompt file {text}")) from None
    if not prompts:
        raise SpecError(f"prompt file {file} holds no prompts")
    return prompts


def _prompt(text: str, where: str) -> str:
    """One non-blank line's prompt: the line itself, or a JSON object's ``prompt`` (else ``text``) string."""
    if not text.lstrip().startswith("{"):
        return text.rstrip("\r\n")
    obj = json_line(text, where)
    if not isinstance(obj, dict):
        raise problem(where, None, f"a line starting with '{{' must be a JSON object, not {kind_of(obj)}")
    field = next((name for name in PROMPT_FIELDS if obj.get(name)), None)
    if field is None:
        raise problem(where, PROMPT_FIELDS[0], "missing (a JSON line needs a 'prompt' or 'text' string)")
    if not isinstance(obj[field], str):
        raise problem(where, field, f"must be text, not {kind_of(obj[field])}")
    return obj[field]
