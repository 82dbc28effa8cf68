"""Shared fixtures: an isolated data folder per session, a fresh database per test,
and one real demo-model run shared by the tests that only read results."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# Converted models are cached in the repository's (gitignored) data folder so that the
# demo model is converted once per machine, not once per test session.
os.environ.setdefault("LATENCYLAB_CACHE_PATH", str(REPO / "data" / "cache"))
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.pop("LATENCYLAB_DB_URL", None)


@pytest.fixture(autouse=True)
def _keep_main_module():
    """AppTest runs page scripts as ``__main__`` and leaves them there; a process spawned
    later by multiprocessing would then re-run that script instead of starting cleanly."""
    main = sys.modules.get("__main__")
    yield
    if main is not None:
        sys.modules["__main__"] = main


@pytest.fixture(scope="session")
def session_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("latencylab")
    os.environ["LATENCYLAB_DATA_DIR"] = str(path)
    from engine.settings import get_settings

    get_settings.cache_clear()
    return path


@pytest.fixture
def db_url(tmp_path: Path, session_dir: Path) -> str:
    return f"sqlite:///{tmp_path / 'test.db'}"


@pytest.fixture
def db(db_url: str):
    from storage import open_database

    return open_database(db_url)


@pytest.fixture(scope="session")
def demo_folder(session_dir: Path) -> Path:
    """The demo model converted to an HF folder (cached across sessions)."""
    from engine.weights.models import demo_gguf_path, gguf_to_hf_folder

    return gguf_to_hf_folder(demo_gguf_path())


@pytest.fixture(scope="session")
def demo_run(session_dir: Path, demo_folder: Path):
    """One real, small demo-model benchmark stored in a session database: (db, run_id)."""
    from engine.run.runner import run_benchmark
    from engine.spec import parse_job_spec
    from storage import open_database

    db = open_database(f"sqlite:///{session_dir / 'demo.db'}")
    spec = parse_job_spec(
        {
            "model": {"source": "demo"},
            "workload": {"prompt_tokens": 32, "output_tokens": 8, "requests": 4, "batch_size": 2},
            "name": "demo fixture",
        }
    )
    result = run_benchmark(spec, db=db, log=lambda _m: None)
    return db, result.run_id
