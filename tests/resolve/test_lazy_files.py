"""A candidate's files are made when first asked for (closure.Cand): the answer is the
one an eager list gave, made once however many ask, and the yanked rule (PEP 592: a
yanked version only for an exact pin) holds without making them."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator, List, Tuple

import pytest
from packaging.version import Version
from support.index_server import IndexServer, make_sdist, make_wheel
from support.torch_world import add_torch_release, resolve

from envlock.index.pages import Dist
from envlock.resolve.closure import Cand

INDEX = "https://example.invalid/simple"


def _files(*names: str, yanked: Tuple[str, ...] = ()) -> Tuple[Dist, ...]:
    return tuple(Dist(n, f"https://files.example/{n}", INDEX, {"sha256": "a" * 64},
                      yanked="bad" if n in yanked else None) for n in names)


def test_files_made_later_are_made_once_and_equal_the_eager_ones() -> None:
    made: List[int] = []
    files = _files("lib-1.0-py3-none-any.whl", "lib-1.0.tar.gz")

    def make() -> Tuple[Dist, ...]:
        made.append(1)
        return files

    lazy = Cand("lib", Version("1.0"), make, INDEX, any_yanked=False)
    eager = Cand("lib", Version("1.0"), files, INDEX)
    assert lazy.yanked is None and made == []  # no file is yanked: nothing made
    extra = lazy.with_extras(frozenset({"cli"}))
    assert extra.identifier == "lib[cli]" and str(extra) == "lib==1.0"
    assert extra.dists == files and lazy.best.filename == "lib-1.0-py3-none-any.whl"
    assert made == [1]  # one making for the candidate and its extras
    assert lazy == eager
    assert lazy != Cand("lib", Version("1.0"), files[1:], INDEX)
    assert extra != eager  # the extras count
    with pytest.raises(AttributeError):
        lazy.version = Version("2.0")  # type: ignore[misc]


def test_a_yanked_best_file_is_seen_when_some_file_is_yanked() -> None:
    files = _files("lib-2.0-py3-none-any.whl", "lib-2.0.tar.gz",
                   yanked=("lib-2.0-py3-none-any.whl",))
    assert Cand("lib", Version("2.0"), lambda: files, INDEX, any_yanked=True).yanked == "bad"
    assert Cand("lib", Version("2.0"), files, INDEX).yanked == "bad"  # (not said: asked)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IndexServer]:
    tmp = tmp_path_factory.mktemp("lazy")
    with IndexServer() as srv:
        pypi = srv.add_index("pypi")
        add_torch_release(pypi, tmp, "2.5.1")
        pypi.add(make_wheel(tmp, "lib", "1"))
        pypi.add(make_wheel(tmp, "lib", "2"), yanked="broken build")
        # 3: the wheel (the best file) is fine, its sdist was yanked
        pypi.add(make_wheel(tmp, "lib", "3"))
        pypi.add(make_sdist(tmp, "lib", "3", files={"setup.py": ""},
                            pkg_info="Metadata-Version: 2.1\nName: lib\nVersion: 3\n"),
                 yanked="")
        # old's newest release is yanked whole
        pypi.add(make_wheel(tmp, "old", "1"))
        pypi.add(make_wheel(tmp, "old", "2"), yanked="")
        yield srv


@pytest.mark.parametrize("ask, want", [
    (["lib"], {"lib": "3"}),
    (["lib<3"], {"lib": "1"}),  # 2 is yanked
    (["lib==2"], {"lib": "2"}),  # an exact pin takes a yanked version
    (["old"], {"old": "1"}),
    (["old==2", "lib"], {"old": "2", "lib": "3"}),
])
def test_yanked_versions_only_for_an_exact_pin(world: IndexServer, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch,
                                               ask: List[str], want: dict) -> None:
    monkeypatch.setenv("ENVLOCK_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "l.lock"
    r = resolve(world, "--gpu", "H100 SXM", "--torch", "==2.5.1", *ask, "-o", str(out))
    assert r.code == 0, r.err
    text = out.read_text()
    for name, version in want.items():
        assert f'name = "{name}"\nversion = "{version}"' in text, text
