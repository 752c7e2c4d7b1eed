"""What a resolution is for: hardware targets and the user's constraints."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Tuple

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name

from envlock.errors import InputError, UsageError
from envlock.matrix.matrix import Matrix
from envlock.matrix.lookup import normalize_name
from envlock.matrix.model import Gpu
from envlock.platforms import DEFAULT_GLIBC, PLATFORM_INFO
from envlock.versions import is_driver_version

if TYPE_CHECKING:  # annotations only: most resolves read no snapshot
    from envlock.snapshot import Snapshot

__all__ = [
    "TargetSpec",
    "ResolveRequest",
    "gpu_targets",
    "snapshot_target",
    "parse_requirements",
    "read_requirement_file",
    "FileOptions",
    "LocalLabel",
    "local_labels",
    "normal_requirement",
    "TORCH_FAMILY",
]

#: Packages that must come from the chosen build's index and nowhere else.
TORCH_FAMILY = ("torch", "torchvision", "torchaudio", "triton", "pytorch-triton")
_PY_RE = re.compile(r"^3\.[0-9]{1,2}t?\Z")  # \Z: "3.11\n" is not a version
_GLIBC_RE = re.compile(r"^2\.[0-9]{1,3}(\.[0-9]{1,5})?\Z")  # 2.28, 2.39.9000


@dataclass(frozen=True)
class TargetSpec:
    name: str
    gpus: Tuple[Gpu, ...]
    python: str
    platform: str
    glibc: str = DEFAULT_GLIBC
    driver: Optional[str] = None
    cpu: bool = False
    origin: str = ""
    #: how the driver (or the target itself) was arrived at, for the lock's ``decision``
    notes: Tuple[str, ...] = ()
    #: the family name when the GPUs are the members of one (``--gpu H100``)
    family: Optional[str] = None
    #: the GPUs are in different machines (``--together``, a family), not one box
    separate: bool = False

    def describe(self) -> str:
        what = "CPU only" if self.cpu else " + ".join(g.name for g in self.gpus)
        drv = f", driver {self.driver}" if self.driver else ""
        return f"{what}, Python {self.python}, {self.platform}{drv}"

    def key(self) -> Dict[str, Any]:
        return {"name": self.name, "gpus": [g.id for g in self.gpus], "cpu": self.cpu,
                "python": self.python, "platform": self.platform, "glibc": self.glibc,
                "driver": self.driver or ""}


@dataclass(frozen=True)
class ResolveRequest:
    targets: Tuple[TargetSpec, ...]
    torch: SpecifierSet = field(default_factory=SpecifierSet)
    cuda: Optional[str] = None
    requirements: Tuple[Requirement, ...] = ()
    requirement_files: Mapping[str, str] = field(default_factory=dict)  # path -> sha256
    offline: bool = False
    indexes: Tuple[str, ...] = ()
    pytorch_index: str = "https://download.pytorch.org/whl"
    env: Mapping[str, str] = field(default_factory=dict)
    together: bool = False
    #: ``pypi`` or ``pytorch-index``: rank that index's builds first (``--prefer``)
    prefer: Optional[str] = None
    #: ``--prerelease`` (uv's modes; see :data:`envlock.resolve.closure.PRERELEASE_MODES`)
    prerelease: str = "if-necessary"
    #: ``--trust-pkg-info``: projects whose sdists' dynamic PKG-INFO dependencies are read
    #: instead of built (canonical names, sorted)
    trust_pkg_info: Tuple[str, ...] = ()
    #: ``-c`` constraints (files and lines in requirements files): they narrow a package's
    #: versions wherever it appears, and add no package
    constraints: Tuple[Requirement, ...] = ()

    def inputs(self, matrix_version: str) -> Dict[str, Any]:
        """Everything that determines the lock, for the inputs hash and ``--check``.

        URL credentials are stripped (``--pytorch-index-url``, ``--env`` values): the
        inputs are written into the lock, and a lock is shared."""
        from envlock._redact import strip_userinfo

        return {
            "targets": [t.key() for t in self.targets],
            "together": self.together,
            "torch": str(self.torch),
            "cuda": self.cuda or "",
            "requirements": sorted(normal_requirement(str(r)) for r in self.requirements),
            "requirement-files": dict(sorted(self.requirement_files.items())),
            "offline": self.offline,
            "indexes": list(self.indexes),
            "pytorch-index": strip_userinfo(self.pytorch_index),
            "env": {k: strip_userinfo(v) for k, v in sorted(self.env.items())},
            "matrix-version": matrix_version,
            # only when not the default, so locks made before the option stay fresh
            **({"prefer": self.prefer} if self.prefer else {}),
            **({"prerelease": self.prerelease} if self.prerelease != "if-necessary" else {}),
            **({"trust-pkg-info": list(self.trust_pkg_info)} if self.trust_pkg_info else {}),
            **({"constraints": sorted(normal_requirement(str(r)) for r in self.constraints)}
               if self.constraints else {}),
        }

    def inputs_hash(self, matrix_version: str) -> str:
        return hash_inputs(self.inputs(matrix_version))


def hash_inputs(inputs: Mapping[str, Any]) -> str:
    """The lock's ``inputs-hash``: what ``resolve --check`` compares."""
    from envlock.lock.model import LOCK_VERSION

    blob = json.dumps({"lock-version": LOCK_VERSION, **inputs}, sort_keys=True,
                      separators=(",", ":"))
    return "sha256:" + hashlib.sha256(blob.encode()).hexdigest()


