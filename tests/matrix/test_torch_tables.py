"""The matrix's arch lists agree with torch's own tables (issue 34).

torch 2.13 ships, in ``torch/cuda/__init__.py``, ``PYTORCH_RELEASES_CODE_CC`` (the compute
capabilities each CUDA line's release builds are compiled for, per host arch) and
``DEVICE_REQUIREMENT`` (the device CCs the code of each compiled CC runs on). The test reads
them from the installed torch 2.13.0 (CPU) and cross-checks the matrix, both ways."""

from __future__ import annotations

from typing import Dict, Set

import pytest

from envlock.matrix import get_matrix

torch_cuda = pytest.importorskip("torch.cuda")

M = get_matrix()
_PLATFORM = {"x86_64": "linux_x86_64", "aarch64": "linux_aarch64"}


def _sm(arch: str) -> int:
    return int(arch.split("_", 1)[1].rstrip("af"))


def _table() -> Dict[str, Dict[str, Set[int]]]:
    import torch

    if not torch.__version__.startswith("2.13."):
        pytest.skip(f"the tables are read from torch 2.13 (installed: {torch.__version__})")
    return torch_cuda.PYTORCH_RELEASES_CODE_CC


def test_every_build_in_torchs_table_has_its_arch_list_in_the_matrix() -> None:
    table = _table()
    checked = 0
    for cuda, by_arch in table.items():
        for host, ccs in by_arch.items():
            plat = _PLATFORM[host]
            builds = [v for v in M.variants_for("2.13.0")
                      if v.cuda == cuda and v.platform == plat]
            assert builds, f"torch 2.13.0 has a CUDA {cuda} build for {host}; the matrix none"
            for v in builds:
                assert v.sass is not None, f"{v.tag} {plat}: torch says {sorted(ccs)}"
                assert {_sm(a) for a in v.sass} == ccs, (v.tag, plat, v.sass, sorted(ccs))
                checked += 1
    assert checked >= 8


def test_every_compiled_arch_of_the_matrix_is_one_torch_knows() -> None:
    """A matrix SASS entry torch's DEVICE_REQUIREMENT does not know would make torch itself
    warn 'compiled with an unknown compute capability' for builds of 2.13."""
    _table()
    known = set(torch_cuda.DEVICE_REQUIREMENT)
    for v in M.variants_for("2.13.0"):
        for a in v.sass or ():
            assert _sm(a) in known, (v.tag, v.platform, a)


def _compare(igpu_devices: bool) -> int:
    from envlock.kernels import runs_on

    compiled = {_sm(a) for v in M.variants for a in v.sass or ()}
    assert not compiled & IGPU  # no torch build in the matrix compiles for an iGPU
    checked = 0
    for g in M.gpus.values():
        major, minor = (int(x) for x in g.compute_capability.split("."))
        device = 10 * major + minor
        if (device in IGPU) != igpu_devices:
            continue
        for code in sorted(compiled & set(torch_cuda.DEVICE_REQUIREMENT)):
            ours = runs_on(f"sm_{code}", g.compute_capability)
            assert ours == (device in torch_cuda.DEVICE_REQUIREMENT[code]), (g.id, code)
            checked += 1
    return checked


#: integrated GPUs (Jetson): torch's table runs no discrete GPU's SASS on them
IGPU = {53, 62, 72, 87, 101}


def test_device_requirement_agrees_with_the_sass_rule() -> None:
    """torch's rule (code of a CC runs on device CCs of the same major with minor >= the
    code's) and envlock's, for every SASS arch some build in the matrix holds and every
    discrete GPU the matrix knows."""
    _table()
    assert _compare(igpu_devices=False) > 100


@pytest.mark.xfail(strict=True, reason="envlock.kernels.runs_on does not model torch's "
                   "iGPU exceptions: it lets sm_80 SASS run on Jetson Orin (8.7), torch's "
                   "DEVICE_REQUIREMENT does not (PyPI aarch64 wheels are SBSA builds, not "
                   "Jetson's, either way)")
def test_device_requirement_on_integrated_gpus() -> None:
    _table()
    _compare(igpu_devices=True)
