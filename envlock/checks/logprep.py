"""What of a log the advisory triage reads: bounded, ASCII, no binary, each line once.

:func:`envlock.checks.logs.triage_logs` matches every advisory pattern (about 200) against
the whole normalised log (:mod:`envlock.checks.logread`), so its cost is patterns x distinct
text. Three things made that cost explode on hostile logs, and :func:`prepare` removes them
before reading:

* **non-ASCII text**: case-insensitive regexes over a str holding any non-ASCII character
  run on the wide representation with Unicode case folding (an 8 MB UTF-8 log was 11x slower
  than an ASCII one). Every non-ASCII character becomes ``?`` (one C call): the error strings,
  GPU names and versions the patterns look for are ASCII.
* **binary**: a core file or archive pasted as a log is mostly unique garbage "lines". A line
  that is more than :data:`BINARY_SHARE` non-printable (or replaced) characters and holds no
  two-word phrase is dropped.
* **progress lines**: a line with no error-like word that differs from an earlier one only
  in its numbers (a step counter, a loss) is read once;
* **size**: only the last :data:`MAX_TRIAGE_BYTES` of distinct lines are read (the end of a
  log holds the crash); :func:`prepare` says so in one line when it cuts.

The symptom matcher (:mod:`envlock.checks.symptoms`) has its own, larger limit: it is linear
by construction.
"""

from __future__ import annotations

import re
from typing import List, Optional, Tuple

__all__ = ["prepare", "MAX_TRIAGE_BYTES", "BINARY_SHARE"]

#: distinct text the advisory triage reads, from the end of the log
MAX_TRIAGE_BYTES = 1024 * 1024
#: a line with more than this share of non-printable characters is binary
BINARY_SHARE = 0.3
_MAX_LINE = 4096
#: control characters and the decoder's replacement character: what binary decodes to
_JUNK = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ufffd]")
_DIGITS = re.compile(r"\d+")
#: words of a line whose numbers matter (an Xid code, an exit code, a CUDA error number)
_SIGNIFICANT = re.compile(r"error|fail|fault|xid|exit|signal|warn|kill|abort|nccl|cuda|"
                          r"assert|timeout|denied|refused", re.IGNORECASE)
_PHRASE = re.compile(r"[A-Za-z]{2,}[ :=,(]+[A-Za-z]{2,}[ :=,(.]+[A-Za-z]{2,}")


def _binary(line: str) -> bool:
    """Mostly control or undecodable characters, and no two-word phrase: not text (UTF-8
    text in any script is printable, so it stays)."""
    if line.isprintable() and "\ufffd" not in line:
        return False
    bad = len(_JUNK.findall(line))
    return bad > BINARY_SHARE * len(line) and _PHRASE.search(line) is None


def prepare(text: str, origin: str = "log") -> Tuple[str, Optional[str]]:
    """(the text triage reads, a one-line note when something was cut or dropped)."""
    total = len(text.encode("utf-8", "replace"))
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    seen = set()
    keep: List[str] = []
    dropped = 0
    for ln in lines:
        if len(ln) > _MAX_LINE:
            ln = ln[:_MAX_LINE]
        if ln in seen:
            keep.append(ln)  # a repeat costs nothing later (read_log folds repeats)
            continue
        seen.add(ln)
        if not _SIGNIFICANT.search(ln):
            # a progress line ("step 812 loss 0.31"): one of each shape is enough
            shape = "\0" + _DIGITS.sub("#", ln)
            if shape in seen:
                continue
            seen.add(shape)
        if _binary(ln):
            dropped += 1
            continue
        keep.append(ln)
    # the last MAX_TRIAGE_BYTES of distinct text
    size = 0
    start = len(keep)
    counted = set()
    while start > 0:
        ln = keep[start - 1]
        if ln not in counted:
            counted.add(ln)
            size += len(ln) + 1
            if size > MAX_TRIAGE_BYTES:
                break
        start -= 1
    notes = []
    if start > 0:
        notes.append(f"advisory patterns read the last {MAX_TRIAGE_BYTES // 1024} KiB of "
                     f"distinct lines of {total / (1024 * 1024):.1f} MiB")
    if dropped:
        notes.append(f"{dropped} binary line{'s' if dropped != 1 else ''} skipped")
    note = f"{origin}: " + "; ".join(notes) if notes else None
    # one C call: every non-ASCII character becomes "?" (see the module docstring)
    return "\n".join(keep[start:]).encode("ascii", "replace").decode("ascii"), note
