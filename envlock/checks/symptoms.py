"""Recognising symptoms in a log: linear time on any bytes.

A log handed to ``doctor --log`` can be anything: 64 ranks' worth of repeated lines, UTF-8
progress bars, a core file pasted by mistake. The matcher holds about 400 patterns (the
symptom tables, :mod:`envlock.matrix.load_symptoms`) and must stay linear in the size of
the input whatever it holds. It works on bytes, never on decoded text:

1. At most :data:`MAX_BYTES` are read: a longer log keeps its *last* :data:`MAX_BYTES`
   (where a crash ends), and :attr:`Scan.cut` says so in one line.
2. The bytes are lower-cased (ASCII only: one C call, no Unicode case folding) and split
   into lines; a line longer than :data:`MAX_LINE` (a binary blob with no newline) is cut into
   :data:`MAX_LINE` pieces, so no regex ever sees more than that.
3. Repeated lines are read once (a dict lookup per line).
4. Each line is split into words; a pattern is tried on a line only when its *anchor* word
   (:mod:`envlock.matrix.anchors`) is one of the line's words (a set intersection in C).
   A hard-wrapped message is tried again joined with the next line.

So the work per byte is bounded by constants, not by the number of patterns: measured by
``scripts/triage_eval.py`` for ASCII, non-ASCII and binary logs.

>>> from envlock.matrix import get_matrix
>>> s = scan(b"RuntimeError: CUDA error: no kernel image is available for execution on the\\n"
...          b"device\\n", get_matrix())
>>> [h.symptom for h in s.hits][:1]
['cudart.cudaErrorNoKernelImageForDevice']
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, FrozenSet, List, Optional, Sequence, Tuple, Union

from envlock.matrix.anchors import anchors, required_words
from envlock.matrix.model import Symptom

__all__ = ["MAX_BYTES", "MAX_LINE", "SymptomHit", "Scan", "scan", "scan_logs", "KIND_ORDER"]

#: the most of one log that is read (its end); documented in README (doctor --log)
MAX_BYTES = 32 * 1024 * 1024
#: the longest piece of a line a pattern is run on
MAX_LINE = 4096
#: how many symptoms are kept per log
MAX_HITS = 12
#: order of kinds: a reported error names the failure better than the death or hang after it
KIND_ORDER = ("error", "hang", "death")
#: rows that only wrap another error (the error they carry names the failure better)
WRAPPERS: FrozenSet[str] = frozenset({"torch.nccl-error", "nccl-warn.cuda", "signal.SIGABRT",
                                      "cudart.cudaErrorUnknown", "hang.futex"})

#: words of 3+ characters (anchors are never shorter): random bytes hold few of them
_WORD = re.compile(rb"[a-z0-9_]{3,}")
#: a line longer than this is not a terminal's hard wrap: it is not joined with the next
_WRAP = 240


@dataclass(frozen=True)
class SymptomHit:
    """A symptom seen in a log: where first, how often, and the matched line."""

    symptom: str
    origin: str
    line: str  # the first matching line, decoded for display (may hold any characters)
    lineno: int  # 1-based line number of its first occurrence in the text read
    count: int  # matching lines, repeats included
    span: int  # length of the longest matched text (specificity)


@dataclass(frozen=True)
class Scan:
    hits: Tuple[SymptomHit, ...]  # most telling first (see :func:`_order`)
    bytes_read: int
    cut: Optional[str] = None  # one line when the log was longer than MAX_BYTES


_Entry = Tuple[Symptom, "re.Pattern[bytes]", FrozenSet[bytes]]


class _Index:
    """Symptom patterns by anchor word, compiled once per matrix."""

    def __init__(self, symptoms: Sequence[Symptom]) -> None:
        self.words: Dict[bytes, List[_Entry]] = {}
        self.prefixes: Dict[bytes, List[_Entry]] = {}
        for s in symptoms:
            for p in s.patterns:
                rx = re.compile(p.encode("utf-8"), re.IGNORECASE)
                need = frozenset(w.encode() for w in required_words(p))
                for word, prefix in anchors(p):
                    table = self.prefixes if prefix else self.words
                    table.setdefault(word.encode(), []).append((s, rx, need))
        self.word_keys = frozenset(self.words)
        self.routine: Dict[str, "re.Pattern[bytes]"] = {
            s.id: re.compile(b"|".join(b"(?:" + p.encode("utf-8") + b")" for p in s.routine),
                             re.IGNORECASE)
            for s in symptoms if s.routine}


_INDEX: Dict[int, _Index] = {}


def _index(matrix: object) -> _Index:
    key = id(matrix)
    idx = _INDEX.get(key)
    if idx is None:
        idx = _INDEX[key] = _Index(list(getattr(matrix, "symptoms", {}).values()))
    return idx


def _pieces(data: bytes) -> List[bytes]:
    out: List[bytes] = []
    for ln in data.split(b"\n"):
        if len(ln) <= MAX_LINE:
            out.append(ln)
        else:
            out.extend(ln[i:i + MAX_LINE] for i in range(0, len(ln), MAX_LINE))
    return out


def _decode(b: bytes) -> str:
    text = b.decode("utf-8", "replace").strip()
    return text if len(text) <= 300 else text[:297] + "..."


def scan(data: Union[bytes, str], matrix: object, origin: str = "log") -> Scan:
    """The symptoms one log shows (see the module docstring)."""
    raw = data.encode("utf-8", "surrogateescape") if isinstance(data, str) else data
    cut = None
    if len(raw) > MAX_BYTES:
        cut = (f"{origin}: read the last {MAX_BYTES // (1024 * 1024)} MiB of "
               f"{len(raw) / (1024 * 1024):.1f} MiB (the end of a log holds the crash)")
        raw = raw[-MAX_BYTES:]
        nl = raw.find(b"\n")
        if 0 <= nl < MAX_LINE:
            raw = raw[nl + 1:]  # start on a whole line
    idx = _index(matrix)
    orig = _pieces(raw.replace(b"\r", b"\n"))
    low = [p.lower() for p in orig]
    first: Dict[bytes, int] = {}
    counts: Dict[bytes, int] = {}
    for i, ln in enumerate(low):
        if ln in first:
            counts[ln] += 1
        else:
            first[ln] = i
            counts[ln] = 1
    whole = raw.lower()
    prefixes = [p for p in idx.prefixes if p in whole]
    del whole
    found: Dict[str, List[object]] = {}  # symptom id -> [lineno, count, span, line]
    for ln, i in first.items():
        # a short line may be a terminal's hard wrap: it is read joined with the next one,
        # and a match counts when it starts on this line
        ln_end = len(ln)
        if ln_end <= _WRAP and i + 1 < len(low):
            joined = ln + b" " + low[i + 1]
            wrapped = orig[i] + b" " + orig[i + 1]
        else:
            joined, wrapped = ln, orig[i]
        words = set(_WORD.findall(joined))
        keys = words & idx.word_keys
        cands: List[_Entry] = []
        for k in keys:
            cands.extend(e for e in idx.words[k] if e[2] <= words)
        for p in prefixes:
            if p in joined:
                cands.extend(e for e in idx.prefixes[p] if e[2] <= words)
        if not cands:
            continue
        for sym, rx, _ in cands:
            m = rx.search(joined)
            if m is None or m.start() > ln_end:
                continue
            rr = idx.routine.get(sym.id)
            if rr is not None and rr.search(ln):
                continue  # a routine line (NCCL's plugin search) that only looks like it
            text = orig[i] if m.end() <= ln_end else wrapped
            hit = found.get(sym.id)
            span = m.end() - m.start()
            if hit is None:
                found[sym.id] = [i, counts[ln], span, text]
            else:
                hit[1] = int(hit[1]) + counts[ln]  # type: ignore[call-overload]
                hit[2] = max(int(hit[2]), span)  # type: ignore[call-overload]
    symptoms = getattr(matrix, "symptoms", {})
    hits = [SymptomHit(sid, origin, _decode(v[3]), int(v[0]) + 1, int(v[1]),  # type: ignore[arg-type,call-overload]
                       int(v[2]))  # type: ignore[call-overload]
            for sid, v in found.items()]
    hits.sort(key=lambda h: _order(h, symptoms[h.symptom]))
    return Scan(tuple(hits[:MAX_HITS]), len(raw), cut)


def _order(h: SymptomHit, s: Symptom) -> Tuple[object, ...]:
    """Errors before hangs before deaths; a wrapper after what it wraps; then the
    more specific match (longer matched text), then the earlier line."""
    kind = KIND_ORDER.index(s.kind) if s.kind in KIND_ORDER else len(KIND_ORDER)
    return (kind, h.symptom in WRAPPERS, -min(h.span, 80), h.lineno, h.symptom)


def scan_logs(logs: Sequence[Tuple[str, Union[str, bytes]]], matrix: object
              ) -> Tuple[Tuple[SymptomHit, ...], Tuple[str, ...]]:
    """Several logs: their hits merged (a symptom once, first log's line) and cut notices."""
    merged: Dict[str, SymptomHit] = {}
    cuts: List[str] = []
    symptoms = getattr(matrix, "symptoms", {})
    for origin, text in logs:
        s = scan(text, matrix, origin)
        if s.cut:
            cuts.append(s.cut)
        for h in s.hits:
            old = merged.get(h.symptom)
            if old is None:
                merged[h.symptom] = h
            else:
                merged[h.symptom] = SymptomHit(old.symptom, old.origin, old.line, old.lineno,
                                               old.count + h.count, max(old.span, h.span))
    hits = sorted(merged.values(), key=lambda h: _order(h, symptoms[h.symptom]))
    return tuple(hits[:MAX_HITS]), tuple(cuts)
