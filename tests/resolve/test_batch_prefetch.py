"""Walking back through a project's versions asks for their metadata in batches
(closure.Finder._batch_prefetch), and never without a walk back."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest
from support.index_server import IndexServer
from support.torch_world import add_package, add_torch_release, resolve


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IndexServer]:
    tmp = tmp_path_factory.mktemp("batch")
    with IndexServer() as srv:
        pypi = srv.add_index("pypi")
        add_torch_release(pypi, tmp, "2.5.1")
        # lib 5..20 need dep>=2, which does not exist: the resolver walks back to lib 4
        for v in range(1, 21):
            add_package(pypi, tmp, "lib", str(v), requires=["dep>=2"] if v >= 5 else ["dep"])
        add_package(pypi, tmp, "dep", "1")
        add_package(pypi, tmp, "solo", "1")
        add_package(pypi, tmp, "solo", "2")
        yield srv


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "cache"
    monkeypatch.setenv("ENVLOCK_CACHE_DIR", str(d))
    monkeypatch.setenv("ENVLOCK_NO_REPLAY", "1")
    return d


def _metadata_asked(world: IndexServer, project: str) -> set:
    return {p.rsplit("/", 1)[-1].split("-")[1] for p in world.requests(f"/{project}-")
            if p.endswith(".metadata")}


def test_a_walk_back_asks_ahead_for_older_versions(world: IndexServer, cache: Path,
                                                  tmp_path: Path) -> None:
    r = resolve(world, "--gpu", "H100 SXM", "--torch", "==2.5.1", "lib",
                "-o", str(tmp_path / "a.lock"))
    assert r.code == 0, r.err
    assert 'name = "lib"\nversion = "4"' in (tmp_path / "a.lock").read_text()
    asked = _metadata_asked(world, "lib")
    # every version tried, and versions below the answer, asked ahead of the walk
    assert {str(v) for v in range(4, 21)} <= asked
    assert asked & {"1", "2", "3"}


def test_no_walk_back_asks_for_nothing_ahead(world: IndexServer, cache: Path,
                                             tmp_path: Path) -> None:
    r = resolve(world, "--gpu", "H100 SXM", "--torch", "==2.5.1", "solo",
                "-o", str(tmp_path / "b.lock"))
    assert r.code == 0, r.err
    assert _metadata_asked(world, "solo") == {"2"}
