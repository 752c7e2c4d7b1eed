"""Pages are kept narrowed to the files the run's targets can install
(ProjectPage.narrowed, IndexClient.narrow_pages), and narrowing never changes which
index has a project."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest
from support.index_server import IndexServer, make_wheel
from support.torch_world import add_package, add_torch_release, resolve

from envlock.index.pages import ProjectPage, triple_key

INDEX = "https://example.invalid/simple"


def _page(names: list) -> ProjectPage:
    rows = [[n, f"https://files.example/{i}/{n}", "a" * 64, None, None, None, None, None]
            for i, n in enumerate(names)]
    return ProjectPage("demo", INDEX, INDEX + "/demo/", rows=rows)


def test_narrowing_keeps_fitting_wheels_and_every_sdist() -> None:
    names = ["demo-1.0.tar.gz", "demo-1.0-cp311-cp311-win_amd64.whl",
             "demo-1.0-cp311-cp311-manylinux_2_17_x86_64.whl", "demo-1.0-py3-none-any.whl",
             "demo-1.0-cp312-cp312-manylinux_2_17_x86_64.whl"]
    page = _page(names)
    fits = {"-cp311-cp311-manylinux_2_17_x86_64.whl", "-py3-none-any.whl"}.__contains__
    narrow = page.narrowed(fits)
    assert list(narrow.filenames) == [names[0], names[2], names[3]]
    assert narrow.listed == page.listed == 5
    assert [d.filename for d in narrow.select_triples(fits)] == \
        [d.filename for d in page.select_triples(fits)]
    assert page.narrowed(lambda key: True) is page  # nothing to leave out
    assert list(page.narrowed(lambda key: False).filenames) == [names[0]]
    assert all(not triple_key(n) or fits(triple_key(n)) for n in narrow.filenames)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IndexServer]:
    tmp = tmp_path_factory.mktemp("narrow")
    with IndexServer() as srv:
        pypi = srv.add_index("pypi")
        add_torch_release(pypi, tmp, "2.5.1")
        # the first index has corp, for Windows only; an extra index has a squatter's corp
        pypi.add(make_wheel(tmp / "first", "corp", "1.0", tag="cp311-cp311-win_amd64"))
        extra = srv.add_index("extra")
        extra.add(make_wheel(tmp / "extra", "corp", "9.0"))
        yield srv


def test_an_index_whose_files_all_fit_other_machines_still_has_the_project(
        world: IndexServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first index lists corp (for Windows only): corp is that index's, and the extra
    index is never asked for it, narrowed pages or not."""
    monkeypatch.setenv("ENVLOCK_CACHE_DIR", str(tmp_path / "cache"))
    r = resolve(world, "--gpu", "H100 SXM", "--torch", "==2.5.1", "corp",
                "--extra-index-url", world.url("extra"), "-o", str(tmp_path / "c.lock"))
    assert r.code == 6, r.err
    assert "corp" in r.err and world.url("pypi") in r.err, r.err
    assert not world.requests("/extra/simple/corp")
    assert not (tmp_path / "c.lock").exists()
