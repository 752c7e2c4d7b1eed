"""The log reader: normalisation, process deaths, hang evidence, facts from the log."""

from __future__ import annotations

from envlock.knowledge.facts import UNKNOWN, Facts
from envlock.checks.logread import MAX_LINE, LayeredFacts, find, log_facts_view, read_log
from envlock.matrix import get_matrix

M = get_matrix()


# -- normalisation ---------------------------------------------------------------------------

def test_prefixes_are_stripped_and_per_rank_repeats_fold() -> None:
    text = "\n".join(
        f"[rank{r}]:[E1123 00:52:57.664949121 ProcessGroupNCCL.cpp:607] [Rank {r}] Watchdog "
        f"caught collective operation timeout: WorkNCCL(SeqNum=15{r}) ran for 60001{r} "
        "milliseconds before timing out." for r in range(4))
    log = read_log(text)
    assert len(log.lines) == 1 and log.repeats == (4,)
    assert log.lines[0].startswith("[Rank 0] Watchdog caught")
    assert log.ranks == 4
    assert "timeout" in log.signals


def test_each_prefix_form() -> None:
    samples = {
        "[1,3]<stdout>:host:29881:30401 [0] NCCL INFO init.cc:903 -> 5":
            "NCCL INFO init.cc:903 -> 5",
        "E1123 12:00:01.123456 3021 hl_cuda_device.cc:565] Check failed": "Check failed",
        "[E ProcessGroupNCCL.cpp:475] [Rank 2] Watchdog": "[Rank 2] Watchdog",
        "2024-08-23T22:22:51.871Z | Exception raised from checkTimeout":
            "Exception raised from checkTimeout",
        "[ 1843.308145] NVRM: GPU at 0000:01:00.0 has fallen off the bus.":
            "NVRM: GPU at 0000:01:00.0 has fallen off the bus.",
        "Feb 14 05:03:41 gpu-1 kernel: NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus":
            "NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus",
        "ERROR 01-11 13:09:40 engine.py:366] RuntimeError: boom": "RuntimeError: boom",
        "(VllmWorkerProcess pid=675597) ERROR 09-25 06:40:46 multiproc_worker_utils.py:226] x": "x",
        "> ip-172-31-1-93:45294:45294 [0] NCCL INFO NET/IB : No device found.":
            "NCCL INFO NET/IB : No device found.",
    }
    for raw, want in samples.items():
        assert read_log(raw).lines == (want,), raw


def test_hard_wrapped_messages_still_match() -> None:
    log = read_log("RuntimeError: DataLoader worker (pid 47) is killed by signal: Bus\n"
                   "error. It is possible that dataloader's workers are out of shared\n"
                   "memory. Please try to raise your shared memory limit.")
    assert find(log, r"killed by signal: Bus error") is not None
    assert find(log, r"out of shared memory") is not None
    assert "SIGBUS" in log.signals
    # a word cut in two by the wrap
    log = read_log("(prepare_for_backward at /opt/conda/cond\na-bld/pytorch/work/reducer.cpp:408)")
    assert find(log, r"conda-bld/pytorch") is not None
    # kernel continuation lines of one NVRM message
    log = read_log("[ 1843.3] NVRM: The NVIDIA GPU 0000:b3:00.0\n"
                   "               NVRM: (PCI ID: 10de:26b5) installed in this system has\n"
                   "               NVRM: fallen off the bus and is not responding to commands.")
    assert find(log, r"has fallen off the bus") is not None


def test_long_lines_are_capped() -> None:
    log = read_log("x" * (MAX_LINE * 3))
    assert len(log.lines[0]) == MAX_LINE


# -- deaths and hangs ------------------------------------------------------------------------

def test_backtraces_stuck_in_cuda_or_nccl_are_hang_evidence() -> None:
    gdb = ("#6  0x00007f071ffb06c0 in ?? () from /usr/local/cuda/lib64/libcudart.so.11.0\n"
           "#7  0x00007f07200082c8 in cudaStreamQuery () from /usr/local/cuda/lib64/libcudart.so\n")
    spy = ("Thread 4079 (active)\n"
           "    all_gather_into_tensor (torch/distributed/distributed_c10d.py:2709)\n"
           "    wrapper (torch/distributed/c10d_logger.py:72)\n")
    for text in (gdb, spy):
        log = read_log(text)
        assert log.hang and "timeout" in log.signals, text


