"""The renderers as the command line imports them: they live in :mod:`envlock.render`,
below the CLI, so that fleet and the training guard can use them without importing it."""

from __future__ import annotations

from envlock.render import (  # noqa: F401 - re-exported for the commands
    doctor_lines,
    findings_text,
    junit_xml,
    not_checked_lines,
    report_text,
    summary,
)

__all__ = ["findings_text", "junit_xml", "report_text", "summary", "not_checked_lines",
           "doctor_lines"]
