"""One job start to finish: pre-flight, the request plan and its sources, the load driver, failures, tensor-parallel ranks."""
