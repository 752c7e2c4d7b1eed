"""The guard's judgements on hand-made facts (no processes): the cases torchrun on CPU cannot
produce -- ranks sharing a GPU, a world size that disagrees with WORLD_SIZE, padding."""

from __future__ import annotations

import subprocess
import sys

import pytest

from envlock.training.draw import Draw
from envlock.training.sharding import judge_sharding
from envlock.training.world import judge_alone, judge_world


def _facts(**kw):
    f = {"host": "n1", "env_world": 2, "env_rank": 0, "local_rank": 0, "pg": True,
         "pg_world": 2, "pg_rank": 0, "backend": "nccl", "cuda": True, "gpus": 2, "device": 0}
    f.update(kw)
    return f


def test_two_ranks_on_one_gpu_is_an_error() -> None:
    found = judge_world([_facts(), _facts(local_rank=1, device=0)])
    assert [(f.id, f.severity, f.title) for f in found] == \
        [("training-device-binding", "error", "ranks 0, 1 share cuda:0 on n1")]
    assert "LOCAL_RANK" in found[0].fix[0]


def test_bound_ranks_and_other_hosts_are_silent() -> None:
    assert judge_world([_facts(), _facts(local_rank=1, device=1)]) == []
    assert judge_world([_facts(), _facts(host="n2")]) == []
    assert judge_world([_facts(cuda=False, device=None)] * 2) == []


def test_world_size_disagreeing_with_the_launcher() -> None:
    found = judge_world([_facts(env_world=4, cuda=False), _facts(env_world=4, cuda=False)])
    assert [f.title for f in found] == ["WORLD_SIZE is 4 but the process group has 2 ranks"]


def test_without_a_process_group() -> None:
    alone = _facts(pg=False, env_world=None, local_rank=None)
    assert [f.id for f in judge_alone(alone)] == ["training-one-gpu"]
    assert judge_alone(dict(alone, gpus=1)) == []
    assert judge_alone(dict(alone, cuda=False, gpus=0)) == []
    assert [f.id for f in judge_alone(dict(alone, env_world=3))] == \
        ["training-no-process-group"]


def test_padding_repeats_are_not_overlap() -> None:
    # DistributedSampler(10 samples, 4 ranks, shuffle=False) pads 2 repeats
    shards = [(0, 4, 8), (1, 5, 9), (2, 6, 0), (3, 7, 1)]
    draws = [Draw("indices", s, 3, 10) for s in shards]
    assert judge_sharding(draws) == []
    same = [Draw("indices", tuple(range(64)), 100, 100)] * 2
    assert [f.title for f in judge_sharding(same)] == \
        ["every rank sees the same samples (overlap 100%)"]


def test_half_overlap_names_the_ranks() -> None:
    draws = [Draw("indices", tuple(range(32)), 32, 1000),
             Draw("indices", tuple(range(32, 64)), 32, 1000),
             Draw("indices", tuple(range(32)), 32, 1000)]
    assert [f.title for f in judge_sharding(draws)] == \
        ["ranks 0, 2 see the same samples (overlap 67%)"]


def test_unknown_sampler_stays_unknown() -> None:
    draws = [Draw("unknown", reason="loader.batch_sampler yields NoneType values")] * 2
    found = judge_sharding(draws)
    assert [(f.id, f.severity) for f in found] == [("training-data-unknown", "info")]


def test_import_does_not_import_torch() -> None:
    code = "import sys, envlock.training as g; print('torch' in sys.modules, g.__all__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "False ['check', 'epoch', 'TrainingGuardError']"


@pytest.mark.torch
def test_drawing_leaves_random_state_alone() -> None:
    import random

    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader, RandomSampler

    from envlock.training.draw import draw

    g = torch.Generator().manual_seed(1)
    data = list(range(100))
    loader = DataLoader(data, batch_size=4,
                        sampler=RandomSampler(data, replacement=True, generator=g))
    before = (torch.get_rng_state(), g.get_state(), random.getstate())
    d = draw(loader)
    assert d.kind == "indices" and len(d.indices) == 100
    assert torch.equal(before[0], torch.get_rng_state())
    assert torch.equal(before[1], g.get_state())
    assert before[2] == random.getstate()


@pytest.mark.torch
def test_numpy_and_tensor_indices_are_drawn_and_other_values_are_unknown() -> None:
    torch = pytest.importorskip("torch")

    from envlock.training.draw import draw

    np = pytest.importorskip("numpy")
    assert draw(np.arange(5)).indices == (0, 1, 2, 3, 4)
    assert draw([torch.tensor([3, 4]), torch.tensor([5])]).indices == (3, 4, 5)
    assert draw([None, None]).kind == "unknown"
    assert draw([True, False]).kind == "unknown"
