"""Moved to :mod:`envlock.knowledge.evaluate` (issue 27); this alias keeps branches in
flight importing. New code imports :mod:`envlock.knowledge`."""

from envlock.knowledge.evaluate import *  # noqa: F401,F403
from envlock.knowledge.evaluate import __all__  # noqa: F401
