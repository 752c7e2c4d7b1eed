"""A host whose GPUs span architectures, with a build covering only one end (issue 34):
doctor and verify name the policy (highest GPU: NVIDIA's variant provider; lowest:
conda's __cuda_arch)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from envlock.checks.arch_span import arch_span_findings
from envlock.checks.doctor import doctor
from envlock.matrix import get_matrix
from envlock.snapshot import TorchInfo, load_snapshot

SNAP = Path(__file__).resolve().parents[1] / "data" / "snapshots" / "mixed-h100-a100.json"


def _with_arch(*arch: str):  # type: ignore[no-untyped-def]
    snap = load_snapshot(str(SNAP))
    torch = snap.torch or TorchInfo(version="2.8.0+cu128", cuda="12.8")
    return dataclasses.replace(snap, torch=dataclasses.replace(torch, arch_list=arch))


def test_only_the_newest_covered_names_the_providers_policy() -> None:
    snap = _with_arch("sm_90")
    found = arch_span_findings(snap)
    assert [f.id for f in found] == ["gpu-arch-span-one-end"]
    assert "covers only the newest (9.0)" in found[0].title
    assert "highest GPU" in found[0].detail
    assert "gpu-arch-span-one-end" in {f.id for f in doctor(snap, get_matrix()).findings}


def test_only_the_oldest_covered_names_condas_policy() -> None:
    found = arch_span_findings(_with_arch("sm_80", "sm_86"))
    assert found and "covers only the oldest (8.0)" in found[0].title
    assert "__cuda_arch" in found[0].detail


def test_quiet_when_every_gpu_is_covered_or_the_list_is_unknown() -> None:
    assert arch_span_findings(_with_arch("sm_80", "sm_90")) == []
    snap = load_snapshot(str(SNAP))
    unknown = dataclasses.replace(snap, torch=TorchInfo(version="2.8.0", arch_list=None))
    assert arch_span_findings(unknown) == []
