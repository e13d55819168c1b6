"""Offline fitting: published reference runs and their fit, netbench (timed collectives fitted to alpha-beta links) and
devbench (timed GEMMs, grouped GEMM, attention and HBM copies fitted to the device efficiencies)."""
