"""vLLM: the async engine in this process, and an OpenAI API server managed by the job."""
