"""Stage 6, analysis: ranked tables, status counts, the Pareto front, plots, and the target framework's prediction next to a measurement."""
