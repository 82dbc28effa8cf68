"""Inference engines behind one Protocol (:mod:`engine.backends.base`), one package per engine.

Each package holds its engine whole: the pure recipe, rules and descriptor (read by the
spec layer through :mod:`engine.spec.engines`) and the heavy backend, imported only when a
job runs. This ``__init__`` imports nothing: Python runs it whenever a descriptor is imported.
"""
