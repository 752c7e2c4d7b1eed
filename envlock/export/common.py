"""What every exporter shares: the plug-in interface, the request it renders, the header,
target selection, and the index plan.

An exporter turns *one target* of a lock into text in a format people install with. It
never touches the network or the filesystem: the CLI loads the lock and writes the result,
so an exporter is a pure function of the lock and is golden-testable.

The index plan is where safety lives. pip has no per-package index: every
``--index-url``/``--extra-index-url`` is searched for every package and the best candidate
wins. envlock's lock pins every package with ``==`` and a hash of every file it may use,
so a package planted on another index under a locked name (the 2022 ``torchtriton``
attack) cannot install: a higher version does not match the pin, and the same version
does not match the hash. Formats that cannot carry hashes say so in their header.
"""

from __future__ import annotations

import abc
import difflib
import re
import shlex
from collections import Counter
from dataclasses import dataclass, field
from typing import ClassVar, Dict, List, Optional, Sequence, Tuple

from envlock._text import clean_for_output
from envlock.errors import InputError, UsageError
from envlock.lock.model import Lock, LockedPackage, LockTarget

__all__ = [
    "ExportRequest",
    "Exporter",
    "IndexPlan",
    "index_plan",
    "select_target",
    "header_lines",
    "comment",
    "describe_target",
    "pin",
    "overrides",
    "constraints",
    "constraint_notes",
    "require_hashes",
    "gpu_core_warning",
    "override_warning",
    "command_line",
]


