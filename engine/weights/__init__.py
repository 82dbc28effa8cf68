"""Where weights come from: the demo model, a Hugging Face id or cache, a local folder, a GGUF file, synthetic."""
