"""The symptom tables: generated from NVIDIA's headers and libraries, validated like every table."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from envlock.errors import MatrixError
from envlock.matrix import get_matrix
from envlock.matrix.anchors import anchors
from envlock.matrix.load import load_matrix
from support.edit import edit_once

M = get_matrix()


def test_every_code_table_is_complete_and_every_row_has_a_source_and_a_meaning() -> None:
    by_table: dict = {}
    for s in M.symptoms.values():
        by_table.setdefault(s.table, []).append(s)
        assert s.meaning and s.next and s.provenance.sources, s.id
        assert all(anchors(p) for p in s.patterns), s.id
        assert all(c in M.advisories for c in s.causes), s.id
    names = {s.name for s in M.symptoms.values()}
    # the public enums, read from the wheels' headers (spot checks across the range)
    for name in ("cudaErrorMemoryAllocation", "cudaErrorNoKernelImageForDevice",
                 "cudaErrorIllegalAddress", "cudaErrorSystemNotReady",
                 "CUDA_ERROR_OUT_OF_MEMORY", "CUDA_ERROR_NO_BINARY_FOR_GPU",
                 "ncclSystemError", "ncclRemoteError", "ncclInvalidUsage",
                 "CUBLAS_STATUS_EXECUTION_FAILED", "CUBLAS_STATUS_NOT_SUPPORTED",
                 "CUDNN_STATUS_BAD_PARAM", "CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED",
                 "CUDNN_STATUS_MAPPING_ERROR"):  # a cuDNN 8 name kept as an alias
        assert name in names, name
    assert len(by_table["cuda-runtime"]) > 100 and len(by_table["cuda-driver"]) > 80
    assert len(by_table["nccl"]) == 8 and len(by_table["cublas"]) >= 9
    assert {"xid", "host", "torch", "cudnn"} <= set(by_table)
    # the message texts are cudaGetErrorString's, not paraphrases
    oom = M.symptoms["cudart.cudaErrorMemoryAllocation"]
    assert oom.message == "out of memory" and oom.code == 2
    assert M.symptoms["cudart.cudaErrorNoKernelImageForDevice"].message == \
        "no kernel image is available for execution on the device"
    assert "NCCL_DEBUG=INFO" in M.symptoms["nccl.ncclSystemError"].next
    assert "nccl-unhandled-system-error" in M.symptoms["nccl.ncclSystemError"].causes


def test_a_symptom_pattern_without_an_indexable_word_or_with_an_unknown_cause_is_refused(
        copy: Path) -> None:
    edit_once(copy / "symptoms-host.toml", "patterns = ['\\bSIGSEGV\\b'",
              "patterns = ['\\d+'")
    edit_once(copy / "symptoms-host.toml", 'causes = ["dev-shm-too-small-container"]',
              'causes = ["no-such-advisory"]')
    with pytest.raises(MatrixError) as exc:
        load_matrix(copy)
    text = "\n".join(exc.value.problems)
    assert re.search(r"symptoms-host\.toml: symptom\[\d+\]\.patterns\[0\]: no literal word", text)
    assert "unknown advisory id 'no-such-advisory'" in text


def test_anchors_are_whole_words_or_prefixes() -> None:
    assert anchors(r"\bcudaErrorNoDevice\b") == (("cudaerrornodevice", False),)
    assert anchors(r"#\d+\s+(?:0x[0-9a-f]+ in )?nccl\w*") == (("nccl", True),)
    assert anchors(r"version `?'?GLIBCXX_[\d.]+'? not found")[0][0] in ("version", "found")
    assert anchors(r"\d+\s*") == ()
