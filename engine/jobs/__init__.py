"""Background jobs: the worker, the process each job runs in, job outcomes, CLI sweeps in their own processes."""
