"""The results table: the row schema, the per-trial Parquet store and the trial file (TrialSpec) handed to a launcher."""
