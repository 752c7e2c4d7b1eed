"""Read and check the symptom tables (``compat-matrix/symptoms-*.toml``).

Each file is one table (``[table]`` with its ``id`` and ``title``) of ``[[symptom]]`` rows:
an error a log can show (a CUDA, NCCL, cuBLAS or cuDNN code, an Xid, a signal, a loader or
PyTorch message, hang evidence), its patterns, what it means and the generic next step.
Checks: ids unique across tables, every pattern safe to run on untrusted text
(:func:`~envlock.matrix.patterns.pattern_problem`) and anchored by a literal word the log
matcher can index (:func:`~envlock.matrix.anchors.anchors`), every cause an advisory id,
every row a source.
"""

from __future__ import annotations

import re
from typing import Any, Dict, Mapping

from envlock.matrix.anchors import anchors
from envlock.matrix.files import DATA_FILES
from envlock.matrix.load_common import Ctx, top_rows
from envlock.matrix.model import Advisory, Symptom
from envlock.matrix.patterns import pattern_problem
from envlock.matrix.rows import Row

__all__ = ["symptoms", "SYMPTOM_FILES", "KINDS"]

SYMPTOM_FILES = tuple(n for n in DATA_FILES if n.startswith("symptoms-"))
#: error: a failure the program reported; death: the process was killed; hang: it waits
KINDS = ("error", "death", "hang")
_SID = re.compile(r"^[a-z0-9-]+\.[A-Za-z0-9_.-]+$")


def symptoms(raw: Mapping[str, Dict[str, Any]], ctx: Ctx,
             advisories: Mapping[str, Advisory]) -> Dict[str, Symptom]:
    out: Dict[str, Symptom] = {}
    for name in SYMPTOM_FILES:
        data = raw.get(name, {})
        head = Row(name, "table", data.get("table", {}), ctx.problems)
        table = head.text("id")
        head.text("title")
        head.flag("generated")
        head.finish()
        for row in top_rows(raw, name, "symptom", ctx.problems, also=("table",)):
            sid = row.text("id", check=_SID.match, what="'<table>.<name>'")  # type: ignore[arg-type]
            pats = row.str_list("patterns", required=True) or ()
            if not pats:
                row.problem("patterns", "a symptom needs at least one pattern")
            for j, pat in enumerate(pats):
                why = pattern_problem(pat)
                if why:
                    row.problem(f"patterns[{j}]", why)
                elif not anchors(pat):
                    row.problem(f"patterns[{j}]", "no literal word of 3+ characters the "
                                "matcher can index (write one outside any optional part)")
            routine = row.str_list("routine") or ()
            for j, pat in enumerate(routine):
                why = pattern_problem(pat)
                if why:
                    row.problem(f"routine[{j}]", why)
            causes = row.str_list("causes") or ()
            for j, c in enumerate(causes):
                if c not in advisories:
                    row.problem(f"causes[{j}]", f"unknown advisory id {c!r}")
            code = row.integer("code", required=False)
            sym = Symptom(
                id=sid, table=table, name=row.text("name"),
                kind=row.choice("kind", KINDS, default="error", required=False) or "error",
                patterns=pats, meaning=row.text("meaning"), next=row.text("next"),
                causes=causes, provenance=ctx.provenance(row), code=code,
                message=row.opt_text("message"), routine=routine,
            )
            row.finish()
            if sid in out:
                row.problem("id", f"duplicate symptom id {sid!r}")
            out[sid] = sym
    return out
