"""Settings from the environment (prefix ``LATENCYLAB_``) with sensible defaults.

Also who may serve the app where: :func:`serve_problem` is the one rule, used by
``scripts/run_app.sh`` (``python -m engine.settings serve-check HOST``) and by the app
itself: a non-loopback address needs sign-in (an ``[auth]`` section in Streamlit's
secrets) or viewer mode, unless ``LATENCYLAB_ALLOW_OPEN=1`` overrides it (with a warning).
"""

from __future__ import annotations

import getpass
import ipaddress
import os
import sys
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from pydantic_settings import BaseSettings, SettingsConfigDict

REPO_ROOT = Path(__file__).resolve().parent.parent
OPEN_WARNING = (
    "WARNING: LATENCYLAB_ALLOW_OPEN=1: serving on {host} with no sign-in and no viewer mode; "
    "anyone who can reach this address can launch, cancel and delete benchmarks"
)


class Settings(BaseSettings):
    """Every knob of a deployment; each can be set as ``LATENCYLAB_<NAME>``."""

    model_config = SettingsConfigDict(env_prefix="LATENCYLAB_", extra="ignore")

    data_dir: Path = REPO_ROOT / "data"
    db_url: str | None = None
    cache_path: Path | None = None  # converted models, compile caches; default <data_dir>/cache
    viewer_mode: bool = False
    public_base_url: str = "http://127.0.0.1:8501"
    # Folders every file a job reads must lie in (os.pathsep-separated): models, draft models, prompt files,
    # datasets, traces, corpora, calibration and task files. Unset: the data folder's DEFAULT_INPUT_FOLDERS when
    # sign-in is on, anywhere when it is off (input_folders below).
    allowed_roots: str | None = None
    allowed_model_roots: str | None = None  # the older name of allowed_roots, still honoured
    # Roles of signed-in users: comma-separated e-mails ("alice@x.com") or domains ("@team.example");
    # anyone signed in and not listed is a viewer.
    operators: str = ""
    admins: str = ""
    host: str = "127.0.0.1"  # where make run serves the app
    allow_open: bool = False  # serve a non-loopback host without sign-in or viewer mode (warned)
    telemetry_interval_ms: int = 100  # device telemetry beside the measured phase (engine/measure/telemetry.py), <= 100
    # Where `python -m engine worker` runs jobs: "local" (processes on this host) or "ray" (a Ray cluster,
    # engine/jobs/ray_placement.py); the cluster's address ("auto", "10.0.0.5:6379", "ray://..."), the
    # CPUs each job asks of it, and a dashboard the Jobs and Run pages link to (optional).
    executor: str = "local"
    ray_address: str | None = None
    ray_num_cpus: float = 1.0
    ray_dashboard_url: str | None = None
    ray_load_cpus: float = 1.0  # the CPUs each client process of a --load-nodes job asks of its Ray node

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


DEFAULT_INPUT_FOLDERS = ("traces", "datasets", "models", "prompts")  # under data_dir: job inputs with sign-in on


@dataclass(frozen=True)
class InputFolders:
    """The folders every file a job reads must lie in, and why these: ``configured`` (LATENCYLAB_ALLOWED_ROOTS)
    or the data folder's defaults because sign-in is on."""

    folders: tuple[Path, ...]
    configured: bool

    def words(self) -> str:
        """The folders in a line, with where they come from."""
        listed = ", ".join(str(f) for f in self.folders)
        if self.configured:
            return listed
        return f"{listed}; LATENCYLAB_ALLOWED_ROOTS names others"


