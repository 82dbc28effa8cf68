"""Where the scored text comes from: the bundled default corpus, a user's text file or a
Hugging Face dataset (``hf:<name>[:config[:split[:column]]]``)."""

from __future__ import annotations

from pathlib import Path

from engine.accuracy.scoring import AccuracyError
from engine.data.corpus import evaluation_part
from engine.spec import SpecError


def check_corpus(corpus: str) -> None:
    """Pre-flight: the corpus file exists, or the datasets package for ``hf:`` corpora."""
    if corpus == "default":
        return
    if corpus.startswith("hf:"):
        try:
            import datasets  # noqa: F401
        except ImportError as exc:
            raise SpecError(
                f"corpus {corpus} needs the 'datasets' package, which is not installed here "
                "(and the Hugging Face hub must be reachable); use the default corpus or a text file"
            ) from exc
        return
    path = Path(corpus).expanduser()
    if not path.is_file():
        raise SpecError(f"quality corpus {corpus} is not a file; use 'default', a text file or hf:<dataset>")


def corpus_text(corpus: str) -> tuple[str, str]:
    """The corpus text and a description of where it came from.

    For ``default`` that is the default corpus's evaluation part only: GPTQ calibrates on
    its calibration part, so no recipe is scored on text it was tuned on.
    """
    if corpus == "default":
        part = evaluation_part()
        return part.text, part.describe()
    if corpus.startswith("hf:"):
        return _hf_corpus(corpus)
    path = Path(corpus).expanduser()
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise AccuracyError(f"cannot read corpus {path}: {exc}") from exc
    if not text.strip():
        raise AccuracyError(f"corpus {path} is empty")
    return text, f"file {path.resolve()}"


def _hf_corpus(corpus: str) -> tuple[str, str]:
    parts = corpus[3:].split(":")
    name, config = parts[0], (parts[1] or None) if len(parts) > 1 else None
    split = parts[2] if len(parts) > 2 and parts[2] else "test"
    column = parts[3] if len(parts) > 3 and parts[3] else "text"
    try:
        import datasets
    except ImportError as exc:
        raise AccuracyError("the 'datasets' package is not installed") from exc
    try:
        ds = datasets.load_dataset(name, config, split=split)
        texts = [t for t in ds[column] if isinstance(t, str)]
    except Exception as exc:  # offline hub, missing split or column: one reason
        raise AccuracyError(f"cannot load {name} from the Hugging Face hub: {str(exc).splitlines()[0]}") from exc
    return "\n\n".join(t for t in texts if t.strip()), f"hf {name} config={config} split={split} column={column}"


def same_file(corpus: str, other: str | None) -> bool:
    """Whether the corpus is the file ``other`` (e.g. the GPTQ calibration file)."""
    if not other or corpus == "default" or corpus.startswith("hf:"):
        return False
    try:
        return Path(corpus).expanduser().resolve() == Path(other).expanduser().resolve()
    except OSError:
        return False
