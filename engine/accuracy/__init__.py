"""Accuracy of the same recipe, measured through the loaded backend: perplexity, fidelity to the reference recipe, tasks."""
