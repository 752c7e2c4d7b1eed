"""Fleet building blocks: launcher variables, Slurm host lists, placeholders, the
fingerprint and its message size."""

from __future__ import annotations


import pytest
from fleetkit import snapshot

from envlock.errors import UsageError
from envlock.fleet.fingerprint import MESSAGE_LIMIT, NodeMessage, digest, fleet_facts
from envlock.fleet.launch import (
    expand_hostlist,
    expand_placeholders,
    expand_tasks_per_node,
    launch_from_env,
    placeholder_values,
)
from envlock.snapshot import Snapshot


@pytest.mark.parametrize("text,hosts", [
    ("node01", ["node01"]),
    ("gpu[01-03,07]", ["gpu01", "gpu02", "gpu03", "gpu07"]),
    ("a[8-10],b", ["a8", "a9", "a10", "b"]),
    ("rack[1-2]-n[1-2]", ["rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"]),
    ("localhost,127.0.0.[1-2]", ["localhost", "127.0.0.1", "127.0.0.2"]),
])
def test_hostlist(text: str, hosts: list) -> None:
    assert expand_hostlist(text) == hosts


def test_tasks_per_node() -> None:
    assert expand_tasks_per_node("2(x3),1") == [2, 2, 2, 1]
    assert expand_tasks_per_node("garbage") == []


def test_torchrun_environment() -> None:
    env = {"RANK": "11", "WORLD_SIZE": "16", "LOCAL_RANK": "3", "LOCAL_WORLD_SIZE": "8",
           "GROUP_RANK": "1", "GROUP_WORLD_SIZE": "2", "MASTER_ADDR": "head",
           "MASTER_PORT": "29500", "TORCHELASTIC_RUN_ID": "x",
           "TORCHELASTIC_USE_AGENT_STORE": "True", "TORCHELASTIC_RESTART_COUNT": "2"}
    L = launch_from_env(env, hostname="gpu7")
    assert (L.launcher, L.rank, L.world_size, L.local_rank, L.node, L.nodes) == \
        ("torchrun", 11, 16, 3, 1, 2)
    assert (L.master_addr, L.master_port, L.agent_store, L.attempt) == ("head", 29500, True, "2")
    assert L.node_of_rank(15) == 1 and L.host == "gpu7"
    L = launch_from_env(env, endpoint="10.0.0.1:4000", hostname="gpu7")
    assert (L.master_addr, L.master_port, L.agent_store) == ("10.0.0.1", 4000, False)


def test_slurm_environment() -> None:
    env = {"SLURM_PROCID": "5", "SLURM_NTASKS": "6", "SLURM_LOCALID": "1",
           "SLURM_JOB_NODELIST": "gpu[01-03]", "SLURMD_NODENAME": "gpu03",
           "SLURM_TASKS_PER_NODE": "2(x3)", "SLURM_JOB_ID": "123456", "SLURM_NODEID": "2"}
    L = launch_from_env(env, hostname="gpu03.cluster")
    assert (L.launcher, L.rank, L.world_size, L.node, L.nodes, L.host) == \
        ("slurm", 5, 6, 2, 3, "gpu03")
    assert (L.master_addr, L.master_port) == ("gpu01", 20000 + 123456 % 10000)
    assert [L.node_of_rank(r) for r in range(6)] == [0, 0, 1, 1, 2, 2]
    assert L.host_of_node(1) == "gpu02"
    # torchrun inside an allocation: torchrun's variables win
    L = launch_from_env({**env, "RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "h",
                         "MASTER_PORT": "1"}, hostname="x")
    assert L.launcher == "env" and L.world_size == 2


def test_no_launcher_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="found no launcher"):
        launch_from_env({}, hostname="x")
    with pytest.raises(UsageError, match="not HOST:PORT"):
        launch_from_env({"RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "h",
                         "MASTER_PORT": "1"}, endpoint="nope")


