"""LatencyLab's own Alembic version table, and the carry-over of databases made before it had one.

LatencyLab's revisions are recorded in ``latencylab_alembic_version``. Alembic's default table,
``alembic_version``, is Optuna's: its RDB storage keeps its tables in the same database (recipe
studies) and checks its own revision there, and so do ``optuna-dashboard`` and
``optuna storage upgrade``.

Databases made before the move hold LatencyLab's revision in ``alembic_version``. Their first
open by this code moves it, inside the migration's transaction and under its lock (so the app
and a worker opening one at the same moment carry it over once), and leaves ``alembic_version``
as Optuna expects it: Optuna's own current revision when Optuna's tables are there (the one
Optuna stamps on tables it finds unstamped), no row and no table when they are not.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from pathlib import Path

from sqlalchemy import Column, Connection, MetaData, PrimaryKeyConstraint, String, Table, inspect, select, text

VERSION_TABLE = "latencylab_alembic_version"
SHARED_TABLE = "alembic_version"  # Alembic's default name: Optuna's
OPTUNA_SCHEMA_TABLE = "version_info"  # created by Optuna with its other tables
LATENCYLAB_TABLE = "runs"  # present in every LatencyLab database since revision 0001


class UnknownRevision(RuntimeError):
    """LatencyLab's tables are there, but no revision this code knows says which schema they have."""


def version_table(name: str) -> Table:
    """A version table as Alembic defines it (``alembic.runtime.migration``): one primary-key column."""
    return Table(
        name,
        MetaData(),
        Column("version_num", String(32), nullable=False),
        PrimaryKeyConstraint("version_num", name=f"{name}_pkc"),
    )


def heads(conn: Connection, name: str) -> list[str]:
    """The revisions recorded in version table ``name`` (none when it does not exist)."""
    if name not in inspect(conn).get_table_names():
        return []
    return list(conn.execute(select(version_table(name).c.version_num)).scalars())


def carry_over(conn: Connection, ours: Callable[[], Collection[str]]) -> tuple[str, ...]:
    """Move LatencyLab's revisions (``ours()``: every revision of our scripts, read only when
    ``alembic_version`` has rows) from ``alembic_version`` to :data:`VERSION_TABLE`, once.

    Returns the revisions moved (none when the database is new or already carried over). Raises
    :class:`UnknownRevision` when LatencyLab's tables exist and neither table holds a revision
    of ours (a database made by a newer LatencyLab, or stamped by hand): migrating it from the
    first revision would fail half-way.
    """
    if heads(conn, VERSION_TABLE):
        return ()
    shared = heads(conn, SHARED_TABLE)
    known = ours() if shared else ()
    moved = tuple(r for r in shared if r in known)
    if not moved:
        if LATENCYLAB_TABLE in inspect(conn).get_table_names():
            held = ", ".join(repr(r) for r in shared) or "nothing"
            raise UnknownRevision(
                f"it has LatencyLab's tables but no revision this version knows ({VERSION_TABLE} is empty, "
                f"{SHARED_TABLE} holds {held}): was it made by a newer LatencyLab?"
            )
        return ()
    mine, theirs = version_table(VERSION_TABLE), version_table(SHARED_TABLE)
    mine.create(conn, checkfirst=True)
    conn.execute(mine.insert(), [{"version_num": r} for r in moved])
    conn.execute(theirs.delete().where(theirs.c.version_num.in_(moved)))
    if len(moved) == len(shared):
        _leave_to_optuna(conn, theirs)
    return moved


def _leave_to_optuna(conn: Connection, theirs: Table) -> None:
    """``alembic_version`` emptied of LatencyLab's rows: stamp Optuna's revision, or drop the table."""
    if OPTUNA_SCHEMA_TABLE not in inspect(conn).get_table_names():
        theirs.drop(conn)
        return
    revision = optuna_revision(conn)
    if revision is not None:  # without Optuna installed, Optuna stamps it itself on its first open
        conn.execute(theirs.insert(), [{"version_num": revision}])


def optuna_revision(conn: Connection) -> str | None:
    """The revision Optuna stamps on its tables when it finds them unstamped; None without Optuna.

    As optuna 5's ``_VersionManager`` does: its head revision when ``version_info`` has no row or
    holds its current schema version, its base revision for tables made before Optuna used Alembic.
    """
    try:
        import optuna.storages._rdb as rdb
        from optuna.storages._rdb.models import SCHEMA_VERSION  # what _VersionManager compares with
    except ImportError:
        return None
    from alembic.script import ScriptDirectory

    script = ScriptDirectory(str(Path(rdb.__file__).resolve().parent / "alembic"))
    schema = conn.execute(text(f"SELECT schema_version FROM {OPTUNA_SCHEMA_TABLE}")).scalar()
    return script.get_current_head() if schema in (None, SCHEMA_VERSION) else script.get_base()