def _check_python(python: str) -> str:
    if not _PY_RE.match(python):
        raise UsageError(f"--python {python!r}: give a CPython version like 3.11")
    return python


def _check_glibc(glibc: str) -> str:
    if not _GLIBC_RE.match(glibc):
        raise UsageError(f"--glibc {glibc!r}: give a glibc version like 2.28")
    return glibc


def _check_platform(platform: str) -> str:
    if platform not in PLATFORM_INFO or platform.startswith("macos"):
        raise UsageError(f"--platform {platform!r}: use linux_x86_64, linux_aarch64 or "
                         f"win_amd64")
    return platform


def _check_driver(driver: Optional[str]) -> Optional[str]:
    if driver is not None and not is_driver_version(driver):
        raise UsageError(f"--driver {driver!r} is not an NVIDIA driver version "
                         f"(like 535.104.05)")
    return driver


def gpu_targets(matrix: Matrix, gpus: Sequence[str], *, cpu: bool, together: bool,
                python: str, platform: str, glibc: str,
                driver: Optional[str]) -> List[TargetSpec]:
    """``--gpu`` values (and ``--cpu``) -> targets; one per GPU unless ``together``."""
    _check_python(python)
    _check_platform(platform)
    _check_glibc(glibc)
    _check_driver(driver)
    from envlock.resolve.family import family_members

    found: List[Gpu] = []
    groups: List[Tuple[str, Optional[str], Tuple[Gpu, ...]]] = []  # (name, family, gpus)
    for name in gpus:
        members = family_members(matrix, name)
        if members:
            family = normalize_name(name)
            if any(f == family for _, f, _ in groups):
                continue
            groups.append((family, name.strip(), members))
            found.extend(g for g in members if g not in found)
            continue
        g = matrix.gpu(name)  # raises UnknownGpuError with suggestions
        if g not in found:
            found.append(g)
            groups.append((g.id, None, (g,)))
    targets: List[TargetSpec] = []
    if found:
        if together:
            fams = [f for _, f, _ in groups if f]
            targets.append(TargetSpec(name="+".join(n for n, _, _ in groups), gpus=tuple(found),
                                      python=python, platform=platform, glibc=glibc,
                                      driver=driver, origin="--gpu --together",
                                      family=fams[0] if len(groups) == 1 and fams else None,
                                      separate=len(found) > 1))
        else:
            for n, fam, members in groups:
                targets.append(TargetSpec(name=n, gpus=members, python=python,
                                          platform=platform, glibc=glibc, driver=driver,
                                          origin="--gpu", family=fam,
                                          separate=len(members) > 1))
    if cpu:
        targets.append(TargetSpec(name="cpu", gpus=(), python=python, platform=platform,
                                  glibc=glibc, driver=None, cpu=True, origin="--cpu"))
    if not targets:
        raise UsageError("nothing to resolve for: give --gpu NAME (one or more), --cpu, "
                         "or --from-snapshot FILE")
    return targets