def test_placeholders() -> None:
    L = launch_from_env({"SLURM_PROCID": "1", "SLURM_NTASKS": "2",
                         "SLURM_JOB_NODELIST": "n[1-2]", "SLURMD_NODENAME": "n2",
                         "SLURM_JOB_ID": "7"}, hostname="n2.example.org")
    values = placeholder_values(L, {"SLURM_PROCID": "1"})
    assert expand_placeholders("s/{HOSTNAME}-{RANK}-{NODE}-{SLURM_PROCID}.json", values) == \
        "s/n2-1-1-1.json"
    assert expand_placeholders("keep {these braces}", values) == "keep {these braces}"
    with pytest.raises(UsageError, match=r"\{GROUP_RANK\} is not set"):
        expand_placeholders("{GROUP_RANK}.json", values)


def test_fingerprint_is_stable_and_sensitive() -> None:
    a = Snapshot.from_dict(snapshot("match", "a"))
    b = Snapshot.from_dict(snapshot("match", "b"))  # another host name: same facts
    c = Snapshot.from_dict(snapshot("nccl", "a"))
    assert digest(fleet_facts(a)) == digest(fleet_facts(b)) != digest(fleet_facts(c))
    assert len(digest(fleet_facts(a))) == 16
    facts = fleet_facts(a.with_env(CUDA_VISIBLE_DEVICES="3", NCCL_ALGO="Ring"))
    assert "env.CUDA_VISIBLE_DEVICES" not in facts and facts["env.NCCL_ALGO"] == "Ring"
    # with a lock only locked packages (plus torch-family and CUDA wheels) must agree
    scoped = fleet_facts(a, scope=frozenset({"filelock"}))
    assert "pkg.filelock" in scoped and "pkg.nvidia-nccl-cu12" in scoped
    assert "pkg.sympy" not in scoped


@pytest.mark.parametrize("launcher", [
    {"RANK": "{i}", "LOCAL_RANK": "{i}", "WORLD_SIZE": "2", "TORCHELASTIC_RUN_ID": "r{i}"},
    {"SLURM_PROCID": "{i}", "SLURM_JOB_ID": "42{i}"},
    {"OMPI_COMM_WORLD_RANK": "{i}", "PMI_RANK": "{i}", "PMIX_RANK": "{i}"},
])
def test_the_launchers_per_rank_variables_are_not_a_drift(launcher: dict) -> None:
    """Each rank's snapshot records its launcher's variables (they tell a job's snapshot
    from a shell's): two ranks of one machine differ on them by design and must share a
    fingerprint. On a real H100 under torchrun, RANK and LOCAL_RANK were reported as
    drift and failed every rank."""
    base = Snapshot.from_dict(snapshot("match", "a"))
    ranks = [base.with_env(**{k: v.format(i=i) for k, v in launcher.items()})
             for i in range(2)]
    assert all(r.taken_in_a_job for r in ranks)
    facts = [fleet_facts(r) for r in ranks]
    assert not {f"env.{name}" for name in launcher} & set(facts[0]), facts[0]
    assert digest(facts[0]) == digest(facts[1]) == digest(fleet_facts(base))


def test_message_stays_under_1kb_whatever_it_carries() -> None:
    m = NodeMessage(node=1023, rank=8184, host="h" * 500, digest="0" * 16,
                    summary={"driver": "5" * 300, "gpus": "G" * 300, "torch": "t" * 300,
                             "nccl": "\u00e9" * 300}, lock_errors=12, error="x" * 5000)
    raw = m.encode()
    assert len(raw) < MESSAGE_LIMIT
    back = NodeMessage.decode(raw)
    assert back.node == 1023 and back.rank == 8184 and back.digest == "0" * 16
    typical = NodeMessage(node=3, rank=24, host="gpu-node-0003.cluster.example.org",
                          digest="0123456789abcdef",
                          summary={"driver": "550.54.15", "gpus": "8x H100 80GB HBM3 (9.0)",
                                   "torch": "2.5.1+cu124", "nccl": "2.21.5"}, lock_errors=0)
    assert len(typical.encode()) < 256
    assert NodeMessage.decode(typical.encode()).summary["nccl"] == "2.21.5"
