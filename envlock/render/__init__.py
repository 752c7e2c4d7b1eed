"""Rendering findings for people and machines: the screen (text), JUnit XML; JSON is each
result's ``to_dict()`` (:meth:`envlock.checks.finding.Finding.to_dict`).

Below the command line: ``envlock.cli``, ``envlock.fleet`` and ``envlock.training`` all
import it, and it imports none of them (the training guard prints from inside a user's
process, where no envlock command line exists).
"""

from __future__ import annotations

from envlock.render.junit import junit_xml
from envlock.render.style import PLAIN, Style
from envlock.render.text import doctor_lines, findings_text, not_checked_lines, report_text, summary

__all__ = ["junit_xml", "report_text", "findings_text", "summary", "not_checked_lines",
           "doctor_lines", "Style", "PLAIN"]
