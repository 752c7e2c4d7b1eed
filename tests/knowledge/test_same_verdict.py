"""Issue 27: resolve, verify, doctor and fleet give the same verdict for the same facts.

Shared fixtures: a machine stated without a library list (an H20, driver 560.35.03 and the
package ``torch 2.1.0+cu121``, as a user describes it or a support engineer reads it from a
bug report; built with ``envlock snapshot --gpu H20 --driver 560.35.03`` and its package
list replaced), and the same machine with torch 2.14.1+cu126. The resolver judges the plan
of the same build for the same GPU and driver. One engine: one verdict on the cuBLAS SIGFPE
advisory in all four.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import List, Optional

import pytest
from packaging.specifiers import SpecifierSet

from envlock.checks.doctor import doctor
from envlock.checks.verify import verify
from envlock.fleet.compare import NodeInput, compare_fleet
from envlock.lock.io import load_lock
from envlock.matrix import get_matrix
from envlock.knowledge import find_build
from envlock.resolve.hardware import choose_variant, judge_build, plan_facts
from envlock.resolve.target import gpu_targets
from envlock.snapshot import Snapshot, load_snapshot

M = get_matrix()
DATA = Path(__file__).resolve().parents[1] / "data"
STATED = DATA / "knowledge" / "h20-stated-torch210.json"
H20 = "h20-cublas121-sigfpe"


def _stated(torch: str) -> Snapshot:
    snap = load_snapshot(str(STATED))
    return dataclasses.replace(snap, packages={"torch": torch})


def _doctor(snap: Snapshot) -> bool:
    return H20 in {f.id for f in doctor(snap, M).findings}


def _verify(snap: Snapshot) -> bool:
    lock = load_lock(DATA / "locks" / "cu121-h100-h20.lock")
    target = next(t for t in lock.targets if t.name == "h20")
    return H20 in {f.id for f in verify(lock, target, snap, M).findings}


def _fleet(snap: Snapshot) -> bool:
    nodes = [NodeInput(node=i, rank=i, name=f"n{i}", alias=f"n{i}", digest="d", snapshot=snap)
             for i in range(2)]
    result = compare_fleet(nodes, expected=2, matrix=M)
    return H20 in {x.finding.id for x in result.findings}


def _resolve(torch: str) -> Optional[bool]:
    """The resolver's verdict on the plan of that very build for the same GPU and driver."""
    target = gpu_targets(M, ["H20"], cpu=False, together=False, python="3.11",
                         platform="linux_x86_64", glibc="2.28", driver="560.35.03")[0]
    build = find_build(M, torch, "linux_x86_64")
    assert build is not None
    verdicts = {v.advisory.id: v.outcome.value
                for v in judge_build(M, plan_facts(M, target, build, complete=True))}
    return verdicts[H20]


@pytest.mark.parametrize("torch,applies", [("2.1.0+cu121", True), ("2.14.1+cu126", False)])
def test_one_verdict_on_the_same_facts(torch: str, applies: bool) -> None:
    snap = _stated(torch)
    verdicts: List[Optional[bool]] = [_doctor(snap), _verify(snap), _fleet(snap),
                                      _resolve(torch)]
    assert verdicts == [applies] * 4, verdicts


def test_the_resolver_acts_on_that_verdict() -> None:
    target = gpu_targets(M, ["H20"], cpu=False, together=False, python="3.11",
                         platform="linux_x86_64", glibc="2.28", driver="560.35.03")[0]
    old = choose_variant(M, target, SpecifierSet("==2.1.0"), cuda="12.1")
    assert {a.id: a.action for a in old.advisories}[H20] in ("override", "excluded")
    new = choose_variant(M, target, SpecifierSet("==2.14.1"), cuda="12.6")
    assert H20 not in {a.id for a in new.advisories}
