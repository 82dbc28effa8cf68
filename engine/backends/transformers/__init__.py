"""The Hugging Face transformers engine: loading, every recipe knob, streaming, scoring, memory."""
