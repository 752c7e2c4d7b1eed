"""Miniature PyPI + PyTorch index worlds on the loopback index server.

``envlock resolve`` needs real index pages, real wheels and real metadata; PyPI's torch
is 800 MB and download.pytorch.org is not always reachable. Everything here builds small
wheels with *real* names, versions, tags and Requires-Dist (the fake ``torch`` carries
exactly the pins of the matrix's ``torch-pypi.toml``), so that the resolver, pip and uv
behave as they would against the real indexes. CPython wheels (torch, torchvision,
triton, numpy ...) are published for :data:`WORLD_PYTHONS`: the running interpreter, which
``envlock resolve`` targets by default, and 3.11; a torch release gets wheels only for the
Pythons it really had (the matrix's list), so torch 2.1.2 has no cp312 wheel. Two ways to
use it:

* building blocks for a test's own world: :func:`add_torch_release` publishes a torch
  release with its real pins and every dependency they name (a version that satisfies the
  pin), :func:`add_package` any other wheel. A "planted" index can carry higher-versioned
  ``torch`` and ``triton`` to prove they never win.
* one ready world around torch 2.5.1 for exporter and install tests, :func:`torch_world`:

  - ``pypi`` (``<base>/pypi/simple``): torch 2.5.1 (cu124, the PyPI default build),
    torchvision 0.20.1, the cu124 and cu121 ``nvidia-*`` wheels, triton and the
    pure-Python dependencies (setuptools too, which torch needs on Python 3.12+);
  - ``cu121`` (``<base>/whl/cu121``, the PyTorch index layout): ``torch 2.5.1+cu121``,
    ``torchvision 0.20.1+cu121``, triton and the cu121 ``nvidia-*`` wheels it pins, except
    cuBLAS, as on the real index where only PyPI has the cuBLAS an advisory asks for.

  Resolve against it with :meth:`TorchWorld.resolve`; pass ``--cuda 12.1`` for the PyTorch
  index build (an ``--gpu H20`` target then gets the cuBLAS advisory override)::

      with torch_world(tmp_path) as world:
          lock_path = world.resolve(tmp_path / "h100.lock", "--gpu", "H100 SXM")
"""

from __future__ import annotations

import os
import subprocess
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import (Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple,
                    Union)

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from envlock.matrix import get_matrix
from envlock.platforms import marker_environment
from support.cli import Result, run_cli
from support.index_server import Index, IndexServer, make_wheel

__all__ = ["torch_requires", "satisfying_version", "add_torch_release", "add_package",
           "add_cpython_package", "add_pytorch_index_build", "resolve", "cp_tag", "cp_tags",
           "RUNNING_PYTHON", "WORLD_PYTHONS",
           "TorchWorld", "torch_world", "populate", "clean_env", "TORCH", "CU121_REQUIRES"]

#: The running interpreter's X.Y: the Python ``envlock resolve`` targets when no
#: ``--python`` is given (as pip and uv do).
RUNNING_PYTHON = "{}.{}".format(*sys.version_info[:2])

#: The Pythons these worlds publish CPython wheels for: the running interpreter (the
#: default target) and 3.11, which tests name with ``--python 3.11``. A torch release the
#: matrix says had no wheels for one of them gets none for it, as on the real index (torch
#: 2.1.2 has no cp312 wheel), so a test of such a release passes ``--python 3.11``.
WORLD_PYTHONS: Tuple[str, ...] = tuple(dict.fromkeys((RUNNING_PYTHON, "3.11")))

#: The platform tags of the torch wheels (the matrix's ``wheel_tags``).
_TORCH_PLATFORMS = ("manylinux1_x86_64", "manylinux_2_28_x86_64")


def cp_tag(python: str, platform: str) -> str:
    """The CPython wheel tag of ``python`` on ``platform``: ``cp312-cp312-linux_x86_64``."""
    cp = "cp" + python.replace(".", "")
    return f"{cp}-{cp}-{platform}"


def cp_tags(platform: str, pythons: Iterable[str] = WORLD_PYTHONS) -> List[str]:
    """:func:`cp_tag` for each of ``pythons``."""
    return [cp_tag(p, platform) for p in pythons]


def torch_requires(release: str, platform: str = "linux_x86_64") -> List[str]:
    """The real Requires-Dist of the PyPI torch wheel, from the shipped matrix data."""
    return list(get_matrix().torch_releases[release].builds[platform].requires)


