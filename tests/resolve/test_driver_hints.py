"""Drivers as users name them: releases, branches, uv's and conda's hints, this host's.

Offline resolutions (the matrix core): the driver decides the build, no index is needed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envlock import _toml
from envlock.matrix import get_matrix
from envlock.resolve.driver import branch_floor, deployed_branches, parse_driver
from envlock.versions import V
from support.cli import run_cli, run_proc


def _resolve(tmp_path: Path, *args: str) -> dict:
    out = tmp_path / "l.lock"
    r = run_cli("resolve", "--offline", "--python", "3.11", "-o", str(out), *args)
    assert r.code == 0, r.err
    return {"lock": _toml.loads(out.read_text()), "out": r.out}


def _runs_on(lock: dict, driver: str) -> bool:
    return V(lock["target"][0]["driver-min"]) <= V(driver)


@pytest.mark.parametrize("given", ["535", "R535", "r535"])
def test_a_branch_means_its_oldest_release_that_knows_the_gpu(tmp_path: Path,
                                                               given: str) -> None:
    got = _resolve(tmp_path, "--gpu", "H20", "--driver", given)
    t = got["lock"]["target"][0]
    h20 = get_matrix().gpu("H20")
    assert t["driver"] == h20.min_driver and t["driver"].startswith("535.")
    assert _runs_on(got["lock"], h20.min_driver)
    assert any("driver branch R535" in d and "every R535 release" in d for d in t["decision"])
    assert "every R535 release" in got["out"]


def test_a_two_part_release_is_accepted_and_a_bad_one_names_the_forms(tmp_path: Path) -> None:
    got = _resolve(tmp_path, "--gpu", "H20", "--driver", "535.104")
    assert got["lock"]["target"][0]["driver"] == "535.104"
    assert _runs_on(got["lock"], "535.104")
    r = run_cli("resolve", "--offline", "--gpu", "H20", "--driver", "R5x", "--dry-run")
    assert r.code == 2 and "535.104.05" in r.err and "R535" in r.err


def test_branch_floor_without_a_gpu_row_in_the_branch() -> None:
    a100 = get_matrix().gpu("A100")
    assert branch_floor(535, [a100]) == "535.0"
    assert parse_driver("R550", [a100]).version == "550.0"


def test_uv_driver_variable_gives_a_build_that_runs_on_r535(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    monkeypatch.setenv("UV_CUDA_DRIVER_VERSION", "535.104.05")
    got = _resolve(tmp_path, "--gpu", "H20")
    t = got["lock"]["target"][0]
    assert t["driver"] == "535.104.05"
    assert _runs_on(got["lock"], "535.104.05")
    assert any("UV_CUDA_DRIVER_VERSION" in d for d in t["decision"])
    # --driver wins over the hint
    got = _resolve(tmp_path, "--gpu", "H20", "--driver", "580.65.06")
    assert got["lock"]["target"][0]["driver"] == "580.65.06"


def test_conda_override_cuda_is_the_driver_floor_of_that_cuda(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch
                                                              ) -> None:
    monkeypatch.setenv("CONDA_OVERRIDE_CUDA", "12.2")
    got = _resolve(tmp_path, "--gpu", "H20")
    t = got["lock"]["target"][0]
    assert t["driver"] == get_matrix().toolkit_driver("12.2")
    assert _runs_on(got["lock"], t["driver"])
    monkeypatch.setenv("CONDA_OVERRIDE_CUDA", "99.9")
    r = run_cli("resolve", "--offline", "--gpu", "H20", "--dry-run")
    assert r.code == 2 and "CONDA_OVERRIDE_CUDA" in r.err


def test_no_driver_names_the_floor_and_the_command_for_the_oldest_common_branch(
        tmp_path: Path) -> None:
    got = _resolve(tmp_path, "--gpu", "H20")
    floor = got["lock"]["target"][0]["driver-min"]
    branches = [b for b, _ in deployed_branches(get_matrix(), [get_matrix().gpu("H20")])]
    assert branches[0] == 535  # H20 launched on R535 (LTSB)
    assert f"this lock needs driver >= {floor}" in got["out"]
    if int(floor.split(".")[0]) > 535:
        line = next(x for x in got["out"].splitlines() if "for every R535 release" in x)
        cmd = line.split(": ", 1)[1]
        assert cmd.startswith("envlock resolve ") and cmd.endswith("--driver R535")
        # the printed command runs and gives a lock for R535
        again = _resolve(tmp_path, *cmd.split()[2:])
        assert _runs_on(again["lock"], branch_floor(535, [get_matrix().gpu("H20")]))
        assert "no driver given" not in again["out"]


def test_json_has_no_hint_lines(tmp_path: Path) -> None:
    r = run_cli("resolve", "--offline", "--gpu", "H20", "--dry-run", "--json")
    assert r.code == 0
    json.loads(r.out)


def test_this_hosts_gpus_and_driver_without_gpu_or_driver(tmp_path: Path) -> None:
    from support.fakenvml import FakeNvmlUnavailable, build_fake_nvml, nvml_env, scenario_file

    try:
        libdir = build_fake_nvml(tmp_path / "nvml")
    except FakeNvmlUnavailable:
        pytest.skip("no C compiler for the fake libnvidia-ml.so.1")
    scen = scenario_file(tmp_path, """
        driver 535.104.05
        cuda 12020
        gpu 0 name="NVIDIA H20" uuid=GPU-0 cc=9.0 mem=97871 bus=00000000:18:00.0 mig=0
    """)
    out = tmp_path / "host.lock"
    r = run_proc("resolve", "--offline", "--python", "3.11", "-o", str(out),
                 env=nvml_env(libdir, scen))
    assert r.code == 0, r.err
    t = _toml.loads(out.read_text())["target"][0]
    assert t["gpu-models"] == ["h20"] and t["driver"] == "535.104.05"
    assert V(t["driver-min"]) <= V("535.104.05")
    assert any("this host" in d for d in t["decision"])


def test_each_target_of_several_gets_a_driver_command_that_works(tmp_path: Path) -> None:
    # a --driver applies to every target: the command printed for one target of several
    # names that target's GPU alone (with all three it exits 3 on the others)
    import shlex

    r = run_cli("resolve", "--offline", "--python", "3.11", "--dry-run", "--gpu", "H20",
                "--gpu", "A100", "--gpu", "RTX 4090")
    assert r.code == 0, r.err
    cmds = [line.split(": ", 1)[1] for line in r.out.splitlines() if "for every R" in line]
    assert len(cmds) >= 2, r.out
    for cmd in cmds:
        argv = shlex.split(cmd)
        assert argv[:2] == ["envlock", "resolve"] and argv.count("--gpu") == 1, cmd
        again = run_cli(*argv[1:], "--dry-run")
        assert again.code == 0, (cmd, again.err)
