"""Engine, sessions and schema migrations.

Each façade call is one short transaction: :meth:`Database.session` commits on
success, rolls back on error and always closes. Every database error raised inside it
(SQLAlchemy's or the driver's) leaves storage as a :class:`StorageError`, so callers
never catch SQLAlchemy's own exceptions. SQLite runs in WAL mode with a busy
timeout so that the app, the worker and runner processes can share one file. Creating or
migrating the schema is serialised between processes: a file lock next to the SQLite file,
a transaction-scoped advisory lock on PostgreSQL. LatencyLab's revisions are kept in a version
table of its own (storage/version_table.py), so Optuna's tables and tools share the database.
Messages name the URL without its password.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Connection, Engine, create_engine, event, inspect, make_url, text
from sqlalchemy.exc import ArgumentError, OperationalError, SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from storage.version_table import VERSION_TABLE, UnknownRevision, carry_over

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
_LOCK = threading.Lock()
_OPEN: dict[str, Database] = {}
MIGRATE_LOCK_TIMEOUT_S = 300.0
_PG_MIGRATE_LOCK = 7_460_113_015  # any constant: the advisory lock key every LatencyLab process uses


class StorageError(RuntimeError):
    """The database cannot be opened or used; the message says which and why."""


class ClaimLost(StorageError):
    """A job's result came after the job stopped being its worker's (recovered, cancelled, ended)."""


class Database:
    """One database URL: an engine, a session factory, and the schema at head."""

    def __init__(self, url: str) -> None:
        self.url = url
        shown = safe_url(url)
        try:
            self.engine: Engine = _make_engine(url)
        except (ArgumentError, ValueError) as exc:
            raise StorageError(f"database URL {shown!r} is not valid: {_one_line(exc)}") from exc
        except ImportError as exc:  # e.g. a PostgreSQL driver that is not installed
            raise StorageError(f"database URL {shown!r} needs a driver that is not installed: {exc}") from exc
        except OSError as exc:  # the SQLite file's folder cannot be created
            raise StorageError(f"cannot create the folder of database {shown}: {exc.strerror or exc}") from exc
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
            raise StorageError(f"database error on {safe_url(self.url)}: {_one_line(exc)}") from exc
        except BaseException:
            _rollback_quietly(session)
            raise
        finally:
            session.close()

    def migrate(self) -> None:
        """Bring the schema to the newest Alembic revisions (every branch head), one process at a time.

        A database already at every head is left alone without importing Alembic (its import and its
        upgrade check cost a third of a second of every command's start)."""
        if self.at_heads():
            return
        from alembic import command
        from alembic.config import Config

        cfg = Config()
        cfg.set_main_option("script_location", str(MIGRATIONS))
        cfg.set_main_option("sqlalchemy.url", self.url.replace("%", "%%"))
        try:
            with self._migrate_lock(), self.engine.begin() as conn:
                self._advisory_lock(conn)
                carry_over(conn, partial(_revisions, cfg))
                cfg.attributes["connection"] = conn
                command.upgrade(cfg, "heads")
        except UnknownRevision as exc:
            raise StorageError(f"cannot prepare database {safe_url(self.url)}: {exc}") from exc
        except OperationalError as exc:
            # A process without the lock (an older version) created the schema at the same moment.
            if "already exists" not in str(exc) or "runs" not in inspect(self.engine).get_table_names():
                raise StorageError(f"cannot prepare database {safe_url(self.url)}: {_one_line(exc)}") from exc
        except SQLAlchemyError as exc:
            raise StorageError(f"cannot prepare database {safe_url(self.url)}: {_one_line(exc)}") from exc

    def at_heads(self) -> bool:
        """Whether LatencyLab's version table already holds exactly the heads of the migrations folder."""
        heads = migration_heads()
        if not heads:
            return False
        try:
            with self.engine.connect() as conn:
                rows = conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalars().all()
        except SQLAlchemyError:
            return False  # no version table yet (a new or an older database): Alembic decides
        return set(rows) == heads

    def _migrate_lock(self) -> AbstractContextManager[object]:
        """SQLite: a file lock next to the database file (nothing for ``:memory:``)."""
        path = sqlite_path(self.url) if self.is_sqlite else None
        if path is None:
            return nullcontext()
        from filelock import FileLock, Timeout

        lock = FileLock(str(path) + ".lock", timeout=MIGRATE_LOCK_TIMEOUT_S)
        try:
            lock.acquire()
        except Timeout as exc:
            raise StorageError(f"another process has been preparing {path} for {MIGRATE_LOCK_TIMEOUT_S:.0f} s") from exc
        except OSError:  # a read-only folder: no lock file; the migration itself says what is wrong
            return nullcontext()
        return _released(lock)

    @contextmanager
    def schema_lock(self) -> Iterator[None]:
        """Hold the migrations' lock for the block (a file lock; an advisory lock on PostgreSQL).

        For another library that creates and stamps its own tables in this database on its first
        open (Optuna's RDB storage): two processes doing that at the same moment collide.
        """
        with self._migrate_lock():
            if self.engine.dialect.name != "postgresql":
                yield
                return
            with self.engine.begin() as conn:
                self._advisory_lock(conn)
                yield

    def _advisory_lock(self, conn: Connection) -> None:
        """PostgreSQL: hold an advisory lock until this transaction ends, so one process migrates at a time."""
        if self.engine.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_MIGRATE_LOCK})

    def check_writable(self) -> None:
        """Raise :class:`StorageError` when this database cannot be written (read-only file or server).

        Checked before a job is queued or a benchmark starts, so nothing runs that cannot be stored.
        """
        try:
            with self.engine.connect() as conn, conn.begin() as tx:
                conn.execute(text(f"DELETE FROM {VERSION_TABLE} WHERE 1 = 0"))
                tx.rollback()
        except SQLAlchemyError as exc:
            raise StorageError(f"database {safe_url(self.url)} cannot be written: {_one_line(exc)}") from exc


