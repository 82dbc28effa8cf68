"""Settings from the environment (prefix ``LATENCYLAB_``) with sensible defaults."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic_settings import BaseSettings, SettingsConfigDict

REPO_ROOT = Path(__file__).resolve().parent.parent


class Settings(BaseSettings):
    """Every knob of a deployment; each can be set as ``LATENCYLAB_<NAME>``."""

    model_config = SettingsConfigDict(env_prefix="LATENCYLAB_", extra="ignore")

    data_dir: Path = REPO_ROOT / "data"
    db_url: str | None = None
    cache_path: Path | None = None  # converted models, compile caches; default <data_dir>/cache
    viewer_mode: bool = False
    public_base_url: str = "http://127.0.0.1:8501"
    # Folders every file a job reads must lie in (os.pathsep-separated; None = anywhere):
    # models, draft models, prompt files, corpora, calibration and task files.
    allowed_roots: str | None = None
    allowed_model_roots: str | None = None  # the older name of allowed_roots, still honoured

    @property
    def database_url(self) -> str:
        if self.db_url:
            return self.db_url
        return f"sqlite:///{self.data_dir / 'latencylab.db'}"

    @property
    def input_roots(self) -> str | None:
        """The allowed roots of every job input: ``LATENCYLAB_ALLOWED_ROOTS``, else the older
        ``LATENCYLAB_ALLOWED_MODEL_ROOTS``; None when neither is set (anywhere)."""
        return self.allowed_roots or self.allowed_model_roots

    @property
    def cache_dir(self) -> Path:
        return self.cache_path or self.data_dir / "cache"


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()


def database_url(explicit: str | None = None) -> str:
    """The database URL: an explicit one, else ``LATENCYLAB_DB_URL``, else the SQLite default."""
    if explicit:
        return explicit
    return Settings().database_url