def snapshot_target(matrix: Matrix, snapshot: Snapshot, origin: str,
                    python: Optional[str] = None, platform: Optional[str] = None,
                    glibc: Optional[str] = None) -> TargetSpec:
    """The machine in a snapshot as one target (all its visible GPUs together).

    GPUs the snapshot did not record are unknown, not "none": no CPU target for them."""
    if not snapshot.recorded("gpus"):
        raise InputError(f"{origin}: the snapshot did not record GPUs (hardware: "
                         f"{snapshot.hardware_source or 'not probed'}); pass --gpu instead, "
                         f"or take it with: envlock snapshot --gpu NAME:COUNT")
    gpus: List[Gpu] = []
    unknown: List[str] = []
    for g in snapshot.visible_gpus():
        if not g.name:
            continue
        m = matrix.find_gpu(g.name, g.memory_mib)
        if m is None:
            unknown.append(g.name)
        elif m not in gpus:
            gpus.append(m)
    if unknown:
        raise InputError(f"{origin}: GPU {unknown[0]!r} is not in the matrix; pass --gpu "
                         f"with a known model instead")
    py = python or ".".join((snapshot.python.version or "3.11").split(".")[:2])
    machine = snapshot.host.machine or "x86_64"
    plat = platform or {"x86_64": "linux_x86_64", "amd64": "linux_x86_64",
                        "aarch64": "linux_aarch64", "arm64": "linux_aarch64"}.get(
                            machine.lower(), "linux_x86_64")
    gl = glibc or (snapshot.host.glibc if snapshot.host.glibc else DEFAULT_GLIBC)
    driver = snapshot.driver.version if snapshot.driver and snapshot.driver.version else None
    name = "+".join(g.id for g in gpus) if gpus else "cpu"
    return TargetSpec(name=name, gpus=tuple(gpus), python=_check_python(py),
                      platform=_check_platform(plat), glibc=_check_glibc(gl), driver=driver,
                      cpu=not gpus, origin=f"snapshot {origin}")


def parse_requirements(lines: Sequence[Tuple[str, str]]) -> List[Requirement]:
    """(origin, text) pairs -> requirements; a bad line names its file and line."""
    out: List[Requirement] = []
    for origin, text in lines:
        try:
            req = Requirement(text)
        except InvalidRequirement as exc:
            first = str(exc).splitlines()[0] if str(exc) else "not a requirement"
            raise InputError(f"{origin}: invalid requirement {text!r}: {first}") from None
        if req.url:
            raise InputError(f"{origin}: direct URL requirements ({text!r}) cannot be locked "
                             f"by envlock; publish the package to an index")
        out.append(req)
    return out


_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")


def normal_requirement(text: str) -> str:
    """A requirement with its project name normalised (PEP 503): renaming ``accelerate``
    to ``Accelerate`` or ``typing_extensions`` to ``typing-extensions`` changes nothing
    a resolver does, so it does not make a lock stale. Option lines stay as they are."""
    m = _NAME.match(text)
    if not m:
        return text
    return str(canonicalize_name(m.group(0))) + text[m.end():]


def requirement_content(text: str) -> List[str]:
    """The lines of a requirements file that matter: continuations joined, comments and
    blank lines dropped, whitespace trimmed, project names normalised (PEP 503)."""
    out = []
    for raw in re.sub(r"\\\n", "", text).splitlines():
        line = raw.split(" #", 1)[0].strip()
        if line and not line.startswith("#"):
            out.append(normal_requirement(line))
    return out


def requirements_digest(text: str) -> str:
    """What the lock records of a requirements file: the sha256 of its content lines, so a
    comment or a blank line does not make a lock stale."""
    blob = "\n".join(requirement_content(text)).encode()
    return "sha256:" + hashlib.sha256(blob).hexdigest()


#: how deep ``-r`` files may nest (pip has no limit, but thousands of levels are an attack
#: or a generator bug, not a project layout)
MAX_REQUIREMENT_DEPTH = 32


