from dacite.cache import set_cache_size, get_cache_size, clear_cache
from dacite.config import Config
from dacite.core import from_dict
from dacite.exceptions import (
    DaciteError,
    DaciteFieldError,
    WrongTypeError,
    MissingValueError,
    UnionMatchError,
    StrictUnionMatchError,
    ForwardReferenceError,
    UnexpectedDataError,
)

__all__ = [
    "set_cache_size",
    "get_cache_size",
    "clear_cache",
    "Config",
    "from_dict",
    "DaciteError",
    "DaciteFieldError",
    "WrongTypeError",
    "MissingValueError",
    "UnionMatchError",
    "StrictUnionMatchError",
    "ForwardReferenceError",
    "UnexpectedDataError",
]
