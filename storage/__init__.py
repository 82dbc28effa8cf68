"""Persistence: SQLAlchemy 2.0 models behind a façade that returns plain dataclasses."""

from storage.db import Database, StorageError, open_database

__all__ = ["Database", "StorageError", "open_database"]
