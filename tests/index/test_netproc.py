"""The network helper process (envlock.index.netproc) answers as the in-process transport
does: the same locks, the same errors, the same cache entries and replay record; a helper
that dies or is closed never loses a request nor keeps one waiting.

Everything runs against the loopback index server with a real helper process (the same
``sys.executable``); ``ENVLOCK_NET_HELPER=1`` starts one for a plain-HTTP index, which
``envlock resolve`` would otherwise read in-process.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
from pathlib import Path
from typing import Iterator, Optional

import pytest
from support.index_server import IndexServer, make_wheel
from support.torch_world import add_package, add_torch_release, resolve

from envlock import replay
from envlock.errors import EnvlockError, IndexError_
from envlock.index.config import IndexConfig
from envlock.index.fit import TripleFit
from envlock.index.http import Transport
from envlock.index.json_narrow import narrowed_json
from envlock.index.netproc import Helper
from envlock.platforms import Target

JSON = {"Accept": "application/vnd.pypi.simple.v1+json"}
FIT = TripleFit(str(t) for t in Target(python="3.11", platform="linux_x86_64",
                                       glibc="2.28").tags)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IndexServer]:
    tmp = tmp_path_factory.mktemp("netproc")
    with IndexServer() as srv:
        pypi = srv.add_index("pypi")
        add_torch_release(pypi, tmp, "2.5.1")
        add_package(pypi, tmp, "helper", "1.2", requires=["tail>=1"])
        add_package(pypi, tmp, "tail", "1.0")
        # a page the cut narrows: wheels for other machines around one that fits
        for tag in ("cp311-cp311-win_amd64", "cp311-cp311-manylinux_2_17_x86_64",
                    "cp312-cp312-macosx_11_0_arm64", "cp311-cp311-musllinux_1_2_aarch64"):
            pypi.add(make_wheel(tmp / tag, "wide", "1.0", tag=tag))
        pypi.add(make_wheel(tmp / "any", "wide", "0.9"))
        yield srv


def _pair(world: IndexServer, cache: Optional[Path] = None,
          index: str = "") -> tuple:
    """A transport whose requests go to a fresh helper, and the helper."""
    config = IndexConfig(index_url=index or world.url("pypi"))
    helper = Helper.spawn(config, cache)
    assert helper is not None
    transport = Transport(config, cache)
    helper.attach(transport)
    transport.remote = helper
    return transport, helper


class _Gate:
    """An IndexServer gate that says when a request reached it."""

    def __init__(self) -> None:
        self.arrived = threading.Event()
        self.open = threading.Event()

    def wait(self, timeout: float) -> bool:
        self.arrived.set()
        return self.open.wait(timeout)


def _lock_body(path: Path) -> str:
    return "\n".join(line for line in path.read_text().splitlines()
                     if not line.startswith("#"))


def test_a_resolve_through_the_helper_locks_what_one_without_does(
        world: IndexServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENVLOCK_DEBUG", "1")
    locks = {}
    for mode in ("0", "1"):
        (tmp_path / mode).mkdir()
        monkeypatch.chdir(tmp_path / mode)
        monkeypatch.setenv("ENVLOCK_NET_HELPER", mode)
        monkeypatch.setenv("ENVLOCK_CACHE_DIR", str(tmp_path / mode / "cache"))
        r = resolve(world, "--gpu", "H100 SXM", "--torch", "==2.5.1", "helper", "wide",
                    "-o", "out.lock")
        assert r.code == 0, r.err
        # the helper said what it used: it ran, and only when asked to
        assert ("in the network helper" in r.err) == (mode == "1"), r.err
        locks[mode] = _lock_body(tmp_path / mode / "out.lock")
    assert locks["0"] == locks["1"]
    assert 'name = "tail"' in locks["1"] and 'name = "wide"' in locks["1"]


def test_a_resolve_through_the_helper_is_replayed(world: IndexServer, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """What the helper's transport read and wrote reaches the replay record: the second
    run, with the metadata and parsed pages gone from the cache, asks the index nothing."""
    cache = tmp_path / "cache"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ENVLOCK_NET_HELPER", "1")
    monkeypatch.setenv("ENVLOCK_CACHE_DIR", str(cache))
    monkeypatch.delenv("ENVLOCK_NO_REPLAY", raising=False)
    args = ("--gpu", "H100 SXM", "--torch", "==2.5.1", "helper", "-o", "a.lock")
    first = resolve(world, *args)
    assert first.code == 0, first.err
    records = list((cache / "replay").rglob("*.json"))
    assert len(records) == 1
    entries = json.loads(records[0].read_text())["entries"]
    assert any(p.startswith(str(cache / "http")) for p in entries), entries
    for sub in ("metadata", "pages"):
        shutil.rmtree(cache / sub, ignore_errors=True)
    before = len(world.requests())
    again = resolve(world, *args)
    assert (again.code, again.out) == (first.code, first.out)
    assert len(world.requests()) == before


def test_a_page_cut_by_the_helper_is_the_page_cut_here(world: IndexServer,
                                                       tmp_path: Path) -> None:
    transport, helper = _pair(world, tmp_path / "cache")
    try:
        url = world.url("pypi") + "/wide/"
        answer = transport.remote_page(url, JSON, FIT)
        assert answer is not None and not answer.cached and answer.cut is not None
        plain = Transport(IndexConfig(index_url=world.url("pypi")), None)
        body = plain.get(url, headers=JSON).body
        assert answer.cut == narrowed_json(body, FIT)
        names = sorted(f["filename"] for f in json.loads(answer.cut[0])["files"])
        assert names == ["wide-0.9-py3-none-any.whl",
                         "wide-1.0-cp311-cp311-manylinux_2_17_x86_64.whl"]
        assert answer.cut[1] == 5
        # the whole page is in the cache, as the in-process transport keeps it
        cached = Transport(IndexConfig(index_url=world.url("pypi")), tmp_path / "cache")
        hit = cached.get(url, headers=JSON)
        assert hit.from_cache and hit.body == body
        # without targets (before the resolve knows them) the whole page comes back
        whole = transport.remote_page(world.url("pypi") + "/tail/", JSON, None)
        assert whole is not None and whole.cut is None
        assert json.loads(whole.body)["files"][0]["filename"] == "tail-1.0-py3-none-any.whl"
    finally:
        transport.cancel()


def test_statistics_and_replay_notes_come_back(world: IndexServer, tmp_path: Path) -> None:
    rec = replay.Recorder()
    replay.record_into(rec)
    transport, helper = _pair(world, tmp_path / "cache")
    try:
        transport.remote_page(world.url("pypi") + "/tail/", JSON, FIT)
        r = transport.get_range(f"{world.base}/files/pypi/tail-1.0-py3-none-any.whl", 0, 9)
        assert r.status == 206 and len(r.body) == 10
        assert transport.stats["requests"] == 2 and transport.stats["bytes"] > 10
        paths = transport._paths(world.url("pypi") + "/tail/")
        assert paths is not None and {str(p) for p in paths} <= set(rec.entries)
    finally:
        replay.record_into(None)
        transport.cancel()


@pytest.mark.parametrize("case", ["missing", "failing", "unreachable"])
def test_errors_from_the_helper_are_the_ones_made_here(world: IndexServer, tmp_path: Path,
                                                       case: str) -> None:
    base = world.url("pypi")
    if case == "unreachable":
        import socket

        with socket.socket() as s:  # a port nobody listens on
            s.bind(("127.0.0.1", 0))
            base = f"http://127.0.0.1:{s.getsockname()[1]}/simple"
    url = f"{base}/{'failing' if case == 'failing' else 'no-such-project'}/"
    errors = []
    for remote in (False, True):
        if case == "failing":
            world.fail["/failing/"] = 100
        if remote:
            transport, _ = _pair(world, index=base)
        else:
            transport = Transport(IndexConfig(index_url=base), None)
        transport.backoff = 0.0
        try:
            with pytest.raises(EnvlockError) as exc:
                if remote:
                    transport.remote_page(url, JSON, None)
                else:
                    transport.get(url, headers=JSON)
            errors.append((type(exc.value), exc.value.message, exc.value.hint))
        finally:
            transport.cancel()
            world.fail.pop("/failing/", None)
    assert errors[0] == errors[1]
    assert errors[0][0] is IndexError_


def test_a_dead_helper_leaves_its_requests_to_this_process(world: IndexServer,
                                                            tmp_path: Path) -> None:
    gate = _Gate()
    world.gates["/tail/"] = gate  # type: ignore[assignment]
    transport, helper = _pair(world)
    got: list = []
    worker = threading.Thread(target=lambda: got.append(
        transport.get(world.url("pypi") + "/tail/", headers=JSON)))
    try:
        worker.start()
        assert gate.arrived.wait(30)
        helper._proc.kill()  # the helper dies with the request in flight
        helper._reader.join(30)
        assert not helper.alive
        gate.open.set()  # the request, asked again here, is answered
        worker.join(30)
        assert not worker.is_alive()
        assert got and got[0].status == 200 and b"tail-1.0" in got[0].body
        assert transport.remote is None  # and everything after is asked here
        r = transport.get(world.url("pypi") + "/helper/", headers=JSON)
        assert b"helper-1.2" in r.body
    finally:
        gate.open.set()
        world.gates.pop("/tail/", None)
        transport.cancel()


def test_closing_ends_the_requests_in_flight_and_the_helper(world: IndexServer) -> None:
    gate = _Gate()
    world.gates["/tail/"] = gate  # type: ignore[assignment]
    transport, helper = _pair(world)
    outcome: list = []

    def ask() -> None:
        try:
            transport.get(world.url("pypi") + "/tail/", headers=JSON)
            outcome.append("answered")
        except KeyboardInterrupt:
            outcome.append("interrupted")

    worker = threading.Thread(target=ask)
    try:
        worker.start()
        assert gate.arrived.wait(30)
        transport.cancel()  # Ctrl-C, or the resolve is over
        worker.join(30)
        assert outcome == ["interrupted"]
        assert helper._proc.wait(30) == 0  # the helper left, its request cancelled
        helper._reader.join(30)
        assert helper.usage is not None and helper.usage[0] > 0
        with pytest.raises(KeyboardInterrupt):
            transport.get(world.url("pypi") + "/helper/", headers=JSON)
    finally:
        gate.open.set()
        world.gates.pop("/tail/", None)


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads /proc")
def test_credentials_reach_the_index_but_not_the_helpers_command_line(
        world: IndexServer) -> None:
    world.auth = ("alice", "s3cret-pw")
    try:
        base = world.url("pypi").replace("http://", "http://alice:s3cret-pw@")
        transport, helper = _pair(world, index=base)
        try:
            with open(f"/proc/{helper._proc.pid}/cmdline", "rb") as fh:
                assert b"s3cret" not in fh.read()
            answer = transport.remote_page(base + "/tail/", JSON, None)
            assert answer is not None and b"tail-1.0" in answer.body
            assert world.seen_auth[-1][1] is not None
        finally:
            transport.cancel()
    finally:
        world.auth = None


def test_the_cut_rule_is_the_tag_set() -> None:
    """TripleFit, built from the tags' text (what the helper is sent), keeps a wheel
    exactly when one of its tags is the target's."""
    from packaging.tags import parse_tag

    target = Target(python="3.11", platform="linux_x86_64", glibc="2.28")
    tags = {str(t) for t in target.tags}
    for triple in ("cp311-cp311-manylinux_2_17_x86_64", "py3-none-any",
                   "cp311-abi3-manylinux2014_x86_64", "cp312-cp312-manylinux_2_17_x86_64",
                   "cp311-cp311-win_amd64", "py2.py3-none-any",
                   "cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64",
                   "cp311-cp311-manylinux_2_34_x86_64", "cp311-cp311-musllinux_1_1_x86_64",
                   "pp310-pypy310_pp73-manylinux_2_17_x86_64", "cp36-abi3-linux_x86_64"):
        want = any(str(t) in tags for t in parse_tag(triple))
        assert FIT(f"-{triple}.whl") == want, triple


def test_the_helper_is_given_every_setting_of_the_configuration() -> None:
    """Each IndexConfig field crosses as a plain value and is rebuilt equal, the origin of
    each setting (what error messages name) included."""
    import dataclasses
    import marshal

    from envlock.index.netproc import _config_from, _plain_config

    config = IndexConfig(index_url="https://u:p@idx.example/simple",
                         extra_index_urls=("https://x.example/simple",),
                         find_links=("/wheels",), cert="/ca.pem", client_cert="/me.pem",
                         trusted_hosts=("x.example",), timeout=7.5, retries=1,
                         origin={"cert": "$PIP_CERT", "index-url": "--index-url"})
    sent = marshal.loads(marshal.dumps(_plain_config(config)))
    rebuilt = _config_from(sent)
    for f in dataclasses.fields(IndexConfig):
        assert getattr(rebuilt, f.name) == getattr(config, f.name), f.name
