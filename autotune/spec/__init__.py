"""Stage 1, configuration: the Hydra tree and its overrides (and HF config.json import) become a `Config` of frozen specs."""
