"""Child processes that react to Ctrl-C the way they do at a terminal.

A shell starts a background job with SIGINT ignored, and every process below inherits
that: Python then leaves SIGINT ignored (rightly, as ``nohup`` asks), so a test that sends
SIGINT to envlock measured nothing but the launcher when the suite itself ran in the
background (it failed that way under a load run). Tests that press Ctrl-C start envlock
with the terminal's default disposition instead.
"""

from __future__ import annotations

import signal
import subprocess
import time


def default_sigint() -> None:
    """``preexec_fn`` for :class:`subprocess.Popen`: SIGINT back to its default action."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def press_ctrl_c(proc: "subprocess.Popen[str]", timeout: float) -> "tuple[str, str, float]":
    """Send SIGINT and wait for the process: its stdout, stderr and the seconds from the
    signal to its exit. A process still running after ``timeout`` is killed (the
    :class:`subprocess.TimeoutExpired` is raised on to fail the test)."""
    sent = time.monotonic()
    try:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return out, err, time.monotonic() - sent
