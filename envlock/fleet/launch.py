"""Where this process sits in a distributed job: rank, world size, node, rendezvous point.

``envlock fleet`` runs once per rank under ``torchrun`` (or any launcher that sets the
``env://`` variables) or under Slurm's ``srun``. This module reads the launcher's
environment into a :class:`Launch` value; nothing here talks to the network.

Precedence: ``RANK``/``WORLD_SIZE``/``MASTER_ADDR``/``MASTER_PORT`` (torchrun, or a
hand-written ``env://`` setup) win over Slurm's variables, because ``torchrun`` inside an
``sbatch`` script sees both and its own are the ones that describe the workers.

Nodes: under torchrun a node is a ``GROUP_RANK`` (one agent, ``LOCAL_WORLD_SIZE``
workers). Under Slurm it is a host of the step's node list, found by ``SLURMD_NODENAME``
(else ``SLURM_NODEID``); ranks are assumed to be laid out in blocks (Slurm's default
distribution), which is only used to name the host of a rank that never arrived.

The rendezvous point under Slurm is ``MASTER_ADDR``/``MASTER_PORT`` when set, else the
first host of the node list and port ``20000 + SLURM_JOB_ID % 10000`` (every task derives
the same port without talking; the range stays below Linux's ephemeral ports).
``--endpoint HOST:PORT`` overrides both launchers.
"""

from __future__ import annotations

import re
import socket
from dataclasses import dataclass, replace
from typing import Dict, List, Mapping, Optional, Tuple

from envlock.errors import UsageError

__all__ = ["Launch", "launch_from_env", "expand_hostlist", "expand_tasks_per_node",
           "expand_placeholders", "placeholder_values"]


@dataclass(frozen=True)
class Launch:
    """One rank's view of the job. ``node`` is 0-based; ``nodes`` counts them."""

    launcher: str  # torchrun | env | slurm
    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    node: int
    nodes: int
    host: str
    master_addr: str
    master_port: int
    #: torchrun's agent already hosts a c10d store at MASTER_ADDR:MASTER_PORT (every
    #: rank is a client); otherwise rank 0 hosts it
    agent_store: bool = False
    #: torchrun's restart count: keys of an earlier attempt are never read
    attempt: str = "0"
    #: Slurm's node list in order (empty when unknown)
    hostlist: Tuple[str, ...] = ()
    #: Slurm's tasks on each node of ``hostlist`` (empty when unknown)
    tasks_per_node: Tuple[int, ...] = ()

    def node_of_rank(self, rank: int) -> Optional[int]:
        """The node a rank runs on, for naming ranks that never arrived (None: unknown)."""
        if self.tasks_per_node:
            start = 0
            for node, count in enumerate(self.tasks_per_node):
                if start <= rank < start + count:
                    return node
                start += count
            return None
        if self.local_world_size > 0:
            return rank // self.local_world_size
        return None

    def host_of_node(self, node: Optional[int]) -> Optional[str]:
        if node is not None and 0 <= node < len(self.hostlist):
            return self.hostlist[node]
        return None


#: more hosts than any Slurm job has; a longer list is refused before it is expanded
MAX_HOSTS = 100_000


def _int(env: Mapping[str, str], *names: str, default: Optional[int] = None,
         least: Optional[int] = None) -> Optional[int]:
    """The first of ``names`` that is set, as a number (``least``: its smallest value).

    Only ASCII digits count (``int()`` would take Arabic-Indic digits and ``1_0``)."""
    for name in names:
        value = env.get(name)
        if value is None or value == "":
            continue
        if not re.fullmatch(r"-?[0-9]{1,18}", value.strip()):
            raise UsageError(f"${name} is {value[:40]!r}, not a number")
        number = int(value)
        if least is not None and number < least:
            raise UsageError(f"${name} is {number}; it must be at least {least}")
        return number
    return default


def _port(env: Mapping[str, str], *names: str) -> Optional[int]:
    port = _int(env, *names)
    if port is not None and not 0 < port < 65536:
        raise UsageError(f"${names[0]} is {port}, not a TCP port (1-65535)")
    return port


def _check_host(host: str, what: str) -> str:
    """A host name or address the store can be reached at: no blanks, brackets of a host
    list or control characters (those would only fail later, after a DNS wait)."""
    if not host or len(host) > 253 or not re.fullmatch(r"[A-Za-z0-9_.:%-]+", host):
        raise UsageError(f"{what} {host[:60]!r} is not a host name or address")
    return host


def _split_endpoint(text: str) -> Tuple[str, int]:
    host, sep, port = text.strip().rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(f"--endpoint {text[:60]!r} is not HOST:PORT")
    return _check_host(host.strip("[]"), "--endpoint host"), int(port)


