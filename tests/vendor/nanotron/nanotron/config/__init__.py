# flake8: noqa
from nanotron.config.config import *
from nanotron.config.models_config import *
from nanotron.config.utils_config import *
from nanotron.config.lighteval_config import *
