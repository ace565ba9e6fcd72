"""Moved: the SQLite scheduler store is :mod:`mindfile.storage.schedules` (issue 13).

This module keeps the old import path working; new code imports
``mindfile.scheduler.SqliteSchedulerStore`` or the storage module.
"""

from mindfile.storage.schedules import *  # noqa: F403
from mindfile.storage.schedules import __all__ as __all__
