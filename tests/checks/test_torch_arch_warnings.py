"""Each wording of torch's arch warning, alone in a log, ranks the arch advisory first
(issue 34: torch 2.13 rewrote the warning; 'no advisory explains the log' before)."""

from __future__ import annotations

from typing import List

import pytest

from envlock.checks.logs import triage_logs
from envlock.matrix import get_matrix

M = get_matrix()

OLD = ("UserWarning:\nNVIDIA GeForce GTX 1080 with CUDA capability sm_61 is not compatible "
       "with the current PyTorch installation.\nThe current PyTorch install supports CUDA "
       "capabilities sm_75 sm_80 sm_86 sm_90 sm_100 sm_120.\n")
NEW = ("UserWarning: Found GPU0 NVIDIA GeForce GTX 1080 which is of compute capability (CC) "
       "6.1.\nThe following list shows the CCs this version of PyTorch was built for and the "
       "hardware CCs it supports:\n- 7.5 which supports hardware CC >=7.5,<8.0\n"
       "Your installed torch==2.13.0+cu130 does not include kernels for this GPU. Reinstall "
       "the same version against a CUDA build that does, e.g.:\n")
NONE = ("UserWarning: No published PyTorch CUDA builds for release 2.13.0+cu130 support this "
        "GPU. Visit https://pytorch.org/get-started/locally/ to find a compatible release.\n")
BLACKWELL = ("UserWarning: Found GPU1 NVIDIA GeForce RTX 5090 which is of compute capability "
             "(CC) 12.0.\n")


def ids(text: str) -> List[str]:
    return [m.advisory for m in triage_logs([("log", text)], M, None).matches]


@pytest.mark.parametrize("text", [OLD, NEW, NONE], ids=["old", "torch-2.13", "no-build"])
def test_each_wording_alone_gives_the_arch_advisory_first(text: str) -> None:
    assert ids(text)[:1] == ["gpu-arch-dropped-from-torch-build"]


def test_the_new_wording_names_the_architecture() -> None:
    assert ids(BLACKWELL)[:1] == ["blackwell-torch-without-sm100-sm120"]


def test_the_driver_only_advisory_has_no_log_symptoms() -> None:
    """It never outranks the advisory that names the GPU in a log."""
    assert M.advisories["driver-only-backend-no-kernels"].symptoms == ()
    assert "driver-only-backend-no-kernels" not in ids(NEW)[:1]