@dataclass(frozen=True)
class ExportRequest:
    """Everything an exporter renders from; built by :func:`envlock.export.export`."""

    lock: Lock
    target: LockTarget
    #: the lock's path as the user named it (written into headers and Dockerfile COPY)
    lock_path: str
    #: the ``envlock export ...`` command line that regenerates the output
    command: str
    #: the file the output goes to, or None for stdout (used in "install with" lines)
    output: Optional[str] = None
    #: format-specific options (``base_image`` for the Dockerfile)
    options: Dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Every exporter (the Dockerfile's included) renders from these values, so this is
        # the one place that makes them safe to render: URL credentials stripped, control
        # characters escaped in every string of the lock, target, command and options. A
        # newline in a lock's command can then never start an active line in the output.
        for name in ("lock", "target", "lock_path", "command", "output", "options"):
            object.__setattr__(self, name, clean_for_output(getattr(self, name)))


class Exporter(abc.ABC):
    """One output format. Subclasses set the class attributes and implement ``render``."""

    #: the ``--format`` name
    name: ClassVar[str]
    #: one line for ``--help``
    summary: ClassVar[str]
    #: True when the format is unsafe or uninstallable without a hash for every package
    needs_hashes: ClassVar[bool] = False

    @abc.abstractmethod
    def filename(self, target: str) -> str:
        """The conventional file name for ``target`` (suggested in headers)."""

    @abc.abstractmethod
    def render(self, request: ExportRequest) -> str:
        """The whole file, header first, ending in a newline."""

    def warnings(self, request: ExportRequest) -> List[str]:
        """Problems worth a line in the header and on stderr (the output is still usable)."""
        return []

    def output_name(self, request: ExportRequest) -> str:
        """The name the output will have (the ``-o`` file, else the conventional one)."""
        if request.output:
            return request.output
        return self.filename(request.target.name)


def command_line(args: Sequence[str]) -> str:
    """``envlock export`` plus shell-quoted arguments."""
    return " ".join(["envlock", "export", *(shlex.quote(a) for a in args)])


# -- targets ---------------------------------------------------------------------------------


def select_target(lock: Lock, name: Optional[str], lock_path: str) -> LockTarget:
    """The target named ``name``, or the only one when ``name`` is None."""
    names = lock.target_names()
    if not names:
        raise InputError(f"{lock_path} has no targets",
                         hint="regenerate it with 'envlock resolve --gpu <GPU>'")
    if name is None:
        if len(names) == 1:
            return lock.targets[0]
        raise UsageError(f"{lock_path} has {len(names)} targets ({', '.join(sorted(names))}); "
                         f"choose one with --target")
    found = lock.target(name)
    if found is not None:
        return found
    close = difflib.get_close_matches(name, names, n=3, cutoff=0.5)
    more = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    raise UsageError(f"target {name!r} is not in {lock_path} (its targets: "
                     f"{', '.join(sorted(names))}){more}")


def describe_target(t: LockTarget) -> str:
    """One line: hardware, Python, platform, torch build and driver floor."""
    if t.gpus:
        hw = ", ".join(f"{g} (compute capability {cc})"
                       for g, cc in zip(t.gpus, t.compute_capabilities))
    else:
        hw = "CPU only"
    parts = [hw, f"Python {t.python}", t.platform + (f" (glibc >= {t.glibc})"
                                                      if t.glibc and t.platform.startswith(
                                                          "linux") else "")]
    if t.torch is not None:
        cuda = f", CUDA {t.torch.cuda}" if t.torch.cuda else ""
        parts.append(f"torch {t.torch.installed_version} ({t.torch.variant}{cuda})")
    if t.driver_min:
        parts.append(f"NVIDIA driver >= {t.driver_min}")
    return "; ".join(parts)


# -- packages --------------------------------------------------------------------------------


def pin(p: LockedPackage) -> str:
    """``name==version`` exactly as locked (local versions such as ``+cu121`` included), or
    ``name<specifier>`` for a GPU-core package known only as a range."""
    if p.version:
        return f"{p.name}=={p.version}"
    return f"{p.name}{p.specifier or ''}"


def overrides(t: LockTarget) -> Dict[str, Tuple[str, str]]:
    """Package name -> (advisory id, requirement) for every advisory override in ``t``."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    out: Dict[str, Tuple[str, str]] = {}
    for a in t.advisories:
        if a.action != "override":
            continue
        for text in a.override:
            try:
                name = canonicalize_name(Requirement(text).name)
            except InvalidRequirement:
                continue
            out[name] = (a.id, text)
    return out


def constraints(t: LockTarget) -> Dict[str, Tuple[str, str]]:
    """Package name -> (advisory id, requirement) for every advisory requirement that took
    part in the resolution as a constraint (the lock's pin satisfies it and every package's
    own requirements; nothing was overridden)."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    out: Dict[str, Tuple[str, str]] = {}
    for a in t.advisories:
        if a.action != "constraint":
            continue
        for text in a.override:
            try:
                out[canonicalize_name(Requirement(text).name)] = (a.id, text)
            except InvalidRequirement:
                continue
    return out


def constraint_notes(t: LockTarget) -> List[str]:
    """Header lines naming the advisories that held a package to a version."""
    held = constraints(t)
    if not held:
        return []
    return ["Held by advisories (the other packages were resolved to fit them): " + ", ".join(
        f"{req} ({aid})" for _, (aid, req) in sorted(held.items()))]


def require_hashes(request: ExportRequest, fmt: str) -> None:
    """Refuse (exit 2) when a format that needs hashes meets a target without them."""
    t = request.target
    if t.closure != "full":
        fresh = _without_offline(request.lock.command)
        raise InputError(
            f"{request.lock_path}: target {t.name} holds only the GPU core, without hashes "
            f"(the lock was resolved with --offline and nothing was cached); the {fmt} "
            f"format needs a sha256 hash for every package",
            hint=f"resolve again online, without --offline: {fresh}")
    missing = [p.name for p in t.packages if not p.hashes]
    if missing:
        raise InputError(
            f"{request.lock_path}: target {t.name} has packages without sha256 hashes "
            f"({', '.join(sorted(missing))}); the {fmt} format needs a hash for every package",
            hint=f"resolve again online, without --offline: "
                 f"{_without_offline(request.lock.command)}")


def _without_offline(command: str) -> str:
    cleaned = re.sub(r"\s--offline(?=\s|$)", "", command).strip()
    return cleaned or "envlock resolve --gpu <GPU>"


def gpu_core_warning(t: LockTarget) -> List[str]:
    """Header warning lines for a GPU-core target (empty for a full one)."""
    if t.closure == "full":
        return []
    return [f"WARNING: target {t.name} holds only the GPU core (envlock resolve ran with "
            f"--offline and an empty cache): no hashes and no transitive dependencies. "
            f"Run envlock resolve without --offline for a complete, hashed lock."]


def override_warning(t: LockTarget, how: str) -> List[str]:
    """Header warning lines for advisory overrides in a format that cannot apply them."""
    ov = overrides(t)
    if not ov:
        return []
    listed = ", ".join(f"{req} ({aid})" for _, (aid, req) in sorted(ov.items()))
    return [f"WARNING: advisory overrides {listed} contradict an exact pin of the torch "
            f"build; {how}"]


# -- indexes ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class IndexPlan:
    """Which index pip is pointed at first, and which others it also searches."""

    primary: Optional[str]
    extras: Tuple[str, ...]
    #: the chosen build's index, when it is not the same as the rest (PyTorch index)
    torch_index: Optional[str]
    #: index -> packages locked from it
    packages: Dict[str, Tuple[str, ...]]
    #: packages whose lock entry names no index (found through pip's own configuration)
    unrouted: Tuple[str, ...] = ()

    @property
    def all(self) -> Tuple[str, ...]:
        return ((self.primary,) if self.primary else ()) + self.extras

    @property
    def split(self) -> bool:
        """True when packages come from more than one index."""
        return len(self.all) > 1


def index_plan(t: LockTarget) -> IndexPlan:
    """The chosen build's index first (when packages come from it), then the others by
    how many packages come from each (ties by URL), so output is deterministic."""
    by_index: Dict[str, List[str]] = {}
    unrouted: List[str] = []
    for p in sorted(t.packages, key=lambda p: p.name):
        if p.index:
            by_index.setdefault(p.index, []).append(p.name)
        else:
            unrouted.append(p.name)
    counts = Counter({ix: len(names) for ix, names in by_index.items()})
    order = sorted(counts, key=lambda ix: (-counts[ix], ix))
    torch_index = t.torch.index if t.torch is not None else None
    if torch_index is not None and torch_index in by_index:
        order.remove(torch_index)
        order.insert(0, torch_index)
    primary = order[0] if order else None
    special = torch_index if (torch_index in by_index and len(order) > 1) else None
    return IndexPlan(primary=primary, extras=tuple(order[1:]), torch_index=special,
                     packages={ix: tuple(n) for ix, n in by_index.items()},
                     unrouted=tuple(unrouted))


# -- headers ---------------------------------------------------------------------------------


def comment(lines: Sequence[str], width: int = 92) -> List[str]:
    """``#``-comment lines. Long prose is wrapped with a two-space hanging indent; lines
    that start indented are commands to copy and paste, and are never wrapped."""
    import textwrap

    out: List[str] = []
    for line in lines:
        if not line:
            out.append("#")
            continue
        if line.startswith("  ") or len(line) <= width - 2:
            out.append(f"# {line}".rstrip())  # indented lines are commands: never wrapped
            continue
        out.extend(f"# {w}" for w in textwrap.wrap(
            line, width=width - 2, subsequent_indent="  ", break_on_hyphens=False,
            break_long_words=False))
    return out


def header_lines(request: ExportRequest, title: str, body: Sequence[str] = (),
                 warnings: Sequence[str] = ()) -> List[str]:
    """The opening comment every output starts with: what it is, from which lock and
    target, the command that regenerates it, and what the lock was made with."""
    from envlock import __version__

    t = request.target
    lines = [
        f"{title} for target {t.name} of {request.lock_path}, generated by envlock "
        f"{__version__}. Do not edit it by hand.",
        "Regenerate it with:",
        f"  {request.command}",
    ]
    if request.lock.command:
        lines += ["The lock was made with:", f"  {request.lock.command}"]
    lines += ["", f"Target {t.name}: {describe_target(t)}"]
    body = [*body, *constraint_notes(t)]
    if body:
        lines += ["", *body]
    if warnings:
        lines += ["", *warnings]
    # the first line names what this is and stays one line, whatever its length
    return [f"# {lines[0]}"] + comment(lines[1:])
