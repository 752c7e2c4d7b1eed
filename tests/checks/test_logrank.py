"""Log triage on read logs: a matched pattern beats a corroborated signal; negatives,
routine lines, bare signals and known-false conditions keep advisories out."""

from __future__ import annotations

from typing import List, Optional

from envlock.knowledge.facts import Facts
from envlock.checks.logs import triage_logs
from envlock.matrix import get_matrix

M = get_matrix()


def ids(text: str, top: Optional[Facts] = None) -> List[str]:
    return [m.advisory for m in triage_logs([("log", text)], M, top).matches]


def test_a_bare_floating_point_exception_names_nothing() -> None:
    assert ids("Floating point exception (core dumped)") == []


def test_a_gpu_the_log_names_corroborates_a_signal_or_rules_it_out() -> None:
    assert ids("Floating point exception (core dumped)\nHardware is NVidia H20.")[0] \
        == "h20-cublas121-sigfpe"
    a100 = ids("Floating point exception (core dumped)\n"
               "|   0  NVIDIA A100-SXM4-80GB          On  | 00000000:18:00.0 Off |    0 |")
    assert "h20-cublas121-sigfpe" not in a100


def test_routine_lines_count_only_next_to_a_failure() -> None:
    info = ("host:1:1 [0] NCCL INFO NET/IB : No device found.\n"
            "host:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read\n")
    assert ids(info) == []
    hung = info + ("#7  0x00007f07200082c8 in cudaStreamQuery () from libcudart.so.12\n"
                   "|   0  NVIDIA GeForce RTX 4090        Off | 00000000:01:00.0 Off |  N/A |\n")
    assert ids(hung)[0] == "geforce-multi-gpu-p2p-hang-corruption"


def test_a_negative_pattern_rules_an_advisory_out() -> None:
    text = ("NCCL WARN Call to shm_open failed : Permission denied\n"
            "NCCL WARN Error while creating shared memory segment nccl-shm-recv-0 (size 4460544)\n"
            "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:290, unhandled system error\n")
    got = ids(text)
    assert "dev-shm-too-small-container" not in got
    assert got[0] == "nccl-unhandled-system-error"


def test_a_pattern_outranks_a_signal() -> None:
    text = ("RuntimeError: Expected to have finished reduction in the prior iteration before "
            "starting a new one.\n[Rank 1] Watchdog caught collective operation timeout: "
            "WorkNCCL(SeqNum=9) ran for 1800012 milliseconds before timing out.\n"
            "Evaluating the results...\n")
    got = ids(text)
    assert got[:2] == ["ddp-unused-parameters", "collective-timeout-uneven-work"]


def test_a_timeout_needs_corroboration() -> None:
    bare = ("[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, "
            "OpType=ALLREDUCE) ran for 1800012 milliseconds before timing out.")
    assert ids(bare) == []
    assert ids("Running tokenizer on dataset:  9%|#  | 280000/2969526\n" + bare)[0] \
        == "collective-timeout-uneven-work"


def test_a_condition_the_machine_makes_false_is_never_reported() -> None:
    machine = Facts({"gpu.model": ["h100-sxm"], "gpu.count": 1}, {}, None, None, None)
    text = "  4 0x00000000007aa087 cublasLtMatmulAlgoCheck()  ???:0\nSignal 8 (SIGFPE)"
    assert ids(text)[0] == "h20-cublas121-sigfpe"
    assert "h20-cublas121-sigfpe" not in ids(text, machine)
    ruled = triage_logs([("log", text)], M, machine).ruled_out
    assert "h20-cublas121-sigfpe" in [r.advisory for r in ruled]


def test_the_machine_wins_over_the_log_on_a_known_fact() -> None:
    # the log pastes an H20, the snapshot says H100: the snapshot decides
    machine = Facts({"gpu.model": ["h100-sxm"], "gpu.count": 1}, {}, None, None, None)
    text = "Floating point exception (core dumped)\nHardware is NVidia H20."
    assert "h20-cublas121-sigfpe" not in ids(text, machine)
    assert ids(text)[0] == "h20-cublas121-sigfpe"


def test_a_bare_signal_goes_to_uncorroborated() -> None:
    t = triage_logs([("log", "Floating point exception (core dumped)")], M, None)
    assert not t.matches and "h20-cublas121-sigfpe" in [m.advisory for m in t.uncorroborated]
