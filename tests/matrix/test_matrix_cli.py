"""``envlock matrix gpu|torch|driver``: what users type, text and JSON."""

from __future__ import annotations

import json

from support.cli import run_cli, run_proc


def test_gpu_text_answer() -> None:
    r = run_cli("matrix", "gpu", "H20")
    assert r.code == 0
    assert "compute capability   9.0 (sm_90), Hopper" in r.out
    assert "minimum driver" in r.out
    assert "2.15.0" in r.out and "cu132*" in r.out


def test_gpu_json_lists_builds_with_kernels() -> None:
    r = run_cli("matrix", "gpu", "rtx 4090", "--json")
    data = json.loads(r.out)
    assert data["id"] == "rtx-4090" and data["compute_capability"] == "8.9"
    by_rel = {x["release"]: x["builds"] for x in data["torch"]}
    assert any(b["coverage"] == "sass" and b["target"] == "sm_86" for b in by_rel["2.5.1"])


def test_blackwell_has_no_kernels_before_cu128() -> None:
    data = json.loads(run_cli("matrix", "gpu", "RTX 5090", "--json").out)
    by_rel = {x["release"]: x["builds"] for x in data["torch"]}
    assert all(b["coverage"] != "sass" for b in by_rel["2.6.0"])
    assert any(b["tag"] == "cu128" and b["coverage"] == "sass" for b in by_rel["2.7.0"])


def test_unknown_gpu_exits_2_with_suggestions() -> None:
    r = run_proc("matrix", "gpu", "H2O")
    assert r.code == 2
    assert r.err.strip() == "envlock: error: unknown GPU 'H2O'; did you mean 'NVIDIA H20'?"
    assert "Traceback" not in r.err


def test_torch_release_details() -> None:
    data = json.loads(run_cli("matrix", "torch", "2.5.1", "--json").out)
    assert data["date"] == "2024-10-29"
    assert data["torchvision"] == ["0.20.1"]
    assert "3.13" in data["pythons"]["linux_x86_64"]
    tags = {(v["tag"], v["index"] == "pypi") for v in data["variants"]
            if v["platform"] == "linux_x86_64"}
    assert ("cu124", True) in tags and ("cu121", False) in tags and ("cu118", False) in tags
    text = run_cli("matrix", "torch", "2.5.1").out
    assert "torch 2.5.1  released 2024-10-29" in text


def test_unknown_torch_release_suggests() -> None:
    r = run_cli("matrix", "torch", "2.5.3")
    assert r.code == 2 and "did you mean" in r.err


def test_driver_535_runs_cuda_12_but_not_13() -> None:
    data = json.loads(run_cli("matrix", "driver", "535.104.05", "--json").out)
    assert data["branch"]["id"] == "R535"
    runs = {m["major"]: m["runs"] for m in data["cuda_majors"]}
    assert runs == {11: True, 12: True, 13: False}
    assert data["full_cuda"] == "12.2"
    newest = data["newest_torch"][0]
    assert not newest["tag"].startswith("cu13")
    assert all(not b["tag"].startswith("cu13") for b in data["newest_torch"])


def test_driver_bad_version_is_a_usage_error() -> None:
    r = run_cli("matrix", "driver", "five-three-five")
    assert r.code == 2 and "is not an NVIDIA driver version" in r.err


def test_torch_view_shows_the_companion_pairing() -> None:
    # torchaudio 2.11.0 names no torch; companions.toml pairs it, as the resolver does
    data = json.loads(run_cli("matrix", "torch", "2.11.0", "--json").out)
    assert data["torchaudio"] == ["2.11.0"] and data["torchvision"] == ["0.26.0"]
    text = run_cli("matrix", "torch", "2.11.0").out
    assert "torchvision 0.26.0;  torchaudio 2.11.0\n" in text


def test_a_gpu_of_nvidias_packaged_list_answers() -> None:
    r = run_cli("matrix", "gpu", "Quadro P4000")
    assert r.code == 0
    assert "compute capability   6.1 (sm_61), Pascal (GP104)" in r.out
    assert "last driver branch   R580" in r.out
    data = json.loads(run_cli("matrix", "gpu", "10de:1bb1", "--json").out)
    assert data["id"] == "quadro-p4000" and data["last_driver_branch"] == "R580"
