"""Issue 10: unknown is a first-class value from the facts to the findings.

Kleene truth tables for the condition evaluator, the facts that must stay unknown, and the
doctor/verify rules: a known-false advisory is never reported, an unknown one is reported
only on log evidence and marked not confirmed, evidence orders findings, and a bare signal
needs a corroborating fact.
"""

from __future__ import annotations

import copy
import itertools
from pathlib import Path
from typing import Any, Dict, Optional

import pytest

from envlock import _toml
from envlock.knowledge.evaluate import Outcome, evaluate, judge
from envlock.checks.doctor import doctor
from envlock.knowledge.facts import UNKNOWN, Facts, facts_from_snapshot
from envlock.checks.finding import Finding, sort_findings
from envlock.checks.logs import triage_logs
from envlock.matrix import get_matrix
from envlock.snapshot import Snapshot, load_snapshot

M = get_matrix()
DATA = Path(__file__).resolve().parents[1] / "data"
BASE = _toml.loads((DATA / "advisory_cases.toml").read_text())["base"]

# leaves with a fixed truth value on FACTS: True, False, unknown
FACTS = Facts({"gpu.count": 2, "driver.version": UNKNOWN}, {}, {}, {}, {})
LEAF = {True: {"fact": "gpu.count", "ge": 2}, False: {"fact": "gpu.count", "ge": 3},
        None: {"fact": "driver.version", "version": "<525"}}
TRI = (True, False, None)


def k_and(a: Optional[bool], b: Optional[bool]) -> Optional[bool]:
    if a is False or b is False:
        return False
    if a is None or b is None:
        return None
    return True


def k_or(a: Optional[bool], b: Optional[bool]) -> Optional[bool]:
    if a is True or b is True:
        return True
    if a is None or b is None:
        return None
    return False


@pytest.mark.parametrize("a,b", list(itertools.product(TRI, TRI)))
def test_kleene_all_any_truth_tables(a: Optional[bool], b: Optional[bool]) -> None:
    assert evaluate({"all": [LEAF[a], LEAF[b]]}, FACTS) is k_and(a, b)
    assert evaluate({"any": [LEAF[a], LEAF[b]]}, FACTS) is k_or(a, b)


@pytest.mark.parametrize("a", TRI)
def test_kleene_not_truth_table(a: Optional[bool]) -> None:
    assert evaluate({"not": LEAF[a]}, FACTS) is (None if a is None else not a)
    # De Morgan holds in Kleene logic too
    for b in TRI:
        assert (evaluate({"not": {"all": [LEAF[a], LEAF[b]]}}, FACTS)
                is evaluate({"any": [{"not": LEAF[a]}, {"not": LEAF[b]}]}, FACTS))


@pytest.mark.parametrize("values,expected", [
    ((True, True, True), True), ((True, None, True), None), ((True, None, False), False),
    ((None, None), None), ((False,), False),
])
def test_kleene_all_over_many_parts(values: tuple, expected: Optional[bool]) -> None:
    assert evaluate({"all": [LEAF[v] for v in values]}, FACTS) is expected
    negated = tuple(None if v is None else not v for v in values)
    want_any = None if expected is None else not expected
    assert evaluate({"any": [LEAF[v] for v in negated]}, FACTS) is want_any


def test_some_over_elements_is_kleene_any() -> None:
    gpus = [{"model": "h20"}, {"model": UNKNOWN}]
    f = Facts({}, {"gpu": gpus}, {}, {}, {})
    assert evaluate({"some": "gpu", "where": {"fact": "model", "equals": "h20"}}, f) is True
    assert evaluate({"some": "gpu", "where": {"fact": "model", "equals": "a100"}}, f) is None
    assert evaluate({"some": "gpu", "where": {"fact": "model", "equals": "a100"}},
                    Facts({}, {"gpu": [{"model": "h20"}]}, {}, {}, {})) is False
    assert evaluate({"some": "gpu", "where": {"fact": "model", "equals": "h20"}},
                    Facts({}, {}, {}, {}, {})) is None  # unknown collection


