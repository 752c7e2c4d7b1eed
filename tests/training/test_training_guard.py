"""The training guard in real processes: torchrun on CPU/gloo with 2 and 4 ranks, and a
single plain process. One launch runs many checks (scenarios.py) to keep the suite fast."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional

import pytest

pytest.importorskip("torch")

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
LAUNCH_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK",
               "GROUP_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID")



def _guard_lines(stderr: str) -> list:
    """Lines that mention envlock other than inside a file path (a venv or temporary
    directory may be named after envlock: torch's own warnings quote such paths)."""
    import re as _re

    return [ln for ln in stderr.splitlines()
            if _re.search(r"\benvlock\b", _re.sub(r"\S*/\S*", " ", ln))]

def _env(gpu: bool = False) -> Dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in LAUNCH_VARS}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(HERE)] +
                                        ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    if not gpu:
        env["CUDA_VISIBLE_DEVICES"] = ""  # these are the CPU/gloo cases
    return env


def _run(args: List[str], nproc: Optional[int], cwd: Path,
         gpu: bool = False) -> "subprocess.CompletedProcess[str]":
    # --standalone: torchrun picks a free port for its own rendezvous (never a fixed one)
    launch = [sys.executable, "-m", "torch.distributed.run", "--standalone",
              "--nproc-per-node", str(nproc), "--monitor-interval", "0.1"] if nproc else \
        [sys.executable]
    return subprocess.run(launch + args, cwd=str(cwd), env=_env(gpu), capture_output=True,
                          text=True, timeout=300, check=False)


@pytest.fixture(scope="module", params=[2, 4], ids=["2-ranks", "4-ranks"])
def results(request, tmp_path_factory) -> Dict[int, dict]:
    out = tmp_path_factory.mktemp(f"guard{request.param}")
    p = _run([str(HERE / "scenarios.py"), str(out)], request.param, out)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    got = {int(f.stem.split("-")[1]): json.loads(f.read_text()) for f in out.glob("rank-*")}
    assert sorted(got) == list(range(request.param))
    return got


def _ids(results: Dict[int, dict], name: str) -> List[str]:
    """The scenario's finding ids, which every rank must agree on."""
    per_rank = {r: tuple(d[name]["ids"]) for r, d in results.items()}
    assert len(set(per_rank.values())) == 1, per_rank
    return list(per_rank[0])


SHARDING = "training-data-sharding"


@pytest.mark.parametrize("name", ["plain-shuffle", "plain-sequential", "plain-seed-per-rank",
                                  "distributed-one-replica", "accelerate-unsharded",
                                  "accelerate-bare-object", "coqui-unwrapped",
                                  "coqui-one-replica", "distributed-drawn-one-replica"])
def test_unsharded_loaders_are_reported(results, name) -> None:
    assert _ids(results, name) == [SHARDING]
    fixes = results[0][name]["fixes"][0]
    assert "DistributedSampler(ds)" in fixes and "set_epoch" in fixes


def test_overlap_is_named(results) -> None:
    assert results[0]["plain-sequential"]["titles"] == \
        ["every rank sees the same samples (overlap 100%)"]
    assert results[0]["plain-shuffle"]["titles"] == \
        ["every rank iterates the whole dataset (10000 samples per epoch of 10000)"]
    assert results[0]["plain-seed-per-rank"]["titles"] == \
        ["every rank iterates the whole dataset (200000 samples per epoch of 200000)"]


@pytest.mark.parametrize("name", ["distributed", "distributed-padded", "distributed-drawn",
                                  "accelerate",
                                  "accelerate-split", "coqui", "model-ddp", "model-fsdp"])
def test_sharded_loaders_are_silent(results, name) -> None:
    if results[0][name] is None:
        pytest.skip("this torch has no torch.distributed.fsdp.fully_shard")
    assert _ids(results, name) == []


def test_no_process_group_is_reported(results) -> None:
    assert _ids(results, "no-process-group") == ["training-no-process-group"]
    world = len(results)
    assert results[0]["no-process-group"]["titles"] == \
        [f"WORLD_SIZE is {world} but no process group is initialised"]