def test_a_warning_about_a_possible_hang_is_not_a_hang() -> None:
    log = read_log("[W ProcessGroupNCCL.cpp:4115] using GPU 0 to perform barrier as devices used "
                   "by this process are currently unknown. This can potentially cause a hang if "
                   "this rank to GPU mapping is incorrect.")
    assert not log.hang and "timeout" not in log.signals
    # the same words stated as a fact are
    assert read_log("all_reduce_perf works with one GPU; with two it hangs.").hang


def test_a_mention_of_cudaStreamQuery_outside_a_backtrace_is_not_a_hang() -> None:
    assert not read_log("we call cudaStreamQuery to poll the stream").hang


# -- facts -----------------------------------------------------------------------------------

NCCL = """\
node1:4766:4766 [0] NCCL INFO cudaDriverVersion 12080
node1:4766:4766 [0] NCCL INFO NCCL version 2.25.1+cuda12.8
node1:4766:4780 [0] NCCL INFO ncclCommInitRank comm 0x1 rank 0 nranks 2 busId 21000 - Init START
node1:4766:4781 [1] NCCL INFO ncclCommInitRank comm 0x2 rank 1 nranks 2 busId 61000 - Init START
node1:4766:4781 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] via P2P/CUMEM/read
#  Rank  0 Group  0 Pid   4766 on   node1 device  0 [0x21] NVIDIA GeForce RTX 5090
"""


def test_nccl_info_lines_give_version_driver_api_transports_and_gpus() -> None:
    log = read_log(NCCL)
    f = log.facts
    assert f["library.nccl.version"] == "2.25.1"
    assert f["driver.cuda"] == "12.8"
    assert f["nccl.transports"] == ["P2P"]
    assert f["gpu.count"] == 2
    view = log_facts_view([log], M)
    assert view.get("gpu.model") == ["rtx-5090"]
    assert view.get("gpu.segment") == ["consumer"]
    assert view.get("host.container") is UNKNOWN


def test_nvidia_smi_and_torch_warning_pastes() -> None:
    smi = ("| NVIDIA-SMI 535.104.05   Driver Version: 535.104.05   CUDA Version: 12.2     |\n"
           "|   0  NVIDIA H100 80GB HBM3          On  | 00000000:18:00.0 Off |          0 |\n")
    view = log_facts_view([read_log(smi)], M)
    assert view.get("driver.version") == "535.104.05"
    assert view.get("driver.cuda") == "12.2"
    assert view.get("gpu.model") == ["h100-sxm"]
    warn = ("NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible with the "
            "current PyTorch installation.\nThe current PyTorch install supports CUDA "
            "capabilities sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90.")
    view = log_facts_view([read_log(warn)], M)
    assert view.get("gpu.cc") == ["12.0"]
    assert view.get("torch.arch_list")[-1] == "sm_90"
    assert view.get("gpu.uncovered") == ["NVIDIA GeForce RTX 5090"]


def test_topo_matrix_gives_links() -> None:
    topo = ("\tGPU0\tGPU1\tGPU2\tCPU Affinity\n"
            "GPU0\t X \tNV12\tPXB\t0-27\n"
            "GPU1\tNV12\t X \tSYS\t0-27\n"
            "GPU2\tPXB\tSYS\t X \t28-55\n")
    view = log_facts_view([read_log(topo)], M)
    assert view.get("gpu.count") == 3
    assert sorted(e["kind"] for e in view.elements("link")) == ["NVLINK", "PXB", "SYS"]


def test_the_machine_wins_over_the_log() -> None:
    machine = Facts({"driver.version": "570.133.20", "gpu.model": ["h100-sxm"]}, {}, None,
                    None, None)
    log = read_log("| NVIDIA-SMI 470.86   Driver Version: 470.86   CUDA Version: 11.4 |\n"
                   "GPU 0: Tesla T4 (UUID: GPU-1)")
    view = log_facts_view([log], M, top=machine)
    assert isinstance(view, LayeredFacts)
    assert view.get("driver.version") == "570.133.20"  # the snapshot, not the paste
    assert view.get("gpu.model") == ["h100-sxm"]
    assert view.get("driver.cuda") == "11.4"  # only the log knows it