def test_outcome_names_unknown_and_deciding_facts() -> None:
    cond = {"all": [LEAF[True], LEAF[None], {"fact": "package.vllm", "present": True}]}
    out = judge(cond, Facts({"gpu.count": 2, "driver.version": UNKNOWN}, {}, None, {}, {}))
    # unknown: what decides it, and what is already known of it (the term it meets)
    assert out == Outcome(None, ("driver.version", "package.vllm"), (), ("gpu.count=2",))
    out = judge({"any": [LEAF[False], LEAF[None]]},
                Facts({"gpu.count": 1, "driver.version": UNKNOWN}, {}, None, {}, {}))
    assert out == Outcome(None, ("driver.version",), (), ("gpu.count=1",))
    out = judge({"all": [LEAF[None], LEAF[False]]}, FACTS)
    assert out == Outcome(False, (), ("gpu.count=2",))
    assert judge(LEAF[True], FACTS).because == ("gpu.count=2",)


def test_list_fact_with_an_unknown_item_is_unknown_not_false() -> None:
    f = Facts({"gpu.model": ["a100", UNKNOWN]}, {}, {}, {}, {})
    assert evaluate({"fact": "gpu.model", "in": ["h20"]}, f) is None
    assert evaluate({"fact": "gpu.model", "in": ["a100"]}, f) is True


def test_absent_is_not_unknown() -> None:
    f = Facts({}, {}, {"torch": "2.3.1"}, {}, {})
    assert evaluate({"fact": "package.vllm", "present": False}, f) is True
    assert evaluate({"fact": "package.numpy", "version": ">=2"}, f) is False
    assert evaluate({"fact": "env.NCCL_P2P_DISABLE", "present": False}, f) is True
    incomplete = Facts({}, {}, {"torch": "2.3.1"}, {}, {}, packages_complete=False)
    assert evaluate({"fact": "package.numpy", "version": ">=2"}, incomplete) is None
    assert evaluate({"fact": "library.cublas.version", "known": False}, f) is True


def _snap(**patch: Any) -> Snapshot:
    s = copy.deepcopy(BASE)
    s.update(patch)
    return Snapshot.from_dict(s)


def _gpus(name: str, cc: str, n: int = 8, memory: int = 81559) -> Dict[str, Any]:
    return {"gpus": [{"index": i, "name": name, "compute_capability": cc, "memory_mib": memory}
                     for i in range(n)]}


def test_empty_package_list_is_unknown_not_no_cuda_wheels() -> None:
    f = facts_from_snapshot(_snap(packages={}), M)
    assert f.get("packages.cuda_major_count") is UNKNOWN
    assert f.get("package.nvidia-cublas-cu12") is UNKNOWN
    listed = facts_from_snapshot(_snap(packages={"torch": "2.5.1"}), M)
    assert listed.get("packages.cuda_major_count") == 0
    assert listed.get("package.nvidia-cublas-cu12") is None  # known absent


def test_unknown_gpu_name_stays_unknown_and_missing_library_probe_is_derived() -> None:
    f = facts_from_snapshot(_snap(**_gpus("NVIDIA Mystery GPU", "9.0", 1), libraries=[]), M)
    assert f.get("gpu.model") == [UNKNOWN]
    # issue 27: no probe, but the installed wheel says which cuBLAS the process loads
    assert f.get("library.cublas.version") == "12.6.4.1"
    assert f.origin("library.cublas.version") == (
        "from the installed wheel nvidia-cublas-cu12==12.6.4.1")
    assert f.elements("library") is UNKNOWN  # which copies are loaded is still unknown
    # nothing to derive from (no packages, no torch): unknown
    bare = facts_from_snapshot(_snap(**_gpus("NVIDIA H20", "9.0", memory=97871),
                                     libraries=[], packages={}, torch=None), M)
    assert bare.get("library.cublas.version") is UNKNOWN
    # the GPU's model is unknown, but the derived cuBLAS 12.6 rules the H20 advisory out
    assert evaluate(M.advisories["h20-cublas121-sigfpe"].condition, f) is False
    assert evaluate(M.advisories["h20-cublas121-sigfpe"].condition, bare) is None


