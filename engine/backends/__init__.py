"""Inference engines behind one Protocol, registered by name and imported lazily."""

from engine.backends.base import Backend, BackendError, ChunkSink, GenerationParams, LoadReport, get_backend

__all__ = ["Backend", "BackendError", "ChunkSink", "GenerationParams", "LoadReport", "get_backend"]
