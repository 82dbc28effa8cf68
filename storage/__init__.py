"""Persistence: SQLAlchemy 2.0 models behind a façade that returns plain dataclasses."""

from storage.db import ClaimLost, Database, StorageError, open_database

__all__ = ["ClaimLost", "Database", "StorageError", "open_database"]
