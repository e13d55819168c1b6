# Not the upstream file: Megatron-LM's megatron/training/__init__.py imports the whole trainer (training.py,
# initialize.py, global vars). Only the argument parser is vendored here (see ../../README.md).
