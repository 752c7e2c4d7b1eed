"""torch chosen jointly with the requirements' whole closure (issue 14): a constraint on
torch or a companion two levels down narrows the build as one in a direct requirement does,
and the errors name the chain that led to it. Against a real PEP 503 index on 127.0.0.1.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.cli import run_cli
from support.index_server import IndexServer
from support.torch_world import add_cpython_package, add_package, add_torch_release

from envlock import _toml


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("jointworld")
    with IndexServer() as srv:
        pypi = srv.add_index("pypi")
        done: dict = {}
        for release in ("2.5.1", "2.4.0"):
            add_torch_release(pypi, tmp, release, done=done)
        add_package(pypi, tmp, "helper", "1.2")
        # app (one version) -> lib==1.0 -> torch==2.4.0: every link forced
        add_package(pypi, tmp, "lib", "1.0", ["torch==2.4.0", "helper"])
        add_package(pypi, tmp, "app", "1.0", ["lib==1.0"])
        # the newest "newer" reaches torch 2.4.0 through lib; its older version needs no torch
        add_package(pypi, tmp, "newer", "1.0", ["helper"])
        add_package(pypi, tmp, "newer", "2.0", ["lib>=1.0"])
        # both versions of "twice" need lib==1.0: not forced by the walk, yet unavoidable
        add_package(pypi, tmp, "twice", "1.0", ["lib==1.0"])
        add_package(pypi, tmp, "twice", "2.0", ["lib==1.0"])
        # an extra leads to lib; a Windows-only dependency's torch pin is not for this target
        add_package(pypi, tmp, "winonly", "1.0", ["torch==2.4.0"])
        add_package(pypi, tmp, "extrapp", "1.0",
                    ["helper", "lib==1.0; extra == 'gpu'",
                     "winonly; sys_platform == 'win32'"])
        # tvapp -> tvlib -> torchvision==0.19.0, which the matrix pairs with torch 2.4.0
        add_package(pypi, tmp, "tvlib", "1.0", ["torchvision==0.19.0"])
        add_package(pypi, tmp, "tvapp", "1.0", ["tvlib"])
        add_cpython_package(pypi, tmp, "torchvision", "0.19.0", ["torch==2.4.0"])
        # every version of "ncclfan" needs an NCCL that torch 2.4.0's own pin rules out: a
        # conflict the torch walk cannot see (it follows torch and its companions only)
        add_package(pypi, tmp, "ncclfan", "1.0", ["nvidia-nccl-cu12>=2.21"])
        add_package(pypi, tmp, "ncclfan", "2.0", ["nvidia-nccl-cu12>=2.21"])
        # deep0 -> deep1 -> deep2 -> deep3 -> torch==2.4.0: four projects before the pin
        for i in range(4):
            add_package(pypi, tmp, f"deep{i}", "1.0",
                        [f"deep{i + 1}==1.0" if i < 3 else "torch==2.4.0"])
        yield srv


def resolve(world: IndexServer, *args: str):
    return run_cli("resolve", "--index-url", world.url("pypi"),
                   "--pytorch-index-url", f"{world.base}/pytorch", *args)


def target(path: Path) -> dict:
    return _toml.loads(path.read_text())["target"][0]


def versions(path: Path) -> dict:
    return {p["name"]: p["version"] for p in target(path)["package"]}


def test_a_torch_pin_two_levels_down_chooses_the_release(world: IndexServer, tmp_path: Path,
                                                         cache: Path) -> None:
    out = tmp_path / "l.lock"
    r = resolve(world, "--gpu", "H100 SXM", "--cuda", "12.1", "app", "-o", str(out))
    assert r.code == 0, r.err
    v = versions(out)
    assert (v["torch"], v["app"], v["lib"]) == ("2.4.0", "1.0", "1.0")
    lines = target(out)["decision"]
    assert any("app==1.0 -> lib==1.0 requires torch==2.4.0" in x for x in lines), lines
    # the user asked for no torch version: no line may say one was requested
    assert not any("torch==2.4.0 (requested)" in x for x in lines)


def test_the_newest_path_decides_as_the_resolver_tries_it(world: IndexServer, tmp_path: Path,
                                                          cache: Path) -> None:
    # newer 2.0 (newest) -> lib -> torch==2.4.0: 2.4.0 is chosen and newer 2.0 locked, as
    # uv picks them; the older newer 1.0 would have allowed 2.5.1 but is not preferred
    out = tmp_path / "l.lock"
    r = resolve(world, "--gpu", "H100 SXM", "--cuda", "12.1", "newer", "-o", str(out))
    assert r.code == 0, r.err
    v = versions(out)
    assert (v["torch"], v["newer"], v["lib"]) == ("2.4.0", "2.0", "1.0")


def test_an_unforced_deep_need_gives_way_to_torch_option(world: IndexServer, tmp_path: Path,
                                                         cache: Path) -> None:
    # with --torch 2.5.1 the chain through newer 2.0 cannot hold, but newer 1.0 exists:
    # the resolver backtracks to it (no error)
    out = tmp_path / "l.lock"
    r = resolve(world, "--gpu", "H100 SXM", "--torch", "==2.5.1", "newer", "-o", str(out))
    assert r.code == 0, r.err
    v = versions(out)
    assert v["torch"] == "2.5.1" and v["newer"] == "1.0" and "lib" not in v
    lines = target(out)["decision"]
    assert any(x.startswith("torch not narrowed by the requirements' newest versions")
               and "newer==2.0 -> lib==1.0 requires torch==2.4.0" in x for x in lines), lines


def test_a_closure_that_fails_on_the_newest_paths_build_is_tried_again_without_it(
        world: IndexServer, tmp_path: Path, cache: Path) -> None:
    # the newest "newer" narrows torch to 2.4.0, but ncclfan cannot live with 2.4.0's NCCL;
    # that need was not forced (newer 1.0 needs no torch), so the build is chosen again
    # without it, and the resolver backtracks newer to 1.0
    out = tmp_path / "l.lock"
    r = resolve(world, "--gpu", "H100 SXM", "--torch", ">=2.4,<2.6", "newer", "ncclfan",
                "-o", str(out))
    assert r.code == 0, r.err
    v = versions(out)
    assert (v["torch"], v["newer"], v["ncclfan"]) == ("2.5.1", "1.0", "2.0")
    assert "lib" not in v
    lines = target(out)["decision"]
    assert any(x.startswith("torch first narrowed by the requirements' newest versions")
               and "newer==2.0 -> lib==1.0 requires torch==2.4.0" in x
               and "nvidia-nccl-cu12" in x for x in lines), lines


def test_a_conflict_on_every_build_is_still_a_conflict(world: IndexServer, tmp_path: Path,
                                                       cache: Path) -> None:
    # app forces torch 2.4.0 (one version all the way down), ncclfan rules it out: no second
    # try can help, and the error is the closure's own
    r = resolve(world, "--gpu", "H100 SXM", "--torch", ">=2.4,<2.6", "app", "ncclfan",
                "--dry-run")
    assert r.code == 6, (r.code, r.err)
    assert "nvidia-nccl-cu12" in r.err


def _walk(world: IndexServer, cache: Path, limit: int):
    from packaging.requirements import Requirement

    from envlock.index import IndexClient, IndexConfig
    from envlock.platforms import Target
    from envlock.resolve.closure import Finder
    from envlock.resolve.sources import SourcePolicy
    from envlock.resolve.torch_needs import torch_needs

    config = IndexConfig(index_url=world.url("pypi"), retries=0, timeout=10)
    target = Target(python="3.11", platform="linux_x86_64")
    with IndexClient(config, cache_dir=cache) as client:
        finder = Finder(client, SourcePolicy(config, config.index_url), target)
        return torch_needs(finder, [Requirement("deep0")], target.markers, limit=limit)


@pytest.mark.parametrize("limit, found", [(3, False), (4, True), (3000, True)])
def test_the_walk_says_when_its_bound_left_projects_unread(
        world: IndexServer, cache: Path, limit: int, found: bool) -> None:
    # the pin sits in the fourth project: a bound of 3 stops the walk before it, and the
    # walk says so (the constraint is unknown, not absent); with 4 or more it is found
    walk = _walk(world, cache, limit)
    assert ([str(n) for n in walk.needs] ==
            ["deep0==1.0 -> deep1==1.0 -> deep2==1.0 -> deep3==1.0 requires torch==2.4.0"]) \
        == found
    if found:
        assert walk.stopped_after is None and walk.note is None
    else:
        assert walk.stopped_after == 3
        assert walk.note is not None and "first 3 projects" in walk.note


@pytest.mark.parametrize("req, torch", [("extrapp[gpu]", "2.4.0"), ("extrapp", "2.5.1")])
def test_extras_and_markers_decide_which_deep_pins_count(
        world: IndexServer, tmp_path: Path, cache: Path, req: str, torch: str) -> None:
    # the extra pulls lib (torch==2.4.0); without it the newest allowed torch stays, and the
    # win32-only dependency's pin never counts on Linux
    out = tmp_path / "l.lock"
    r = resolve(world, "--gpu", "H100 SXM", "--torch", ">=2.4,<2.6",
                "--cuda", "12.1" if torch == "2.4.0" else "12.4", req, "-o", str(out))
    assert r.code == 0, r.err
    v = versions(out)
    assert v["torch"] == torch and "winonly" not in v
    assert ("lib" in v) == (torch == "2.4.0")


def test_a_torchvision_pin_two_levels_down_maps_to_its_torch(
        world: IndexServer, tmp_path: Path, cache: Path) -> None:
    out = tmp_path / "l.lock"
    r = resolve(world, "--gpu", "H100 SXM", "--cuda", "12.1", "tvapp", "-o", str(out))
    assert r.code == 0, r.err
    v = versions(out)
    assert (v["torch"], v["torchvision"], v["tvlib"]) == ("2.4.0", "0.19.0", "1.0")
    lines = target(out)["decision"]
    assert any("tvapp==1.0 -> tvlib==1.0 requires torchvision==0.19.0" in x for x in lines)


def test_a_forced_deep_need_against_the_hardware_names_chain_and_reason(
        world: IndexServer, tmp_path: Path, cache: Path) -> None:
    # RTX 5090 (sm_120) needs torch >= 2.7; app's only version leads to torch==2.4.0
    out = tmp_path / "l.lock"
    r = resolve(world, "--gpu", "RTX 5090", "app", "-o", str(out))
    assert r.code == 3, (r.code, r.err)
    assert "app==1.0 -> lib==1.0 requires torch==2.4.0" in r.err
    assert "sm_120" in r.err
    assert not out.exists()


def test_a_forced_deep_need_against_torch_option_is_a_conflict(
        world: IndexServer, tmp_path: Path, cache: Path) -> None:
    r = resolve(world, "--gpu", "H100 SXM", "--torch", "==2.5.1", "app", "--dry-run")
    assert r.code == 6, (r.code, r.err)
    assert "torch==2.5.1 (requested)" in r.err
    assert "app==1.0 -> lib==1.0 requires torch==2.4.0" in r.err


def test_a_closure_conflict_never_calls_the_hardware_build_requested(
        world: IndexServer, tmp_path: Path, cache: Path) -> None:
    # every version of "twice" needs torch 2.4.0, but it has two, so the walk cannot know
    # that no older one relaxes it: the build is chosen for the hardware and --torch, and
    # the resolver meets the conflict; the build is named as the hardware's choice
    r = resolve(world, "--gpu", "H100 SXM", "--torch", ">=2.5,<2.6", "twice", "--dry-run")
    assert r.code == 6, (r.code, r.err)
    assert "torch==2.4.0 (required by lib==1.0)" in r.err
    assert "torch==2.5.1 (the build chosen for the hardware)" in r.err
    assert "(requested)" not in r.err
    # and says what the walk found: the chain no allowed build satisfies
    assert "newest versions need twice==2.0 -> lib==1.0 requires torch==2.4.0" in r.err


# -- against the real PyPI ---------------------------------------------------------------------

def _pypi_reachable() -> bool:
    import urllib.request

    try:
        urllib.request.urlopen("https://pypi.org/simple/pip/", timeout=8).read(64)
        return True
    except Exception:  # noqa: BLE001
        return False


@pytest.mark.online
def test_vllm_0_6_3_narrows_through_its_xformers_pin(tmp_path: Path, cache: Path) -> None:
    # a real two-level chain: vllm 0.6.3 requires xformers==0.0.27.post2 (Linux x86_64),
    # whose own metadata requires torch==2.4.0; both are read before the build is chosen
    if not _pypi_reachable():
        pytest.skip("PyPI is unreachable")
    out = tmp_path / "l.lock"
    r = run_cli("resolve", "--gpu", "H100 SXM", "--python", "3.11", "--platform",
                "linux_x86_64", "--index-url", "https://pypi.org/simple", "vllm==0.6.3",
                "-o", str(out))
    assert r.code == 0, r.err
    v = versions(out)
    assert v["torch"].split("+")[0] == "2.4.0" and v["xformers"] == "0.0.27.post2"
    lines = target(out)["decision"]
    assert any("vllm==0.6.3 -> xformers==0.0.27.post2 requires torch==2.4.0" in x
               for x in lines), lines
    assert not any("torch==2.4.0 (requested)" in x for x in lines)