def _revisions(cfg: Config) -> set[str]:
    """Every revision of LatencyLab's migration scripts."""
    from alembic.script import ScriptDirectory

    return {r.revision for r in ScriptDirectory.from_config(cfg).walk_revisions()}


@contextmanager
def _released(lock: object) -> Iterator[None]:
    """Hold an acquired file lock for the ``with`` block."""
    try:
        yield
    finally:
        lock.release()  # type: ignore[attr-defined]


def safe_url(url: str) -> str:
    """``url`` for messages: its password hidden."""
    try:
        parsed = make_url(url)
        return url if parsed.password is None else parsed.render_as_string(hide_password=True)
    except (ArgumentError, ValueError):
        return url if "@" not in url else "<a database URL that is not valid>"


def sqlite_path(url: str) -> Path | None:
    """The file of a SQLite URL (``sqlite:///x.db``, ``sqlite:///file:x.db?mode=ro&uri=true``); None for memory."""
    path = url.split("///", 1)[1] if "///" in url else ""
    path = path.split("?", 1)[0].removeprefix("file:")
    if not path or path == ":memory:":
        return None
    return Path(path).expanduser()


def _one_line(exc: BaseException) -> str:
    """The driver's message on one line, without SQLAlchemy's statement dump and background link."""
    orig = getattr(exc, "orig", None)
    message = str(orig if orig is not None else exc)
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    lines = [line for line in lines if not line.startswith(("(Background on this error", "[SQL:", "[parameters:"))]
    return " ".join(lines) or type(exc).__name__


def _rollback_quietly(session: Session) -> None:
    """Roll back; a connection that is already gone cannot, and the original error matters more."""
    try:
        session.rollback()
    except SQLAlchemyError:
        pass


def _make_engine(url: str) -> Engine:
    if url.startswith("sqlite"):
        path = sqlite_path(url)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
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


def migration_heads() -> frozenset[str]:
    """The head revisions of ``migrations/versions`` read from the files' ``revision``/``down_revision`` lines
    (no Alembic import); empty when a file says them in any other way (then Alembic decides)."""
    import ast
    import re

    revisions: set[str] = set()
    parents: set[str] = set()
    for path in (MIGRATIONS / "versions").glob("*.py"):
        source = path.read_text(encoding="utf-8")
        rev = re.search(r"^revision(?:: *[\w\[\], |]+)? *= *(.+)$", source, re.M)
        down = re.search(r"^down_revision(?:: *[\w\[\], |]+)? *= *(.+)$", source, re.M)
        try:
            revision, down_revision = ast.literal_eval(rev.group(1)), ast.literal_eval(down.group(1))  # type: ignore[union-attr]
        except (AttributeError, ValueError, SyntaxError):
            return frozenset()
        if not isinstance(revision, str):
            return frozenset()
        revisions.add(revision)
        parents.update([down_revision] if isinstance(down_revision, str) else list(down_revision or ()))
    return frozenset(revisions - parents)


def open_database(url: str) -> Database:
    """The database at ``url``, migrated to head (once per process and URL)."""
    with _LOCK:
        db = _OPEN.get(url)
        if db is None:
            db = Database(url)
            db.migrate()
            _OPEN[url] = db
        return db
