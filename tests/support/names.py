"""The scanner for the bare distribution name ``envlock`` (an unrelated project on PyPI):
envlock's distribution is ``envlock-gpu``, and no output may ask an index for ``envlock``."""

from __future__ import annotations

import re
from typing import Iterator

__all__ = ["bare_envlock"]

#: a requirement or an install command that names the bare distribution ``envlock``
BARE = [
    re.compile(r"(?<![\w.-])envlock(?![\w-])\s*(\[[A-Za-z]|==|>=|<=|~=|!=|@\s)"),
    re.compile(r"\binstall\s+(?:-{1,2}[\w-]+(?:[= ][^\s'\"]+)?\s+)*['\"]?envlock(?![\w-])"),
]


def bare_envlock(text: str) -> Iterator[str]:
    """Every place in ``text`` that would ask an index for ``envlock`` by name."""
    for pattern in BARE:
        for m in pattern.finditer(text):
            yield text[max(0, m.start() - 40):m.end() + 20]
