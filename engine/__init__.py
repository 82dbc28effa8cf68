"""LatencyLab's engine: everything that is not UI."""
