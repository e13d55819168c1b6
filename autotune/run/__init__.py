"""Stage 5, the sweep controller: runs candidates through a launcher, writes a row per trial, shows progress."""
