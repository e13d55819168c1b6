"""Stage 2, prediction: the memory model (per framework profile), the performance model, the reserved-memory model and the fit margin. Pure, vectorised over candidate arrays."""
