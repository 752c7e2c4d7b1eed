"""Speculative metadata reads stay inside what was already asked of a project.

A dependency's bare ``nvidia-cublas-cu12`` or ``torch>=2.0`` names the newest release on its
own; when a root (``torch==2.5.1``) or an earlier pin (torch's ``==12.4.5.8``) already rules
that release out, reading its metadata is wasted work: on PyPI without PEP 658 files, a range
read of torch's 15,000-member zip. Measured on transformers+accelerate+datasets with
torch==2.5.1: three such reads (torch 2.15.0, cuBLAS 12.9, nvJitLink 12.9), none since.

Against a real PEP 503 index on 127.0.0.1. The second resolve reads pages from the cache,
so every prefetch runs in the resolving thread and the list of metadata asked for is the
same on every run.
"""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional, Tuple

import pytest
from packaging.specifiers import SpecifierSet
from support.index_server import IndexServer
from support.torch_world import add_package


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("prefetchworld")
    with IndexServer() as srv:
        pypi = srv.add_index("pypi")
        add_package(pypi, tmp, "big", "1.0")
        add_package(pypi, tmp, "big", "2.0")
        add_package(pypi, tmp, "lib", "1.0", ["big"])           # bare: newest alone
        # pinner's pin is read with lib, before lib's own bare "big" (torch and its pins,
        # then cuDNN's bare cuBLAS)
        add_package(pypi, tmp, "pinner", "1.0", ["big==1.0", "lib"])
        add_package(pypi, tmp, "app", "1.0", ["pinner"])
        add_package(pypi, tmp, "wide", "1.0", ["big>=2"])       # contradicts a root pin
        yield srv


def _metadata_asked(world: IndexServer, cache: Path, roots: List[str]
                    ) -> Tuple[List[str], Optional[Exception]]:
    """File names whose metadata a resolve of ``roots`` asked for, on a warm page cache,
    and the conflict it ended in (None: it resolved, with big 1.0)."""
    from envlock.errors import ConflictError
    from envlock.index import IndexClient, IndexConfig
    from envlock.platforms import Target
    from envlock.resolve.closure import Finder, Req, resolve_closure
    from envlock.resolve.sources import SourcePolicy

    config = IndexConfig(index_url=world.url("pypi"), retries=0, timeout=10)
    target = Target(python="3.11", platform="linux_x86_64")
    reqs = []
    for text in roots:
        name, _, spec = text.partition("==")
        reqs.append(Req(name, SpecifierSet(f"=={spec}" if spec else "")))
    asked: List[str] = []
    error: Optional[Exception] = None
    for _ in range(2):
        with IndexClient(config, cache_dir=cache) as client:
            finder = Finder(client, SourcePolicy(config, config.index_url), target)
            try:
                resolved = resolve_closure(finder, reqs, {})
                assert str(resolved.packages["big"].version) == "1.0"
            except ConflictError as exc:
                error = exc
            asked = sorted(url.rsplit("/", 1)[-1] for _, url, _ in list(client._meta))
    return asked, error


@pytest.mark.parametrize("roots", [["big==1.0", "lib"], ["app"]])
def test_a_bare_dependency_does_not_read_a_release_already_ruled_out(
        world: IndexServer, tmp_path: Path, roots: List[str]) -> None:
    asked, error = _metadata_asked(world, tmp_path / "cache", roots)
    assert error is None
    assert "big-1.0-py3-none-any.whl" in asked
    assert "big-2.0-py3-none-any.whl" not in asked, asked


def test_when_what_was_asked_before_rules_out_everything_the_requirement_decides(
        world: IndexServer, tmp_path: Path) -> None:
    # big==1.0 (root) and big>=2 (wide) leave nothing: the guess falls back to big>=2 alone,
    # as before, and the resolve reports the conflict it always did
    asked, error = _metadata_asked(world, tmp_path / "cache", ["big==1.0", "wide"])
    assert error is not None and "big" in str(error)
    assert "big-2.0-py3-none-any.whl" in asked, asked
