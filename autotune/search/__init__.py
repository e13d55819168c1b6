"""Stage 4, search: strategies (ask/tell), OOM-dominance pruning, online calibration of the models and the GPU-hour budget."""