def input_folders(settings: Settings | None = None) -> InputFolders | None:
    """Where jobs may read files: the operator's roots (``LATENCYLAB_ALLOWED_ROOTS``), else, with sign-in on,
    the data folder's ``traces``, ``datasets``, ``models`` and ``prompts``; None when neither applies (a local,
    single-user app reads anywhere on its machine). The one rule for submit, pre-flight and Launch."""
    settings = settings or get_settings()
    text = settings.input_roots
    if text:
        folders = tuple(Path(r.strip()).expanduser() for r in text.split(os.pathsep) if r.strip())
        if folders:
            return InputFolders(folders, configured=True)
    if sign_in_configured():
        return InputFolders(tuple(settings.data_dir / name for name in DEFAULT_INPUT_FOLDERS), configured=False)
    return None


def database_url(explicit: str | None = None) -> str:
    """The database URL: an explicit one, else ``LATENCYLAB_DB_URL``, else the SQLite default."""
    if explicit:
        return explicit
    return Settings().database_url


def principals(text: str) -> list[str]:
    """A role list (``"alice@x.com, @team.example"``) as lower-case entries."""
    return [part.strip().lower() for part in text.split(",") if part.strip()]


def cli_actor() -> str:
    """Who acts from the command line: ``cli:<OS user>``."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no passwd entry and no LOGNAME/USER (some containers)
        user = str(os.getuid()) if hasattr(os, "getuid") else "unknown"
    return f"cli:{user}"


def is_loopback(host: str | None) -> bool:
    """True for ``localhost``, 127.0.0.0/8 and ``::1``; False for anything else (``0.0.0.0`` too)."""
    name = (host or "").strip().strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def secrets_files() -> list[Path]:
    """The secrets files Streamlit reads: ``STREAMLIT_SECRETS_FILES`` or its two defaults."""
    listed = os.environ.get("STREAMLIT_SECRETS_FILES", "").split()
    if listed:
        return [Path(p) for p in listed]
    return [Path.home() / ".streamlit" / "secrets.toml", Path.cwd() / ".streamlit" / "secrets.toml"]


def sign_in_configured(files: list[Path] | None = None) -> bool:
    """True when a secrets file has an ``[auth]`` section with a redirect URI and a cookie secret."""
    for path in secrets_files() if files is None else files:
        try:
            auth = tomllib.loads(path.read_text(encoding="utf-8")).get("auth")
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
            continue
        if isinstance(auth, dict) and auth.get("redirect_uri") and auth.get("cookie_secret"):
            return True
    return False


def serve_problem(host: str, *, signed_in: bool, settings: Settings) -> tuple[str | None, str | None]:
    """(refusal, warning) for serving on ``host``: at most one of them is set."""
    if is_loopback(host) or signed_in or settings.viewer_mode:
        return None, None
    if settings.allow_open:
        return None, OPEN_WARNING.format(host=host or "every interface")
    return (
        f"refusing to serve on {host or 'every interface'}: not a loopback address, and neither sign-in "
        "([auth] in .streamlit/secrets.toml, see the README) nor viewer mode (LATENCYLAB_VIEWER_MODE=1) "
        "is configured; LATENCYLAB_ALLOW_OPEN=1 serves anyway"
    ), None


def _serve_check(argv: list[str]) -> int:
    """``python -m engine.settings serve-check [HOST]``: exit 0 to serve (warning on stderr), 2 to refuse."""
    settings = Settings()
    host = argv[0] if argv else settings.host
    refusal, warning = serve_problem(host, signed_in=sign_in_configured(), settings=settings)
    if warning:
        print(warning, file=sys.stderr)
    if refusal:
        print(f"LatencyLab: {refusal}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] != ["serve-check"]:
        print("usage: python -m engine.settings serve-check [HOST]", file=sys.stderr)
        sys.exit(2)
    sys.exit(_serve_check(sys.argv[2:]))


def ray_address() -> str | None:
    """The Ray cluster a job may reach: the address its Ray task passed (``LATENCYLAB_JOB_RAY_ADDRESS``), else the
    operator's ``LATENCYLAB_RAY_ADDRESS``; None: no cluster."""
    return os.environ.get("LATENCYLAB_JOB_RAY_ADDRESS") or get_settings().ray_address