@dataclass
class FileOptions:
    """What requirements files say besides requirements, gathered across ``-r`` nesting:
    index options (pip applies them to the whole run, and so does envlock) and the lines
    of ``-c`` constraints files."""

    index_url: Optional[str] = None
    extra_index_urls: List[str] = field(default_factory=list)
    constraints: List[Tuple[str, str]] = field(default_factory=list)


#: options a requirements file may carry, as pip reads them: name -> takes a value
_INDEX_OPTIONS = {"-i": "index_url", "--index-url": "index_url",
                  "--extra-index-url": "extra_index_urls"}


def _option(line: str) -> Tuple[str, str]:
    """``--index-url URL`` / ``--index-url=URL`` / ``-iURL`` -> (option, value)."""
    if line.startswith("--"):
        first, _, rest = line.partition(" ")
        name, sep, value = first.partition("=")
        return name, (value + (" " + rest if rest else "")).strip() if sep else rest.strip()
    return line[:2], line[2:].strip()


def _refuse_editable(where: str, line: str) -> None:
    """Editable and VCS/URL requirements name no index file envlock could hash: refuse in
    one line with the way out."""
    text = line.split(None, 1)[1] if line.startswith(("-e ", "--editable ")) else line
    if line.startswith(("-e", "--editable")):
        raise InputError(f"{where}: editable requirement {text!r} cannot be locked (an "
                         f"editable install, not a file on an index); remove the line and install "
                         f"it on top of the locked environment with: pip install --no-deps "
                         f"-e {text}")
    raise InputError(f"{where}: VCS/URL requirement {line!r} cannot be locked (no index "
                     f"serves its file); remove the line and install it on top of the locked "
                     f"environment with: pip install --no-deps '{line}', or build a wheel "
                     f"and publish it to an index")


def read_requirement_file(path: str, seen: Optional[set] = None, depth: int = 0,
                          options: Optional[FileOptions] = None,
                          constraint: bool = False) -> Tuple[
        List[Tuple[str, str]], Dict[str, str]]:
    """Lines of a requirements file (``-r`` nests), and the sha256 of each file read.

    A file already read is skipped (cycles end); nesting deeper than
    :data:`MAX_REQUIREMENT_DEPTH` is an input error.

    ``--index-url``/``-i`` and ``--extra-index-url`` lines go into ``options`` (pip applies
    them to the whole run; the lock records the indexes it used), so do the lines of ``-c``
    files. Other options, editable (``-e``) and VCS/URL lines are refused with the line
    and the way out.
    """
    seen = set() if seen is None else seen
    options = FileOptions() if options is None else options
    from envlock._files import read_user_text

    p = Path(path)
    if depth > MAX_REQUIREMENT_DEPTH:
        raise InputError(f"requirements file {p}: '-r' files nest more than "
                         f"{MAX_REQUIREMENT_DEPTH} deep")
    text = read_user_text(p, "requirements file")
    digests = {str(p): requirements_digest(text)}
    out: List[Tuple[str, str]] = []
    if p.resolve() in seen:
        return out, digests
    seen.add(p.resolve())
    joined = re.sub(r"\\\n", "", text)
    for no, raw in enumerate(joined.splitlines(), 1):
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        where = f"{path}:{no}"
        if line.startswith(("-r", "--requirement", "-c", "--constraint")) and \
                _option(line)[0] in ("-r", "--requirement", "-c", "--constraint"):
            opt, nested = _option(line)
            nested_path = str((p.parent / nested)) if not Path(nested).is_absolute() else nested
            is_c = opt in ("-c", "--constraint")
            more, d = read_requirement_file(nested_path, seen, depth + 1, options,
                                            constraint=constraint or is_c)
            (options.constraints if is_c and not constraint else out).extend(more)
            digests.update(d)
            continue
        if line.startswith(("-e", "--editable")) or (not line.startswith("-")
                                                      and _is_vcs(line)):
            _refuse_editable(where, line)
        if line.startswith("-"):
            opt, value = _option(line)
            field_name = _INDEX_OPTIONS.get(opt)
            if field_name is None or not value:
                raise InputError(f"{where}: option {line.split()[0]!r} is not supported in "
                                 f"requirements files (envlock reads -r, -c, --index-url, "
                                 f"--extra-index-url); give its envlock equivalent on the "
                                 f"command line (envlock resolve --help)")
            if field_name == "index_url":
                options.index_url = value
            elif value not in options.extra_index_urls:
                options.extra_index_urls.append(value)
            continue
        out.append((where, line))
    return out, digests


