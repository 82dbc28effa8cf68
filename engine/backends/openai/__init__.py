"""Any OpenAI-compatible server over HTTP: the engine package of ``openai`` (its backend streams SSE)."""
