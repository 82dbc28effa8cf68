"""One job start to finish: pre-flight, prompts, the load driver, failures, tensor-parallel ranks."""
