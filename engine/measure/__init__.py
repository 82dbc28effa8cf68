"""What a run measures and how it is named: raw records, derived metrics, the metric registry, memory, devices."""