def launch_from_env(env: Mapping[str, str], *, endpoint: Optional[str] = None,
                    hostname: Optional[str] = None) -> Launch:
    """Read the launcher's variables; a :class:`UsageError` when there is no launcher."""
    host = hostname or socket.gethostname()
    if env.get("RANK") is not None and env.get("WORLD_SIZE") is not None:
        launch = _from_torchrun(env, host)
    elif env.get("SLURM_PROCID") is not None and (env.get("SLURM_STEP_NUM_TASKS")
                                                  or env.get("SLURM_NTASKS")):
        launch = _from_slurm(env, host)
    else:
        raise UsageError("envlock fleet runs once per rank of a distributed job and found no "
                         "launcher ($RANK/$WORLD_SIZE from torchrun, $SLURM_PROCID from srun)",
                         hint="run it under torchrun or srun, or compare snapshot files "
                              "offline: envlock fleet --snapshots 'collected/*.json'")
    if endpoint is not None:
        addr, port = _split_endpoint(endpoint)
        launch = replace(launch, master_addr=addr, master_port=port, agent_store=False)
    if not 0 <= launch.rank < launch.world_size:
        raise UsageError(f"rank {launch.rank} is outside a world of {launch.world_size}")
    return launch


def _from_torchrun(env: Mapping[str, str], host: str) -> Launch:
    rank = _int(env, "RANK", least=0) or 0
    world = _int(env, "WORLD_SIZE", least=1) or 1
    local_world = _int(env, "LOCAL_WORLD_SIZE", default=1, least=1) or 1
    addr = env.get("MASTER_ADDR")
    port = _port(env, "MASTER_PORT")
    if not addr or port is None:
        raise UsageError("$RANK and $WORLD_SIZE are set but $MASTER_ADDR/$MASTER_PORT are not",
                         hint="run under torchrun, export them, or pass --endpoint HOST:PORT")
    _check_host(addr, "$MASTER_ADDR")
    node = _int(env, "GROUP_RANK", default=rank // local_world, least=0)
    nodes = _int(env, "GROUP_WORLD_SIZE", default=max(1, world // local_world), least=1)
    return Launch(launcher="torchrun" if env.get("TORCHELASTIC_RUN_ID") else "env",
                  rank=rank, world_size=world,
                  local_rank=_int(env, "LOCAL_RANK", default=0, least=0) or 0,
                  local_world_size=local_world, node=node or 0, nodes=nodes or 1, host=host,
                  master_addr=addr, master_port=port,
                  agent_store=env.get("TORCHELASTIC_USE_AGENT_STORE") == "True",
                  attempt=env.get("TORCHELASTIC_RESTART_COUNT", "0"))


def _from_slurm(env: Mapping[str, str], host: str) -> Launch:
    rank = _int(env, "SLURM_PROCID", least=0) or 0
    world = _int(env, "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", least=1) or 1
    hostlist = tuple(expand_hostlist(env.get("SLURM_STEP_NODELIST")
                                     or env.get("SLURM_JOB_NODELIST")
                                     or env.get("SLURM_NODELIST") or ""))
    name = env.get("SLURMD_NODENAME") or host
    if name in hostlist:
        node = hostlist.index(name)
    else:
        node = _int(env, "SLURM_NODEID", default=0, least=0) or 0
    nodes = len(hostlist) or _int(env, "SLURM_STEP_NUM_NODES", "SLURM_NNODES", default=1,
                                  least=1) or 1
    tasks = tuple(expand_tasks_per_node(env.get("SLURM_STEP_TASKS_PER_NODE")
                                        or env.get("SLURM_TASKS_PER_NODE") or ""))
    if len(tasks) != nodes or sum(tasks) != world:
        tasks = ()
    local_world = tasks[node] if tasks and node < len(tasks) else 0
    addr = env.get("MASTER_ADDR") or (hostlist[0] if hostlist else "")
    port = _port(env, "MASTER_PORT")
    if port is None:
        job = _int(env, "SLURM_JOB_ID", "SLURM_JOBID", least=0)
        port = 20000 + job % 10000 if job is not None else None
    if not addr or port is None:
        raise UsageError("under srun, cannot tell where rank 0 is: no $SLURM_JOB_NODELIST "
                         "or $SLURM_JOB_ID", hint="export MASTER_ADDR and MASTER_PORT, or pass "
                                                  "--endpoint HOST:PORT")
    _check_host(addr, "$MASTER_ADDR" if env.get("MASTER_ADDR") else "the first Slurm host")
    return Launch(launcher="slurm", rank=rank, world_size=world,
                  local_rank=_int(env, "SLURM_LOCALID", default=0, least=0) or 0,
                  local_world_size=local_world, node=node, nodes=nodes, host=name,
                  master_addr=addr, master_port=port, hostlist=hostlist, tasks_per_node=tasks)


# -- Slurm's compressed lists ------------------------------------------------------------

def _top_level_split(text: str) -> List[str]:
    """Split at commas outside brackets; unbalanced or nested brackets are an error."""
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if depth not in (0, 1):
            raise UsageError(f"cannot read the Slurm host list {text[:80]!r}: unbalanced brackets")
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    if depth:
        raise UsageError(f"cannot read the Slurm host list {text[:80]!r}: unbalanced brackets")
    parts.append(cur)
    return [p.strip() for p in parts if p.strip()]


def _range_items(body: str, where: str, room: int) -> List[str]:
    """The numbers of one ``[...]``; more than ``room`` of them is an error (before any
    is made: ``gpu[1-99999999]`` must not take minutes and gigabytes)."""
    out: List[str] = []
    count = 0
    for item in body.split(","):
        lo, sep, hi = item.strip().partition("-")
        if not re.fullmatch(r"[0-9]{1,18}", lo) or (sep and not re.fullmatch(r"[0-9]{1,18}", hi)):
            raise UsageError(f"cannot read the Slurm host list {where[:80]!r}")
        count += int(hi) - int(lo) + 1 if sep else 1
        if count > room:
            raise UsageError(f"the Slurm host list {where[:80]!r} names more than "
                             f"{MAX_HOSTS:,} hosts")
    for item in body.split(","):
        lo, sep, hi = item.strip().partition("-")
        if not sep:
            out.append(lo)
            continue
        width = len(lo) if lo.startswith("0") or len(lo) == len(hi) else 0
        a, b = int(lo), int(hi)
        if b < a:
            raise UsageError(f"cannot read the Slurm host list {where!r}")
        out.extend(str(i).zfill(width) for i in range(a, b + 1))
    return out


def expand_hostlist(text: str) -> List[str]:
    """Slurm's compressed host list, in order.

    >>> expand_hostlist("gpu[01-03,07],head,rack[1-2]-n[1-2]")
    ['gpu01', 'gpu02', 'gpu03', 'gpu07', 'head', 'rack1-n1', 'rack1-n2', 'rack2-n1', 'rack2-n2']
    """
    hosts: List[str] = []
    for part in _top_level_split(text):
        names = [""]
        rest = part
        while rest:
            m = re.match(r"([^\[]*)\[([^\]]*)\](.*)$", rest)
            if m is None:
                names = [n + rest for n in names]
                break
            prefix, body, rest = m.groups()
            room = (MAX_HOSTS - len(hosts)) // len(names)
            names = [n + prefix + x for n in names for x in _range_items(body, part, room)]
        hosts.extend(names)
        if len(hosts) > MAX_HOSTS:
            raise UsageError(f"the Slurm host list names more than {MAX_HOSTS:,} hosts")
    return hosts


def expand_tasks_per_node(text: str) -> List[int]:
    """``2(x3),1`` -> [2, 2, 2, 1] (Slurm's ``SLURM_TASKS_PER_NODE``)."""
    out: List[int] = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        m = re.fullmatch(r"(\d+)(?:\(x(\d+)\))?", part)
        if m is None:
            return []
        out.extend([int(m.group(1))] * int(m.group(2) or 1))
    return out


# -- per-node file names -------------------------------------------------------------------

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def placeholder_values(launch: Launch, env: Mapping[str, str]) -> Dict[str, str]:
    """What ``{NAME}`` may stand for: this rank's environment, plus RANK, LOCAL_RANK, NODE
    (the node index), WORLD_SIZE and HOSTNAME under every launcher (so one template works
    under torchrun and srun alike)."""
    values = dict(env)
    values.update(RANK=str(launch.rank), LOCAL_RANK=str(launch.local_rank),
                  NODE=str(launch.node), WORLD_SIZE=str(launch.world_size),
                  HOSTNAME=launch.host.split(".")[0])
    return values


def expand_placeholders(template: str, values: Mapping[str, str]) -> str:
    """``snaps/node-{GROUP_RANK}.json`` -> ``snaps/node-3.json``.

    Only ``{NAME}`` with a variable-like name is replaced, so other braces pass through;
    a name this rank does not have is an error rather than a silent wrong file.

    >>> expand_placeholders("s/{HOSTNAME}-{RANK}.json", {"HOSTNAME": "gpu7", "RANK": "3"})
    's/gpu7-3.json'
    """
    def sub(m: "re.Match[str]") -> str:
        name = m.group(1)
        if name not in values:
            raise UsageError(f"{template!r}: {{{name}}} is not set in this rank's environment")
        return values[name]

    return _PLACEHOLDER.sub(sub, template)
