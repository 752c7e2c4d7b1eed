"""The corpus of real logs: its manifest is sound, and triage stays above the committed floors."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from typing import Any

from envlock._toml import loads
from envlock.matrix import get_matrix

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "data" / "logs"


def _eval_module() -> Any:
    path = ROOT / "scripts" / "triage_eval.py"
    spec = importlib.util.spec_from_file_location("triage_eval", path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules["triage_eval"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_the_manifest_lists_every_log_with_a_source_a_cause_and_a_known_advisory() -> None:
    entries = loads((CORPUS / "corpus.toml").read_text(encoding="utf-8"))["log"]
    files = {p.name for p in CORPUS.glob("*.log")}
    listed = [e["file"] for e in entries]
    assert sorted(listed) == sorted(files) and len(set(listed)) == len(listed)
    ids = set(get_matrix().advisories)
    for e in entries:
        assert re.match(r"^https://github\.com/[\w.-]+/[\w.-]+/(issues|pull)/\d+$", e["source"]), e
        assert len(e["cause"]) > 20, e
        assert e["expect"] in ("none", "unknown") or e["expect"] in ids, e
        assert e.get("half") in ("A", "B"), e
        assert all(i in get_matrix().symptoms for i in e.get("influenced", [])), e
        assert (CORPUS / e["file"]).read_text(encoding="utf-8").strip(), e


def test_triage_figures_do_not_drop_below_the_committed_floors() -> None:
    floors = loads((CORPUS / "thresholds.toml").read_text(encoding="utf-8"))
    f = _eval_module().measure(CORPUS)
    assert f.crash >= floors["crash_logs_min"] and f.healthy >= floors["healthy_logs_min"]
    wrong = [(o.file, o.expect, o.ranked[:3]) for o in f.outcomes
             if (o.first is not None if o.healthy else o.first != o.expect)]
    assert f.top1 / f.crash >= floors["top1_min"], wrong
    assert f.top3 / f.crash >= floors["top3_min"], wrong
    assert f.misleading <= floors["misleading_max"], wrong
    assert f.healthy_fp <= floors["healthy_fp_max"], wrong


def test_held_out_half_and_symptom_coverage_stay_above_their_floors() -> None:
    floors = loads((CORPUS / "thresholds.toml").read_text(encoding="utf-8"))
    mod = _eval_module()
    b = mod.measure(CORPUS, half="B")
    wrong = [(o.file, o.expect, o.ranked[:2]) for o in b.outcomes
             if o.judged and o.first != o.expect]
    assert b.crash >= 20 and b.top1 / b.crash >= floors["held_out_top1_min"], wrong
    assert b.misleading <= floors["held_out_misleading_max"], wrong
    cov = mod.coverage(mod.measure(CORPUS))
    missing = [o.file for o in mod.measure(CORPUS).outcomes if not o.healthy and not o.symptoms]
    assert cov["with_symptom"] / cov["crash_logs"] >= floors["symptom_coverage_min"], missing
    assert cov["healthy_logs"] - cov["healthy_silent"] <= floors["healthy_symptoms_max"]


def test_the_script_prints_the_figures_and_writes_nothing(tmp_path: Path, capsys: Any) -> None:
    before = sorted(p.name for p in CORPUS.iterdir())
    assert _eval_module().main([]) == 0
    out = capsys.readouterr().out
    assert "top-1" in out and "top-3" in out and "misleading" in out and "healthy FP" in out
    assert "half A" in out and "half B (held out)" in out and "symptom coverage" in out
    assert sorted(p.name for p in CORPUS.iterdir()) == before
