"""Offline fitting: published reference runs and their fit, and netbench (timed collectives fitted to alpha-beta links)."""