SIGFPE_LOG = "Caught signal 8 (Floating point exception)\nexitcode: -8\n"
HANG_LOG = ("[E ProcessGroupNCCL.cpp:474] [Rank 3] Watchdog caught collective operation timeout: "
            "WorkNCCL(SeqNum=1043, OpType=ALLREDUCE) ran for 1800000 milliseconds before timing "
            "out.\n")


def test_bare_sigfpe_on_a100_does_not_lead_with_the_h20_advisory() -> None:
    snap = _snap(**_gpus("NVIDIA A100-SXM4-80GB", "8.0"))
    result = doctor(snap, M, logs=[("train.log", SIGFPE_LOG)])
    assert "h20-cublas121-sigfpe" not in [f.id for f in result.findings]
    ruled = {r.advisory: r.because for r in result.ruled_out}
    assert any(b.startswith("gpu.model=a100") for b in ruled["h20-cublas121-sigfpe"])


def test_hang_log_on_a_healthy_h800_reports_no_geforce_advisory() -> None:
    snap = _snap(**_gpus("NVIDIA H800", "9.0"))
    result = doctor(snap, M, logs=[("train.log", HANG_LOG)])
    ids = [f.id for f in result.findings]
    assert not any("geforce" in i for i in ids), ids
    assert "geforce-multi-gpu-p2p-hang-corruption" in {r.advisory for r in result.ruled_out}


def test_no_known_false_advisory_is_ever_reported_for_any_log_symptom() -> None:
    """Every symptom and signal of every advisory, pasted as a log on the healthy 8x H100
    base: nothing reported is known false there."""
    # taken inside the job (a launcher's RANK): its environment is the job's, so env
    # facts decide as well (a shell's snapshot leaves them unknown for a log: below)
    snap = _snap().with_env(RANK="0")
    facts = facts_from_snapshot(snap, M)
    for adv in M.advisories.values():
        lines = [p.replace("\\", "") for p in adv.symptoms] + [
            {"SIGFPE": "Signal 8 (SIGFPE)", "SIGSEGV": "Signal 11 (SIGSEGV)",
             "timeout": "Watchdog caught collective operation timeout"}.get(s, s)
            for s in adv.signals]
        if not lines:
            continue
        result = doctor(snap, M, logs=[("log", "\n".join(lines))])
        for f in result.findings:
            a = M.advisories.get(f.id)
            if a is not None and a.condition is not None:
                assert evaluate(a.condition, facts) is not False, (adv.id, f.id)


def test_unknown_condition_with_a_pattern_is_reported_not_confirmed() -> None:
    # no library probe, no package list, no torch: the H20 condition is unknown on this box
    snap = _snap(**_gpus("NVIDIA H20", "9.0", memory=97871), libraries=[], packages={},
                 torch=None)
    log = "1 0x0000000000a0bc59 cublasLt_for_cublas_ZZZ()  ???:0\nSIGFPE\n"
    triage = triage_logs([("log", log)], M, facts_from_snapshot(snap, M))
    m = next(m for m in triage.matches if m.advisory == "h20-cublas121-sigfpe")
    assert m.level == "pattern"
    assert "library.cublasLt.version" in m.not_confirmed
    f = next(f for f in doctor(snap, M, logs=[("log", log)]).findings
             if f.id == "h20-cublas121-sigfpe")
    assert "Not confirmed: " in f.detail and "unknown." in f.detail
    assert f.not_confirmed and f.to_dict()["not_confirmed"] == list(f.not_confirmed)


