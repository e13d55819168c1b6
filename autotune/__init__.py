"""autotune: plan, benchmark and rank parallel layouts for LLM training."""

__version__ = "0.1.0"
