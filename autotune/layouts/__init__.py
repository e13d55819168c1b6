"""Stage 3, enumeration and ranking: every layout of N GPUs, the validity rules with ids, scoring and ranking with the predict stage's models."""
