# SHIM (autotune tests, not upstream): upstream's nanotron/parallel/__init__.py imports ParallelContext
# (torch.distributed process groups), which the config modules do not use. Empty here.
