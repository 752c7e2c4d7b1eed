"""The exchange's own guarantees, without processes: what a peer's bytes can and cannot do
to the reader (caps, depth, schema, protocol), and deadlines over a real c10d store."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
import time
import zlib

import pytest

from envlock.exchange import BadValue, Limits, OtherVersion, Store, decode, encode, gather
from envlock.exchange.schema import Choice, ListOf, MapOf, OneOf, Record

P = "test/1"
SPEC = Record({"n": int, "tags": ListOf(str, 3)}, {"kind": Choice(("a", "b")),
                                                   "m": MapOf(OneOf(int, None))})


def _raw(obj) -> bytes:
    return zlib.compress(json.dumps(obj).encode())


def _bad(raw: bytes, spec=SPEC, limits: Limits = Limits()) -> str:
    with pytest.raises(BadValue) as info:
        decode(raw, P, spec, limits)
    return str(info.value)


def test_a_value_round_trips() -> None:
    data = {"n": 3, "tags": ["x"], "kind": "a", "m": {"k": None}, "extra": [1]}
    assert decode(encode(P, data), P, SPEC) == data


@pytest.mark.parametrize("data, message", [
    ({"tags": []}, "the value: no key 'n'"),
    ({"n": True, "tags": []}, "'n': expected an integer, got bool"),
    ({"n": 1, "tags": [1]}, "'tags[0]': expected a string, got int"),
    ({"n": 1, "tags": ["a"] * 4}, "'tags': 4 items, more than 3"),
    ({"n": 1, "tags": [], "kind": "c"}, "'kind': 'c' is not one of a, b"),
    ({"n": 1, "tags": [], "m": {"k": "v"}}, "'m.k': unexpected str"),
    ([1, 2], "the value: expected an object, got list"),
])
def test_a_value_that_does_not_fit_its_schema_says_where(data, message) -> None:
    assert _bad(encode(P, data)) == message


def test_what_is_not_an_envlock_value() -> None:
    class Evil:
        def __reduce__(self):
            return (print, ("ran",))

    assert _bad(pickle.dumps(Evil())).startswith("not an envlock value (not zlib data")
    assert _bad(b"garbage").startswith("not an envlock value (not zlib data")
    assert _bad(zlib.compress(b"\xff\xfe")) == "not UTF-8 text"
    assert _bad(zlib.compress(b"{")).startswith("not JSON")
    assert _bad(_raw({"data": 1})) == "not an envlock value (no envelope)"
    assert _bad(zlib.compress(b'{"envlock":"test/1","data":NaN}')).startswith("not JSON")
    assert _bad(encode(P, {"n": 1, "tags": []})[:-3]) == \
        "not an envlock value (truncated zlib data)"
    assert _bad(encode(P, {"n": 1, "tags": []}) + b"x") == \
        "not an envlock value (bytes after the zlib data)"


def test_another_protocol_is_another_version() -> None:
    with pytest.raises(OtherVersion, match=r"speaks 'test/0', not 'test/1': another envlock "
                                           r"version \(0\.0\.1; this is "):
        decode(_raw({"envlock": "test/0", "version": "0.0.1", "data": {}}), P)


def test_nesting_is_refused_deep_or_very_deep() -> None:
    limits = Limits(depth=5)
    assert _bad(encode(P, [[[[[[1]]]]]]), None, limits) == "JSON nested deeper than 5 levels"
    deep = ('{"envlock":"test/1","data":' + "[" * 100000 + "]" * 100000 + "}").encode()
    assert _bad(zlib.compress(deep), None, Limits(decompressed=1 << 20)) == \
        "JSON nested deeper than 12 levels"  # a RecursionError inside json is a bad value


def test_size_caps_come_before_and_after_decompression() -> None:
    assert _bad(b"x" * 300, None, Limits(compressed=200)) == "300 bytes, more than the 200 allowed"
    bomb = zlib.compress(bytes(50 << 20), 9)  # 50 MB of zeros in about 50 KB
    assert _bad(bomb, None, Limits(decompressed=1 << 20)) == \
        "expands past the 1,048,576 bytes allowed"


def test_a_bomb_under_the_compressed_cap_costs_little_memory() -> None:
    """1 MB of zlib that expands to about 1 GB: decoding it stays within a few MB."""
    code = """
import resource, zlib
from envlock.exchange import BadValue, Limits, decode
raw = zlib.compressobj(9, zlib.DEFLATED, -15)
chunk = raw.compress(bytes(1 << 20)) + raw.flush(zlib.Z_FULL_FLUSH)
bomb = b"\\x78\\xda" + chunk * ((1 << 20) // len(chunk))
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    decode(bomb, "test/1", None, Limits(compressed=2 << 20, decompressed=4 << 20))
except BadValue as exc:
    print(exc)
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split("\n")
    assert out[0] == "expands past the 4,194,304 bytes allowed"
    assert int(out[1]) < 50 * 1024  # KiB


@pytest.mark.torch
def test_gather_names_missing_and_bad_peers_at_the_deadline() -> None:
    dist = pytest.importorskip("torch.distributed")
    from datetime import timedelta

    tcp = dist.TCPStore("127.0.0.1", 0, None, True, timedelta(seconds=30),
                        wait_for_workers=False)
    store = Store(dist.PrefixStore("t", tcp), "t")
    store.set("k/1", b"garbage")
    store.set("k/2", encode(P, {"n": 2, "tags": []}))
    start = time.monotonic()
    peers = gather(store, "k", 0, 4, encode(P, {"n": 0, "tags": []}),
                   lambda raw: decode(raw, P, SPEC), time.monotonic() + 0.5)
    assert time.monotonic() - start < 10
    assert [(p.rank, p.kind) for p in peers] == [(0, "ok"), (1, "bad"), (2, "ok"),
                                                 (3, "missing")]
    assert peers[2].value == {"n": 2, "tags": []}
    assert peers[1].problem.startswith("not an envlock value")