def satisfying_version(spec: SpecifierSet) -> str:
    """A version inside ``spec`` (the pinned one for ``==``)."""
    cands: List[str] = []
    for s in spec:
        v = s.version.rstrip(".*")
        if s.operator in ("==", "===", ">=", "~=", "<=") and "*" not in s.version:
            cands.append(v)
        cands.append(v + ".1")
    cands += ["1.0", "2.0", "3.0", "10.0"]
    for c in cands:
        try:
            if spec.contains(Version(c), prereleases=True):
                return c
        except Exception:  # noqa: BLE001
            continue
    raise AssertionError(f"no version found inside {spec}")


def add_package(index: Index, tmp: Path, name: str, version: str,
                requires: Sequence[str] = (), tag: str = "py3-none-any") -> Path:
    return index.add(make_wheel(tmp / index.name, name, version, requires=requires, tag=tag))


def add_cpython_package(index: Index, tmp: Path, name: str, version: str,
                        requires: Sequence[str] = (), platform: str = "manylinux1_x86_64",
                        pythons: Iterable[str] = WORLD_PYTHONS) -> List[Path]:
    """A binary package (torchvision, torchaudio, numpy): one wheel per Python."""
    return [add_package(index, tmp, name, version, requires, tag=tag)
            for tag in cp_tags(platform, pythons)]


def add_torch_release(index: Index, tmp: Path, release: str, *, local: str = "",
                      requires: Optional[Iterable[str]] = None,
                      python: Union[str, Sequence[str], None] = None,
                      platform: str = "linux_x86_64", deps_index: Optional[Index] = None,
                      done: Optional[Dict[str, str]] = None) -> Path:
    """Publish ``torch==release[+local]`` with its real pins, and every dependency.

    One torch wheel per Python in ``python`` (default: those of :data:`WORLD_PYTHONS` the
    release has wheels for, by the matrix); each dependency as those Pythons' markers
    select it. Returns the wheel for the running interpreter, else the first one."""
    reqs = list(requires) if requires is not None else torch_requires(release, platform)
    build = get_matrix().torch_releases[release].builds[platform]
    if python is None:
        pythons = [p for p in WORLD_PYTHONS if p in build.pythons]
    else:
        pythons = [python] if isinstance(python, str) else list(python)
        missing = [p for p in pythons if p not in build.pythons]
        assert not missing, f"torch {release} has no wheels for Python {', '.join(missing)}"
    assert pythons, f"torch {release} has no wheels for Python {', '.join(WORLD_PYTHONS)}"
    plat_tag = next((t for t in build.wheel_tags if t in _TORCH_PLATFORMS), "manylinux1_x86_64")
    version = f"{release}+{local}" if local else release
    paths = [index.add(make_wheel(tmp / index.name, "torch", version, requires=reqs,
                                  tag=cp_tag(py, plat_tag))) for py in pythons]
    target = deps_index or index
    done = {} if done is None else done
    for py in pythons:
        env = dict(marker_environment(py, platform), extra="")
        for text in reqs:
            req = Requirement(text)
            if req.marker is not None and not req.marker.evaluate(env):
                continue
            name = req.name.lower()
            v = satisfying_version(req.specifier)
            # triton is a CPython wheel (one per Python), the rest are pure Python
            key = f"{name}=={v}" + (f"-{py}" if name == "triton" else "")
            if done.get(key):
                continue
            done[key] = v
            sub: List[str] = []
            if name == "sympy":
                sub = ["mpmath<1.4,>=1.1.0"]
                add_package(target, tmp, "mpmath", "1.3.0")
            if name == "jinja2":
                sub = ["MarkupSafe>=2.0"]
                add_package(target, tmp, "MarkupSafe", "3.0.2")
            tag = cp_tag(py, "manylinux_2_17_x86_64") if name == "triton" else "py3-none-any"
            add_package(target if name != "triton" else index, tmp, req.name, v, sub, tag=tag)
    return paths[pythons.index(RUNNING_PYTHON)] if RUNNING_PYTHON in pythons else paths[0]


