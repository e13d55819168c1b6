# SHIM (autotune tests, not upstream): upstream's nanotron/parallel/pipeline_parallel/engine.py holds the pipeline
# schedules (forward/backward over torch.distributed process groups, nanotron's gradient accumulator). The config
# modules only construct the engines and test isinstance (utils_config.py cast_str_to_pipeline_engine /
# cast_pipeline_engine_to_str): same class names, hierarchy and constructors as upstream @ a27e8fe8, no schedule.
from abc import ABC
from typing import Optional


class PipelineEngine(ABC):
    def __init__(self):
        self.nb_microbatches: Optional[int] = None


class AllForwardAllBackwardPipelineEngine(PipelineEngine):
    def __init__(self):
        super().__init__()


class OneForwardOneBackwardPipelineEngine(PipelineEngine):
    def __init__(self):
        super().__init__()
