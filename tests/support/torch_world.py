"""A miniature PyPI + PyTorch index world for resolver tests.

Small wheels with *real* metadata: the fake ``torch`` carries exactly the Requires-Dist
PyPI's wheel has (from ``torch-pypi.toml``), and every dependency it names exists with a
version that satisfies the pin. A "planted" index can carry higher-versioned ``torch`` and
``triton`` to prove they never win.
"""

from __future__ import annotations

from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from envlock.matrix import get_matrix
from envlock.platforms import marker_environment
from support.index_server import Index, make_wheel

__all__ = ["torch_requires", "satisfying_version", "add_torch_release", "add_package"]

TORCH_TAG = {"manylinux1_x86_64": "cp311-cp311-manylinux1_x86_64",
             "manylinux_2_28_x86_64": "cp311-cp311-manylinux_2_28_x86_64"}


def torch_requires(release: str, platform: str = "linux_x86_64") -> List[str]:
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


def add_torch_release(index: Index, tmp: Path, release: str, *, local: str = "",
                      requires: Optional[Iterable[str]] = None, python: str = "3.11",
                      platform: str = "linux_x86_64", deps_index: Optional[Index] = None,
                      done: Optional[Dict[str, str]] = None) -> Path:
    """Publish ``torch==release[+local]`` with its real pins, and every dependency."""
    reqs = list(requires) if requires is not None else torch_requires(release, platform)
    build = get_matrix().torch_releases[release].builds[platform]
    plat_tag = next((t for t in build.wheel_tags if t in TORCH_TAG), "manylinux1_x86_64")
    version = f"{release}+{local}" if local else release
    path = index.add(make_wheel(tmp / index.name, "torch", version, requires=reqs,
                                tag=TORCH_TAG.get(plat_tag, "cp311-cp311-manylinux1_x86_64")))
    env = dict(marker_environment(python, platform), extra="")
    target = deps_index or index
    done = {} if done is None else done
    for text in reqs:
        req = Requirement(text)
        if req.marker is not None and not req.marker.evaluate(env):
            continue
        name = req.name.lower()
        v = satisfying_version(req.specifier)
        if done.get(f"{name}=={v}"):
            continue
        done[f"{name}=={v}"] = v
        sub: List[str] = []
        if name == "sympy":
            sub = ["mpmath<1.4,>=1.1.0"]
            add_package(target, tmp, "mpmath", "1.3.0")
        if name == "jinja2":
            sub = ["MarkupSafe>=2.0"]
            add_package(target, tmp, "MarkupSafe", "3.0.2")
        tag = "cp311-cp311-manylinux_2_17_x86_64" if name == "triton" else "py3-none-any"
        add_package(target if name != "triton" else index, tmp, req.name, v, sub, tag=tag)
    return path