def add_pytorch_index_build(index: Index, tmp: Path, release: str, *, local: str,
                            deps_index: Index, done: Dict[str, str]) -> Path:
    """Publish ``torch==release+local`` as the PyTorch index builds it: the real pins, but
    ``pytorch-triton`` (served next to it) instead of PyPI's ``triton``. ``done`` is the
    PyPI side's bookkeeping; it is copied, not changed, so both sides stay complete."""
    reqs = [r for r in torch_requires(release) if not r.startswith("triton")]
    reqs.append('pytorch-triton>=3.0; platform_system == "Linux"')
    path = add_torch_release(index, tmp, release, local=local, requires=reqs,
                             deps_index=deps_index, done=dict(done))
    add_package(index, tmp, "pytorch-triton", "3.1.0")
    return path


def resolve(world: IndexServer, *args: str, index: str = "pypi") -> Result:
    """``envlock resolve ARGS`` in-process against a loopback world: ``index`` as the
    index URL and ``<base>/pytorch`` as the PyTorch index (where these worlds put it)."""
    return run_cli("resolve", "--index-url", world.url(index),
                   "--pytorch-index-url", f"{world.base}/pytorch", *args)

# -- the ready torch 2.5.1 world -----------------------------------------------------------

TORCH = "2.5.1"

#: torch 2.5.1+cu121's own pins (the 2.4 cu121 pins from compat-matrix/torch.toml with
#: 2.5's NCCL, as the build scripts give them); not on PyPI, so written out here.
_LINUX = "platform_system == \"Linux\" and platform_machine == \"x86_64\""
CU121_PINS: Dict[str, str] = {
    "nvidia-cuda-nvrtc-cu12": "12.1.105",
    "nvidia-cuda-runtime-cu12": "12.1.105",
    "nvidia-cuda-cupti-cu12": "12.1.105",
    "nvidia-cudnn-cu12": "9.1.0.70",
    "nvidia-cublas-cu12": "12.1.3.1",
    "nvidia-cufft-cu12": "11.0.2.54",
    "nvidia-curand-cu12": "10.3.2.106",
    "nvidia-cusolver-cu12": "11.4.5.107",
    "nvidia-cusparse-cu12": "12.1.0.106",
    "nvidia-nccl-cu12": "2.21.5",
    "nvidia-nvtx-cu12": "12.1.105",
}
CU121_REQUIRES: List[str] = (
    ["filelock", "typing-extensions>=4.8.0", "networkx", "jinja2", "fsspec"]
    + [f"{n}=={v}; {_LINUX}" for n, v in CU121_PINS.items()]
    + [f"triton==3.1.0; {_LINUX} and python_version < \"3.13\"",
       "sympy==1.13.1; python_version >= \"3.9\"",
       "opt-einsum>=3.3; extra == \"opt-einsum\""]
)

#: nvidia-* wheels that depend on other nvidia-* wheels (as the real ones do).
_NVIDIA_REQUIRES: Dict[str, Tuple[str, ...]] = {
    "nvidia-cudnn-cu12": ("nvidia-cublas-cu12",),
    "nvidia-cusolver-cu12": ("nvidia-cublas-cu12", "nvidia-nvjitlink-cu12",
                             "nvidia-cusparse-cu12"),
    "nvidia-cusparse-cu12": ("nvidia-nvjitlink-cu12",),
}

_PURE: Sequence[Tuple[str, str, Tuple[str, ...], Optional[str]]] = (
    ("filelock", "3.16.1", (), ">=3.8"),
    ("typing-extensions", "4.12.2", (), ">=3.8"),
    ("networkx", "3.4.2", (), ">=3.10"),
    ("jinja2", "3.1.4", ("MarkupSafe>=2.0",), ">=3.7"),
    ("fsspec", "2024.10.0", (), ">=3.8"),
    ("sympy", "1.13.1", ("mpmath<1.4,>=1.1.0",), ">=3.8"),
    ("mpmath", "1.3.0", (), None),
    ("setuptools", "75.6.0", (), ">=3.9"),  # torch needs it on Python 3.12 and newer
)
_NVIDIA_TAG = "py3-none-manylinux2014_x86_64"
#: the platform tag of the CPython wheels PyPI has for numpy, pillow, markupsafe and triton
_MANYLINUX2014 = "manylinux_2_17_x86_64.manylinux2014_x86_64"


def _cu124_pins() -> Dict[str, str]:
    pins = {}
    for text in torch_requires(TORCH):
        req = Requirement(text)
        if req.name.startswith("nvidia-"):
            pins[req.name] = next(iter(req.specifier)).version
    return pins


def _nvidia(directory: Path, name: str, version: str) -> Path:
    return make_wheel(directory, name, version, tag=_NVIDIA_TAG,
                      requires=_NVIDIA_REQUIRES.get(name, ()), requires_python=">=3")


