# SHIM (autotune tests, not upstream): upstream's nanotron/generation/__init__.py imports the samplers
# (torch.distributed); the config modules need only SamplerType (sampler.py here).
