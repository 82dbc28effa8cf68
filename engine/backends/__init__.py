"""Inference engines behind one Protocol (:mod:`engine.backends.base`), registered by name and imported lazily."""