def populate(server: IndexServer, directory: Path) -> None:
    """Add the ``pypi`` and ``cu121`` indexes with every wheel (see the module docstring)."""
    d = Path(directory)
    pypi = server.add_index("pypi")
    cu121 = server.add_index("cu121", prefix="whl/cu121")
    for tag in cp_tags("manylinux1_x86_64"):
        pypi.add(make_wheel(d / "pypi", "torch", TORCH, tag=tag,
                            requires=torch_requires(TORCH), requires_python=">=3.8.0",
                            files={"torch/version.py":
                                   b"__version__ = '2.5.1'\ncuda = '12.4'\n"}))
        pypi.add(make_wheel(d / "pypi", "torchvision", "0.20.1", tag=tag,
                            requires_python=">=3.8",
                            requires=["numpy", f"torch=={TORCH}", "pillow!=8.3.*,>=5.3.0"]))
    for name, version, requires, rp in _PURE:
        pypi.add(make_wheel(d / "pypi", name, version, requires=requires, requires_python=rp))
    for tag in cp_tags(_MANYLINUX2014):
        for name, version in (("markupsafe", "3.0.2"), ("numpy", "2.1.3"), ("pillow", "11.0.0")):
            pypi.add(make_wheel(d / "pypi", name, version, tag=tag, requires_python=">=3.9"))
        triton = make_wheel(d / "shared", "triton", "3.1.0", tag=tag, requires=["filelock"])
        pypi.add(triton)
        cu121.add(triton)
    for name, version in sorted(_cu124_pins().items()):
        pypi.add(_nvidia(d / "shared", name, version))
    for name, version in sorted(CU121_PINS.items()):
        wheel = _nvidia(d / "shared", name, version)
        if not any(p.name == wheel.name for p in pypi.files.get(name, [])):
            pypi.add(wheel)
        if name != "nvidia-cublas-cu12":
            cu121.add(wheel)
    for tag in cp_tags("linux_x86_64"):
        cu121.add(make_wheel(d / "cu121", "torch", f"{TORCH}+cu121", tag=tag,
                             requires=CU121_REQUIRES, requires_python=">=3.8.0",
                             files={"torch/version.py":
                                    b"__version__ = '2.5.1+cu121'\ncuda = '12.1'\n"}))
        cu121.add(make_wheel(d / "cu121", "torchvision", "0.20.1+cu121", tag=tag,
                             requires_python=">=3.8",
                             requires=["numpy", f"torch=={TORCH}", "pillow!=8.3.*,>=5.3.0"]))


def clean_env(extra: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    """The process environment without pip/uv configuration that would leak into tools."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PIP_", "UV_", "ENVLOCK_", "VIRTUAL_ENV", "CONDA_"))}
    env["PIP_CONFIG_FILE"] = os.devnull
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env["PIP_NO_INPUT"] = "1"
    env.update(extra or {})
    return env


@dataclass(frozen=True)
class TorchWorld:
    server: IndexServer
    directory: Path

    @property
    def pypi_url(self) -> str:
        return self.server.url("pypi")

    @property
    def pytorch_base(self) -> str:
        """What ``--pytorch-index-url`` takes: the base under which ``/cu121`` lives."""
        return f"{self.server.base}/whl"

    @property
    def cu121_url(self) -> str:
        return self.server.url("cu121")

    def resolve(self, output: Path, *args: str, cache: Optional[Path] = None) -> Path:
        """Run ``envlock resolve --torch ==2.5.1 ARGS`` against this world; return ``output``."""
        env = clean_env({"ENVLOCK_CACHE_DIR": str(cache or self.directory / "cache")})
        cmd = [sys.executable, "-m", "envlock", "resolve", "--torch", f"=={TORCH}",
               "--index-url", self.pypi_url, "--pytorch-index-url", self.pytorch_base,
               *args, "-o", Path(output).name]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120,
                              cwd=str(Path(output).parent))
        if proc.returncode != 0:
            raise RuntimeError(f"envlock resolve failed ({proc.returncode}):\n{proc.stderr}")
        return Path(output)


@contextmanager
def torch_world(directory: Path) -> Iterator[TorchWorld]:
    """Serve the world from a fresh loopback server for the life of the context."""
    with IndexServer() as server:
        populate(server, Path(directory))
        yield TorchWorld(server, Path(directory))