def test_bare_signal_needs_a_corroborating_fact() -> None:
    # unknown condition + only a signal: not reported
    snap = _snap(**_gpus("NVIDIA H20", "9.0", memory=97871), libraries=[], packages={},
                 torch=None)
    triage = triage_logs([("log", SIGFPE_LOG)], M, facts_from_snapshot(snap, M))
    assert "h20-cublas121-sigfpe" not in [m.advisory for m in triage.matches]
    assert "h20-cublas121-sigfpe" in [m.advisory for m in triage.uncorroborated]
    # the same signal on a machine where the condition holds: reported at signal level
    known = _snap(**_gpus("NVIDIA H20", "9.0", memory=97871),
                  libraries=[{"name": "cublasLt", "version": "12.1.3.1", "path": "/x",
                              "owner": "nvidia-cublas-cu12", "selected": True}])
    triage = triage_logs([("log", SIGFPE_LOG)], M, facts_from_snapshot(known, M))
    assert triage.matches[0].advisory == "h20-cublas121-sigfpe"
    assert triage.matches[0].level == "signal"
    # and without any machine facts a bare signal is never reported
    assert triage_logs([("log", SIGFPE_LOG)], M, None).matches == ()


def test_evidence_orders_findings_not_severity() -> None:
    pattern_warn = Finding("a", "warning", "nccl", "t", evidence="pattern", score=1.0)
    signal_err = Finding("b", "error", "nccl", "t", evidence="signal", score=9.0)
    fact_err = Finding("c", "error", "nccl", "t")
    unconfirmed = Finding("d", "error", "nccl", "t", evidence="pattern", score=5.0,
                          not_confirmed=("library.cublas.version",))
    order = [f.id for f in sort_findings([fact_err, signal_err, unconfirmed, pattern_warn])]
    assert order == ["a", "d", "b", "c"]


HEALTHY = ["h100-match.json", "build-container.json", "h20-on-h100-lock.json"]


@pytest.mark.parametrize("name", HEALTHY)
def test_healthy_snapshots_stay_silent(name: str) -> None:
    snap = load_snapshot(str(DATA / "snapshots" / name))
    assert doctor(snap, M).findings == ()
    # a hang log on a healthy box names no advisory whose condition is false there
    facts = facts_from_snapshot(snap, M)
    for f in doctor(snap, M, logs=[("log", HANG_LOG)]).findings:
        a = M.advisories.get(f.id)
        assert a is None or a.condition is None or evaluate(a.condition, facts) is not False


def test_doctor_verbose_lists_ruled_out_advisories_with_their_facts(tmp_path: Path) -> None:
    import json

    from support.cli import run_cli

    doc = copy.deepcopy(BASE)
    doc.update(_gpus("NVIDIA A100-SXM4-80GB", "8.0"))
    snap = tmp_path / "a100.json"
    snap.write_text(json.dumps(doc))
    log = tmp_path / "crash.log"
    log.write_text(SIGFPE_LOG)
    r = run_cli("doctor", "--snapshot", str(snap), "--log", str(log), "-v")
    assert "[h20-cublas121-sigfpe]" not in r.out
    # issue 28: under the symptom the log shows (SIGFPE), one line per ruled-out cause
    # with the deciding fact, with and without -v
    assert "ruled out: h20-cublas121-sigfpe (gpu.model=a100-sxm4-80gb)" in r.out, r.out
    quiet = run_cli("doctor", "--snapshot", str(snap), "--log", str(log))
    assert "symptom: SIGFPE" in quiet.out
    assert "ruled out: h20-cublas121-sigfpe (gpu.model=a100-sxm4-80gb)" in quiet.out
    data = json.loads(run_cli("doctor", "--snapshot", str(snap), "--log", str(log),
                              "--json").out)
    assert "h20-cublas121-sigfpe" in [x["id"] for x in data["ruled_out"]]
