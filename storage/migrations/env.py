"""Alembic environment: runs on the connection handed over by storage.db (or a URL).

LatencyLab's revisions go to its own version table (``alembic_version`` is Optuna's).
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine

from storage.models import Base
from storage.version_table import VERSION_TABLE

config = context.config
target_metadata = Base.metadata


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        context.configure(
            connection=connection, target_metadata=target_metadata, render_as_batch=True, version_table=VERSION_TABLE
        )
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = create_engine(config.get_main_option("sqlalchemy.url"))
    with engine.begin() as conn:
        context.configure(
            connection=conn, target_metadata=target_metadata, render_as_batch=True, version_table=VERSION_TABLE
        )
        with context.begin_transaction():
            context.run_migrations()


if context.is_offline_mode():
    context.configure(
        url=config.get_main_option("sqlalchemy.url"), target_metadata=target_metadata, version_table=VERSION_TABLE
    )
    with context.begin_transaction():
        context.run_migrations()
else:
    run_migrations_online()
