"""Engine, sessions and schema migrations.

Each façade call is one short transaction: :meth:`Database.session` commits on
success, rolls back on error and always closes. Every database error raised inside it
(SQLAlchemy's or the driver's) leaves storage as a :class:`StorageError`, so callers
never catch SQLAlchemy's own exceptions. SQLite runs in WAL mode with a busy
timeout so that the app, the worker and runner processes can share one file.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import Engine, create_engine, event, inspect
from sqlalchemy.exc import ArgumentError, OperationalError, SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
_LOCK = threading.Lock()
_OPEN: dict[str, Database] = {}


class StorageError(RuntimeError):
    """The database cannot be opened or used; the message says which and why."""


class ClaimLost(StorageError):
    """A job's result came after the job stopped being its worker's (recovered, cancelled, ended)."""


class Database:
    """One database URL: an engine, a session factory, and the schema at head."""

    def __init__(self, url: str) -> None:
        self.url = url
        try:
            self.engine: Engine = _make_engine(url)
        except (ArgumentError, ValueError) as exc:
            raise StorageError(f"database URL {url!r} is not valid: {exc}") from exc
        except ImportError as exc:  # e.g. a PostgreSQL driver that is not installed
            raise StorageError(f"database URL {url!r} needs a driver that is not installed: {exc}") from exc
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)

    @property
    def is_sqlite(self) -> bool:
        return self.engine.dialect.name == "sqlite"

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A short transaction: commit on success, roll back on error, always close."""
        session = self._sessions()
        try:
            yield session
            session.commit()
        except SQLAlchemyError as exc:
            _rollback_quietly(session)
            raise StorageError(f"database error on {self.url}: {_one_line(exc)}") from exc
        except BaseException:
            _rollback_quietly(session)
            raise
        finally:
            session.close()

    def migrate(self) -> None:
        """Bring the schema to the newest Alembic revisions (every branch head)."""
        from alembic import command
        from alembic.config import Config

        cfg = Config()
        cfg.set_main_option("script_location", str(MIGRATIONS))
        cfg.set_main_option("sqlalchemy.url", self.url.replace("%", "%%"))
        try:
            with self.engine.begin() as conn:
                cfg.attributes["connection"] = conn
                command.upgrade(cfg, "heads")
        except OperationalError as exc:
            # Another process created the schema at the same moment: check and go on.
            if "already exists" not in str(exc) or "runs" not in inspect(self.engine).get_table_names():
                raise StorageError(f"cannot prepare database {self.url}: {exc.orig}") from exc
        except SQLAlchemyError as exc:
            raise StorageError(f"cannot prepare database {self.url}: {exc}") from exc


def _one_line(exc: SQLAlchemyError) -> str:
    """The driver's message (first line), without SQLAlchemy's statement dump."""
    orig = getattr(exc, "orig", None)
    text = str(orig if orig is not None else exc).strip()
    return (text.splitlines() or [type(exc).__name__])[0]


def _rollback_quietly(session: Session) -> None:
    """Roll back; a connection that is already gone cannot, and the original error matters more."""
    try:
        session.rollback()
    except SQLAlchemyError:
        pass


def _make_engine(url: str) -> Engine:
    if url.startswith("sqlite"):
        path = url.split("///", 1)[1] if "///" in url else ""
        if path and path != ":memory:":
            Path(path).expanduser().parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"timeout": 30, "check_same_thread": False})

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn, _record) -> None:  # noqa: ANN001
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA busy_timeout=30000")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.close()

        return engine
    return create_engine(url, pool_pre_ping=True)


def open_database(url: str) -> Database:
    """The database at ``url``, migrated to head (once per process and URL)."""
    with _LOCK:
        db = _OPEN.get(url)
        if db is None:
            db = Database(url)
            db.migrate()
            _OPEN[url] = db
        return db
