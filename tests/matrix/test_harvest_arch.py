"""The harvester finds the arch string in libtorch_python.so even when the linker packs it
right after another string with no NUL in between (torch 2.8.0 to 2.9.1)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _harvest():
    spec = importlib.util.spec_from_file_location("harvest_pypi",
                                                  ROOT / "scripts" / "harvest_pypi.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["harvest_pypi"] = mod
    spec.loader.exec_module(mod)
    return mod


def _longest(data: bytes) -> list:
    found = [m.group(1).decode() for m in _harvest()._ARCH_RE.finditer(data)]
    return max(found, key=len).split() if found else []


def test_arch_string_glued_to_a_previous_string() -> None:
    # bytes as they sit in the 2.8.0 wheel: "...ipc_h" + arch string + NULs
    data = (b"e, std::string ipc_hsm_70 sm_75 sm_80 sm_86 sm_90 sm_100 sm_120"
            b"\x00\x00\x00/pytorch/tor")
    assert _longest(data) == ["sm_70", "sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"]


def test_arch_string_with_ptx_between_nuls() -> None:
    data = b"\x00foo\x00sm_75 sm_80 sm_90 sm_100 sm_120 compute_120\x00"
    assert _longest(data)[-1] == "compute_120"


def test_a_single_target_is_not_an_arch_list() -> None:
    assert _longest(b"\x00sm_90\x00") == []