def _is_vcs(line: str) -> bool:
    """``git+https://...``, ``pkg @ git+...``, ``https://.../x.whl``: a URL, not a
    requirement on an index."""
    return bool(re.match(r"^(git|hg|svn|bzr)\+", line)) or "://" in line.split(";")[0]


def torch_spec_from(requirements: Sequence[Requirement], torch: Optional[str]) -> Tuple[
        SpecifierSet, List[Requirement]]:
    """Merge ``--torch`` with any ``torch`` requirement; return the rest."""
    text = (torch or "").strip()
    if re.match(r"^\d+\.\d+$", text):
        text = f"=={text}.*"  # "--torch 2.4" means any 2.4.x
    elif re.match(r"^\d+\.\d+\.\d+$", text):
        text = f"=={text}"
    try:
        spec = SpecifierSet(text)
    except InvalidSpecifier:
        raise UsageError(f"--torch {torch!r} is not a version specifier (like '>=2.4,<2.5')")
    rest = []
    for r in requirements:
        if canonicalize_name(r.name) == "torch":
            spec &= r.specifier
        else:
            rest.append(r)
    return spec, rest


@dataclass(frozen=True)
class LocalLabel:
    """A local version label on the torch family in the requirements (``torch==2.1.2+cu118``,
    as pip users write for the PyTorch index's builds): the CUDA line of the build it names,
    which chooses that build and its index, and the requirements with the label dropped
    (the chosen build's own version carries it)."""

    label: Optional[str]
    cuda: Optional[str]
    requirements: Tuple[Requirement, ...]


_LABELLED = ("torch", "torchvision", "torchaudio")


def local_labels(requirements: Sequence[Requirement], cuda: Optional[str],
                 cuda_lines: Sequence[str], cpu: bool = False) -> LocalLabel:
    """Read and drop ``+cuXYZ`` labels of torch, torchvision and torchaudio pins.

    The labels must agree with each other and with ``--cuda``; ``+cpu`` or a ROCm label
    on a GPU lock names no CUDA build (an input error with the way out)."""
    labels: Dict[str, List[str]] = {}
    out: List[Requirement] = []
    for r in requirements:
        if canonicalize_name(r.name) not in _LABELLED or "+" not in str(r.specifier):
            out.append(r)
            continue
        parts = []
        for s in r.specifier:
            version, plus, label = s.version.partition("+")
            if plus and s.operator in ("==", "==="):
                labels.setdefault(label.lower(), []).append(f"{r.name}{s}")
                parts.append(f"=={version}")
            else:
                parts.append(str(s))
        text = f"{r.name}{'[' + ','.join(sorted(r.extras)) + ']' if r.extras else ''}" \
               f"{','.join(parts)}" + (f"; {r.marker}" if r.marker else "")
        out.append(Requirement(text))
    if not labels:
        return LocalLabel(None, cuda, tuple(requirements))
    if len(labels) > 1:
        named = "; ".join(f"+{k}: {', '.join(v)}" for k, v in sorted(labels.items()))
        raise InputError(f"the requirements name different builds of the torch family "
                         f"({named}); use one local label (one CUDA line) for all of them")
    (label, pins), = labels.items()
    if label == "cpu" and cpu:  # --cpu: the CPU build is the one chosen anyway
        return LocalLabel(None, cuda, tuple(out))
    m = re.fullmatch(r"cu(\d+)(\d)", label)
    line = f"{int(m.group(1))}.{m.group(2)}" if m else None
    if line is None or line not in cuda_lines:
        known = ", ".join("cu" + c.replace(".", "") for c in cuda_lines)
        raise InputError(f"{', '.join(pins)}: +{label} names no CUDA build envlock locks "
                         f"(known: {known}); drop the label and choose the build with "
                         f"--cuda, or use --cpu for a CPU-only lock")
    if cuda and cuda != line:
        raise UsageError(f"{', '.join(pins)} names the CUDA {line} build, but --cuda {cuda} "
                         f"was given; drop one of them")
    return LocalLabel(label, line, tuple(out))
