"""Results, comparisons and summaries, Pareto fronts, figures and exports, all read from stored runs."""