@pytest.mark.parametrize("name", ["distributed", "coqui"])
def test_missing_set_epoch_is_reported_at_the_second_epoch(results, name) -> None:
    for r in results.values():
        assert r[f"no-set-epoch-{name}"] == [[], ["training-set-epoch"], []]
        assert r[f"set-epoch-{name}"] == [[], [], []]
        assert r["no-set-epoch-sequential"] == [[], [], []]


def test_unwrapped_model_is_reported(results) -> None:
    assert _ids(results, "model-unwrapped") == ["training-model-unwrapped"]
    assert _ids(results, "model-unwrapped-differs") == \
        ["training-model-params", "training-model-unwrapped"]


def test_a_rank_that_cannot_inspect_reports_unknown(results) -> None:
    assert _ids(results, "model-broken") == ["training-unknown"]
    assert results[0]["model-broken"]["titles"] == \
        ["the model could not be inspected on 1 rank(s)"]


def test_strict_raises_with_the_findings(results) -> None:
    assert all(r["strict"] == [SHARDING] for r in results.values())


def test_single_process_is_silent(tmp_path) -> None:
    p = _run([str(HERE / "single.py")], None, tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    assert json.loads(p.stdout) == []
    assert not _guard_lines(p.stderr), p.stderr


def _gpus() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


@pytest.mark.skipif(_gpus() < 1, reason="device binding needs a GPU")
def test_two_ranks_on_one_gpu_are_reported(tmp_path) -> None:
    p = _run([str(HERE / "gpu_binding.py"), "share"], 2, tmp_path, gpu=True)
    assert p.returncode == 0, p.stderr[-3000:]
    got = json.loads(p.stdout.strip().splitlines()[-1])
    assert got["ids"] == ["training-device-binding"]
    assert got["titles"][0].startswith("ranks 0, 1 share cuda:0")


@pytest.mark.skipif(_gpus() < 2, reason="one GPU per rank needs two GPUs")
def test_ranks_bound_to_their_gpus_are_silent(tmp_path) -> None:
    p = _run([str(HERE / "gpu_binding.py"), "bound"], 2, tmp_path, gpu=True)
    assert p.returncode == 0, p.stderr[-3000:]
    assert json.loads(p.stdout.strip().splitlines()[-1])["ids"] == []


@pytest.fixture(scope="module")
def peers(tmp_path_factory) -> Dict[int, dict]:
    out = tmp_path_factory.mktemp("peers")
    p = _run([str(HERE / "peers.py"), str(out)], 2, out)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    got = {int(f.stem.split("-")[1]): json.loads(f.read_text()) for f in out.glob("rank-*")}
    assert sorted(got) == [0, 1]
    assert not (out / "pwned").exists()  # the pickle's __reduce__ never ran
    return got


@pytest.mark.parametrize("case", ["late", "dead"])
def test_a_late_or_dead_rank_is_a_note_after_the_deadline(peers, case) -> None:
    """Rank 1 calls check() only after rank 0 gave up (late), or exits before it (dead):
    rank 0 names it after its 2 s deadline, raises nothing even under strict=True."""
    got = peers[0][case]
    assert got["raised"] is None
    assert got["ids"] == ["training-unknown"]
    assert got["titles"] == ["rank 1 did not reach check() within 2 s"]
    assert got["seconds"] < 2 + 20  # the deadline, not the process group's 30 minutes


def test_the_late_rank_itself_goes_on(peers) -> None:
    assert peers[1]["late-itself"]["raised"] is None


HOSTILE = {
    "world-5": ("rank 1 sent facts that cannot be read", "'world': expected an object, got int"),
    "empty": ("rank 1 sent facts that cannot be read", "the value: no key 'world'"),
    "pickle": ("rank 1 sent facts that cannot be read", "not an envlock value (not zlib data"),
    "other-version": ("rank 1 runs another envlock version",
                      "speaks 'envlock.guard/1', not 'envlock.guard/2': another envlock "
                      "version (9.9;"),
    "nested": ("rank 1 sent facts that cannot be read", "JSON nested deeper than"),
    "not-utf8": ("rank 1 sent facts that cannot be read", "not UTF-8 text"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_value_is_a_note_for_its_rank(peers, case) -> None:
    title, detail = HOSTILE[case]
    got = peers[0][case]
    assert got["raised"] is None, got
    assert got["ids"] == ["training-unknown"] and got["titles"] == [title], got
    assert got["details"][0].startswith(detail), got


def _blocking_numpy(tmp_path: Path) -> str:
    """A directory whose ``numpy`` package fails to import, as when numpy is absent."""
    fake = tmp_path / "no-numpy" / "numpy"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'numpy'\", "
                                      "name='numpy')\n")
    return str(fake.parent)


def _has_numpy() -> bool:
    import importlib.util

    return importlib.util.find_spec("numpy") is not None


@pytest.mark.parametrize("numpy", ["without-numpy", "with-numpy"])
@pytest.mark.parametrize("mode", ["bug", "fixed"])
def test_coqui_job_with_and_without_numpy(tmp_path, numpy, mode) -> None:
    """The coqui-style job, stopped (bug) or silent (fixed), whether numpy is importable
    or not (neither torch nor envlock requires it; all_gather_object did)."""
    if numpy == "with-numpy" and not _has_numpy():
        pytest.skip("numpy is not installed here")
    env = _env()
    if numpy == "without-numpy":
        env["PYTHONPATH"] = _blocking_numpy(tmp_path) + os.pathsep + env["PYTHONPATH"]
    launch = [sys.executable, "-m", "torch.distributed.run", "--standalone",
              "--nproc-per-node", "2", "--monitor-interval", "0.1",
              str(HERE / "train_script.py"), mode, "--report-numpy"]
    p = subprocess.run(launch, cwd=str(tmp_path), env=env, capture_output=True, text=True,
                       timeout=300, check=False)
    assert f"numpy importable: {numpy == 'with-numpy'}" in p.stdout, p.stdout + p.stderr
    if mode == "bug":
        assert p.returncode != 0
        assert p.stderr.count("envlock training guard: 1 error, 0 warnings") == 1, p.stderr
        assert "DistributedSampler(ds)" in p.stderr and "TrainingGuardError" in p.stderr
        assert "trained" not in p.stdout
    else:
        assert p.returncode == 0, p.stderr[-3000:]
        assert p.stdout.count("trained") == 2
        assert not _guard_lines(p.stderr), p.stderr


def _nccl() -> bool:
    import torch.distributed as dist

    return _gpus() >= 1 and dist.is_available() and dist.is_nccl_available()


def _last_json(text: str) -> dict:
    return json.loads([x for x in text.splitlines() if x.startswith("{")][-1])


@pytest.mark.skipif(not _nccl(), reason="an NCCL process group needs a GPU and NCCL")
@pytest.mark.parametrize("mode, ids", [
    ("share", ["training-device-binding", "training-model-unwrapped"]),
    ("share-nosampler", ["training-data-sharding", "training-device-binding",
                         "training-model-unwrapped"]),
])
def test_on_nccl_the_guard_speaks_before_nccl_refuses_the_shared_gpu(
        tmp_path, mode: str, ids: List[str]) -> None:
    """Two ranks on cuda:0 with an NCCL process group: the guard's exchange goes through
    the c10d store, not a collective, so it reports the binding before the user's DDP
    line fails in NCCL ("Duplicate GPU detected"). Recorded on an H100 host:
    tests/data/device/h100-2026-11-27/guard-nccl-*.json."""
    p = _run([str(HERE / "nccl_guard.py"), mode], 2, tmp_path, gpu=True)
    assert p.returncode == 0, p.stderr[-3000:]
    got = _last_json(p.stdout)
    assert got["ids"] == ids and got["ddp"] == "DistBackendError", got
    assert "Duplicate GPU detected" in p.stdout + p.stderr


@pytest.mark.skipif(not _nccl(), reason="an NCCL process group needs a GPU and NCCL")
def test_on_nccl_a_bound_sharded_ddp_run_trains_with_a_silent_strict_guard(tmp_path) -> None:
    p = _run([str(HERE / "nccl_guard.py"), "bound"], min(_gpus(), 2), tmp_path, gpu=True)
    assert p.returncode == 0, p.stderr[-3000:]
    got = _last_json(p.stdout)
    assert got["ids"] == [] and got["trained"] is True, got

