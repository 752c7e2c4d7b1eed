"""The Dockerfile keeps NVIDIA_REQUIRE_CUDA for runtimes that evaluate it and gates the start
with ``envlock verify --stage runtime``, which CDI mode leaves as the only check (issue 34;
NVIDIA/nvidia-container-toolkit#1470)."""

from __future__ import annotations

import json
from pathlib import Path

from envlock.lock.io import load_lock
from envlock.matrix import get_matrix
from exportkit import export_text

LOCKS = Path(__file__).resolve().parents[1] / "data" / "locks"


def test_dockerfile_keeps_the_legacy_gate_and_verifies_at_start() -> None:
    lock = LOCKS / "h100-pypi.lock"
    t = load_lock(lock).targets[0]
    text = export_text(lock, "dockerfile", t.name)
    want = get_matrix().driver_full_cuda(t.driver_min)
    assert f'ENV NVIDIA_REQUIRE_CUDA="cuda>={want}"' in text
    entry = next(line for line in text.splitlines() if line.startswith("ENTRYPOINT "))
    argv = json.loads(entry[len("ENTRYPOINT "):])
    assert "envlock verify" in argv[2] and "--stage runtime" in argv[2]
    assert argv[2].index("--stage runtime") < argv[2].index('exec "$@"')
