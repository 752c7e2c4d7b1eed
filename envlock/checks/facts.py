"""Moved to :mod:`envlock.knowledge.facts` (issue 27); this alias keeps branches in flight
importing. New code imports :mod:`envlock.knowledge`."""

from envlock.knowledge.facts import *  # noqa: F401,F403
from envlock.knowledge.facts import __all__  # noqa: F401
