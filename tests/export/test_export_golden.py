"""Golden outputs of every format for the fixture locks in ``tests/data/locks``.

The goldens change only on purpose: run ``ENVLOCK_UPDATE_GOLDEN=1 pytest tests/export``
and review the diff. The other tests in this directory run the outputs through real
tools; these catch every unintended change of wording, order or layout.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from conftest import CliResult

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "export"
UPDATE = os.environ.get("ENVLOCK_UPDATE_GOLDEN") == "1"

FULL = ("requirements", "constraints", "pylock", "uv", "conda", "dockerfile")
CASES = (
    [("cu121-h100-h20", "h20", fmt) for fmt in FULL]
    + [("cu121-h100-h20", "h100-sxm", fmt) for fmt in ("requirements", "uv")]
    + [("h100-pypi", "h100-sxm", fmt) for fmt in FULL]
    + [("gpu-core", "h100-sxm", fmt) for fmt in ("constraints", "conda", "uv")]
)


@pytest.mark.parametrize("lock,target,fmt", CASES)
def test_golden(run_export, locks_dir: Path, lock: str, target: str, fmt: str) -> None:
    if fmt == "dockerfile":  # the CLI writes a whole build context: golden the Dockerfile
        from envlock.distribution import wheel_name
        from envlock.export import export
        from envlock.lock.io import load_lock

        text = export(load_lock(f"{lock}.lock"), fmt, lock_path="envlock.lock", target=target,
                      options={"envlock_wheel": wheel_name("0.1.0")}).text
        result = CliResult(0, text, "")
    else:
        result = run_export("--format", fmt, "--lock", f"{lock}.lock", "--target", target)
    assert result.code == 0, result.stderr
    path = GOLDEN / f"{lock}.{target}.{fmt}"
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(result.stdout, encoding="utf-8")
    if not path.exists():
        pytest.fail(f"no golden file {path.name}; create it with ENVLOCK_UPDATE_GOLDEN=1")
    assert result.stdout == path.read_text(encoding="utf-8"), (
        f"{fmt} output for {lock}/{target} differs from {path.name}; if the change is "
        f"intended, regenerate with ENVLOCK_UPDATE_GOLDEN=1 and review the diff")


def test_no_stale_goldens() -> None:
    expected = {f"{lock}.{target}.{fmt}" for lock, target, fmt in CASES}
    assert {p.name for p in GOLDEN.iterdir()} == expected
