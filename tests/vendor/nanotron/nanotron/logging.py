# SHIM (autotune tests, not upstream): upstream's nanotron/logging.py (rank-aware log helpers) imports
# nanotron.distributed and nanotron.parallel.ParallelContext. The config modules call only get_logger(__name__)
# and logger.warning: the standard library logger stands in.
import logging
from typing import Optional


def get_logger(name: Optional[str] = None, log_level: Optional[str] = None) -> logging.Logger:
    logger = logging.getLogger(name)
    if log_level is not None:
        logger.setLevel(log_level.upper())
    return logger
