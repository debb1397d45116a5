"""The old home of `engine.runs.run`: the very same module, so code that imports it here keeps working."""

import sys

from ..runs import run as _moved
from ..runs.run import *  # noqa: F401,F403 - what static checkers read of the moved module

sys.modules[__name__] = _moved
