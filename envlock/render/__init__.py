"""Rendering findings for people and machines: the screen (text), JUnit XML; JSON is each
result's ``to_dict()`` (:meth:`envlock.checks.finding.Finding.to_dict`).

Below the command line: ``envlock.cli``, ``envlock.fleet`` and ``envlock.training`` all
import it, and it imports none of them (the training guard prints from inside a user's
process, where no envlock command line exists).
"""

from __future__ import annotations

from typing import Any

__all__ = ["junit_xml", "report_text", "findings_text", "summary", "not_checked_lines",
           "doctor_lines", "Style", "PLAIN"]

#: where each name lives; imported on first use (PEP 562), so that a command that only
#: needs colour (every command, at start) does not import the renderers and the findings
_WHERE = {"junit_xml": "junit", "report_text": "text", "findings_text": "text",
          "summary": "text", "not_checked_lines": "text", "doctor_lines": "text",
          "Style": "style", "PLAIN": "style"}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'envlock.render' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"envlock.render.{_WHERE[name]}"), name)
    globals()[name] = value
    return value
