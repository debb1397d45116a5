"""The old home of `engine.runs.events`: the very same module, so code that imports it here keeps working."""

import sys

from ..runs import events as _moved
from ..runs.events import *  # noqa: F401,F403 - what static checkers read of the moved module

sys.modules[__name__] = _moved
