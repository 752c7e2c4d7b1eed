"""Issue 18: hostile but *valid* locks and snapshots, driven through every exporter,
``verify`` and ``doctor``.

The mutation properties in :mod:`tests.security.test_properties` break documents at random,
so only a few percent of them get past validation. Here every document starts from a real
lock or snapshot of the suite and only gets values the validators accept: unicode, quotes,
backslashes, ``#``, ``;``, ``$``, backticks, spaces, very long strings, many packages, odd
but valid versions (epochs, local, pre, post, dev), URLs with odd paths and queries, and
optional fields left out. A small share (about one in twenty) is broken on purpose with a
control character, and must be refused in one line with exit 2.

Beyond "no exit 70, no traceback", each rendered file is read back the way its consumer
reads it: the requirements file by pip's own requirements parser (exactly the lock's
packages, versions and hashes, and no option but the lock's indexes), the constraints file
line by line, pylock and uv with tomllib, conda with PyYAML, and the Dockerfile instruction
by instruction (exactly the instructions envlock writes, whatever the lock holds).

``ENVLOCK_PROPERTY_EXAMPLES`` sets the number of cases (200 by default)::

    ENVLOCK_PROPERTY_EXAMPLES=2000 python -m pytest -q -p no:cacheprovider -s \
        tests/security/test_valid_properties.py
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shlex
from collections import Counter
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import pytest
from hypothesis import HealthCheck, Phase, event, given, settings
from hypothesis import strategies as st

from envlock._text import CONTROL
from tests.security import toml_text
from tests.security.cli_run import Result, assert_contract, run_cli
from tests.security.documents import FORMATS, LOCK, SNAPSHOT, tomllib
from tests.security.props import examples

#: the share of generated documents that must validate (the rest are broken on purpose)
MIN_VALID = 0.90

# no shrinking: a case runs eight commands, and shrinking a many-package lock took minutes;
# the failing document is printed whole instead
SETTINGS = settings(max_examples=examples(), deadline=None,
                    phases=[Phase.explicit, Phase.reuse, Phase.generate],
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                           HealthCheck.data_too_large,
                                           HealthCheck.function_scoped_fixture])

# -- hostile but valid values ---------------------------------------------------------------

#: pieces that mean something to a shell, pip, TOML, YAML, a Dockerfile or a terminal
_FRAGMENTS = ['"', "'", "\\", "\\\\", "#", " #", ";", "$", "${HOME}", "$(id)", "`id`", " ",
              "--index-url http://evil.example/simple", "-r /etc/passwd", " --hash=sha256:",
              "&&", "|", "<", ">", "*", "!", "{", "}", "[", "]", "[[", "=", ":", ": ", "- ",
              "---", "%0a", "%", "\u00e9", "\U0001f600", "\u00a0", "\u3000", "\ufeff",
              "\u202e", "\u200b", "\\n", "RUN", "ENV", "FROM", "'''", '"""', "x" * 3000]
_SAFE_CHAR = st.characters(blacklist_categories=("Cs", "Cc"),
                           blacklist_characters="\u2028\u2029")
_TEXT = st.lists(st.one_of(st.sampled_from(_FRAGMENTS), st.text(_SAFE_CHAR, max_size=8)),
                 max_size=6).map("".join)
_NONEMPTY = _TEXT.map(lambda s: s or "x")
#: no white space at all (URLs and file names in a lock must hold none)
_WORD = _TEXT.map(lambda s: "".join(c for c in s if not c.isspace()))
_HEX = st.text("0123456789abcdef", min_size=64, max_size=64)
_URL = st.builds(lambda scheme, host, path, query: f"{scheme}://{host}/{path}{query}",
                 st.sampled_from(["https", "http", "file"]),
                 st.sampled_from(["pypi.example.com", "127.0.0.1:8080", "[::1]:9",
                                  "m\u00fcnchen.example", "u@host.example"]),
                 _WORD, st.one_of(st.just(""), _WORD.map(lambda s: "?" + s),
                                  _WORD.map(lambda s: "#" + s)))


def _name_strategy() -> Any:
    alnum = st.sampled_from("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
    middle = st.text(st.sampled_from("abcXYZ019._-"), max_size=12)
    return st.one_of(alnum, st.builds(lambda a, m, b: a + m + b, alnum, middle, alnum),
                     st.sampled_from(["torch", "nvidia-cublas-cu12", "triton", "Jinja2",
                                      "zope.interface", "typing_extensions", "x" * 200]))


def _version_strategy() -> Any:
    num = st.integers(0, 10**6).map(str)
    return st.builds(
        lambda v, epoch, rel, pre, post, dev, local: "".join(
            [v, epoch, ".".join(rel), pre, post, dev, local]),
        st.sampled_from(["", "", "v", "V"]),
        st.one_of(st.just(""), num.map(lambda n: n + "!")),
        st.lists(num, min_size=1, max_size=5),
        st.one_of(st.just(""), st.builds("{}{}".format, st.sampled_from(
            ["a", "b", "rc", "c", "alpha", "beta", "pre", "preview", "-RC", ".a", "_b"]), num)),
        st.one_of(st.just(""), num.map(lambda n: ".post" + n), num.map(lambda n: "-" + n),
                  st.just(".post")),
        st.one_of(st.just(""), num.map(lambda n: ".dev" + n), st.just("-dev")),
        st.one_of(st.just(""), st.lists(st.text("abcXYZ0189", min_size=1, max_size=8),
                                        min_size=1, max_size=4).map(
            lambda parts: "+" + ".".join(parts))),
    )


_FILE_NAME = st.one_of(
    st.builds(lambda stem, ext: "f" + stem.replace("/", "_").replace("\\", "_") + ext,
              _WORD, st.sampled_from([".whl", ".tar.gz", ".zip", ""])),
    st.just("torch-2.5.1+cu121-cp311-cp311-linux_x86_64.whl"),
)


@st.composite
def _packages(draw: Any) -> List[Dict[str, Any]]:
    from packaging.utils import canonicalize_name

    names = draw(st.lists(_name_strategy(), min_size=1, max_size=draw(st.sampled_from(
        [3, 12, 60])), unique_by=lambda n: canonicalize_name(n)))
    indexes = draw(st.lists(_URL, min_size=1, max_size=3))
    out = []
    for name in names:
        pkg: Dict[str, Any] = {"name": name, "version": draw(_version_strategy())}
        if draw(st.booleans()):
            pkg["index"] = draw(st.sampled_from(indexes))
        if draw(st.integers(0, 9)) == 0:
            pkg["specifier"] = draw(st.sampled_from([">=1", "~=2.5,!=2.5.3", "==1.*", "<9"]))
        if draw(st.integers(0, 9)) == 0:
            pkg["direct"] = True
        pkg["files"] = [{"name": draw(_FILE_NAME), "url": draw(_URL), "sha256": draw(_HEX)}
                        for _ in range(draw(st.integers(1, 3)))]
        out.append(pkg)
    return out


_ENV_NAME = st.one_of(st.from_regex(r"[A-Z_][A-Z0-9_]{0,20}", fullmatch=True),
                      st.sampled_from(["NCCL_DEBUG", "CUDA_VISIBLE_DEVICES", "PATH"]))
_ADVISORY = st.fixed_dictionaries(
    {"id": _NONEMPTY, "action": st.sampled_from(["excluded", "override", "warning",
                                                  "may-apply"]), "summary": _TEXT},
    optional={"override": st.lists(st.one_of(_TEXT, st.sampled_from(
        ["nvidia-cublas-cu12>=12.4.5.8", "evil ; python_version > '0'", "torch @ http://x"])),
        max_size=3), "unknown": st.lists(_TEXT, max_size=2)})


@st.composite
def valid_lock(draw: Any, base: Dict[str, Any]) -> Tuple[Dict[str, Any], bool]:
    """(a lock document, whether it was broken on purpose)."""
    doc = json.loads(json.dumps(base))  # a plain deep copy
    if draw(st.booleans()):
        doc["command"] = draw(_TEXT)
    if draw(st.booleans()):
        doc["inputs"]["requirements"] = draw(st.lists(_TEXT, max_size=4))
        doc["inputs"]["indexes"] = draw(st.lists(_URL, max_size=3))
    if draw(st.integers(0, 3)) == 0:
        doc["matrix-version"] = draw(_TEXT)
        doc["envlock-version"] = draw(_TEXT)
    packages = draw(_packages())
    for t in doc["target"]:
        t["package"] = packages
        t["env"] = draw(st.dictionaries(_ENV_NAME, _TEXT, max_size=4))
        t["decision"] = draw(st.lists(_TEXT, max_size=4))
        t["driver-min-reasons"] = draw(st.lists(_TEXT, max_size=2))
        t["gpus"] = [draw(_TEXT) for _ in t["gpus"]]
        t["libraries"] = draw(st.dictionaries(_NONEMPTY, _TEXT, max_size=4))
        t["python"] = draw(st.sampled_from(["3.9", "3.10", "3.11", "3.12", "3.13", "3.14"]))
        t["glibc"] = draw(st.sampled_from(["2.28", "2.17", "2.35", ""]))
        for key in ("driver-min", "family", "driver"):
            choice = draw(st.integers(0, 2))
            if choice == 0:
                t.pop(key, None)
            elif choice == 1:  # the driver floor must be a version (verify compares it)
                t[key] = draw(_version_strategy() if key == "driver-min" else _TEXT)
        torch = t["torch"]
        torch["index"] = draw(st.one_of(st.sampled_from(
            sorted({p["index"] for p in packages if "index" in p}) or ["https://x/"]), _URL))
        torch["variant"] = draw(st.one_of(st.just("cu121"), _TEXT))
        for key in ("cuda", "arch-list", "ptx"):
            if draw(st.booleans()):
                torch.pop(key, None)
        t["advisory"] = draw(st.lists(_ADVISORY, max_size=3))
        if not t["advisory"]:
            del t["advisory"]
    # not integers(0, 19) == 0: hypothesis draws the bounds of a range far more often
    broken = draw(st.sampled_from([False] * 19 + [True]))
    if broken:  # one string somewhere gets a control character
        where = draw(st.sampled_from(["command", "version", "decision", "index", "env"]))
        bad = draw(st.sampled_from(["\n--find-links http://evil/", "\x1b[2J", "\u2028x",
                                    "\r", "\x00", "\x85"]))
        t = doc["target"][1]
        if where == "command":
            doc["command"] = doc.get("command", "") + bad
        elif where == "version":
            t["package"] = [dict(p) for p in t["package"]]
            t["package"][0]["version"] += bad
        elif where == "decision":
            t["decision"] = list(t["decision"]) + [bad]
        elif where == "index":
            t["torch"]["index"] += bad
        else:
            t["env"] = dict(t["env"], X=bad)
    return doc, broken


# -- reading exported files back ------------------------------------------------------------


def _lock_pins(doc: Dict[str, Any], target: str) -> Dict[str, Tuple[str, Tuple[str, ...]]]:
    """canonical name -> (the pin's version or specifier text, sorted hashes)."""
    t = next(t for t in doc["target"] if t["name"] == target)
    return {p["name"]: (p["version"], tuple(sorted({f["sha256"] for f in p["files"]})))
            for p in t["package"]}


def _lock_indexes(doc: Dict[str, Any], target: str) -> set:
    """The lock's indexes as exports write them: credentials (``user@``) stripped."""
    from envlock._redact import strip_userinfo

    t = next(t for t in doc["target"] if t["name"] == target)
    return {strip_userinfo(p["index"]) for p in t["package"] if p.get("index")}


@functools.lru_cache(maxsize=None)
def _pip_parser() -> Any:
    """pip's own requirements-file parser (pip internals: None when they moved)."""
    try:
        from pip._internal.network.session import PipSession
        from pip._internal.req.req_file import RequirementsFileParser, get_line_parser
    except ImportError:  # pragma: no cover - a pip without these internals
        return None
    return RequirementsFileParser(PipSession(), get_line_parser(None))


def _pip_lines(path: Path) -> Iterator[Any]:
    """The requirements file's logical lines, parsed by pip itself (no recursion into -r)."""
    yield from _pip_parser()._parse_file(str(path), constraint=False)


def _check_requirements(path: Path, doc: Dict[str, Any], target: str) -> None:
    pins = _lock_pins(doc, target)
    indexes = _lock_indexes(doc, target)
    seen: Dict[str, Tuple[str, Tuple[str, ...]]] = {}
    if _pip_parser() is None:  # pragma: no cover - no pip parser: the active lines, roughly
        for line in path.read_text(encoding="utf-8").splitlines():
            assert line == "" or line.startswith(("#", "--index-url ", "--extra-index-url ",
                                                  "    --hash=sha256:")) or "==" in line
        return
    for line in _pip_lines(path):
        opts = vars(line.opts)
        active = {k: v for k, v in opts.items() if v not in (None, [], False)
                  and k not in ("index_url", "extra_index_urls", "hashes")
                  and not (k == "format_control" and not (v.no_binary or v.only_binary))}
        assert not active, (line.lineno, active)  # no -r, -c, --find-links, -e, ...
        if line.is_requirement:
            name, _, version = line.requirement.partition("==")
            assert name in pins and name not in seen, line.requirement
            hashes = tuple(sorted(opts.get("hashes", {}).get("sha256", [])))
            seen[name] = (version.strip(), hashes)
        else:
            for url in [opts.get("index_url")] + list(opts.get("extra_index_urls") or []):
                # "${" is written "%24{" so that pip expands no environment variable
                assert url is None or url.replace("%24{", "${") in indexes, (url, indexes)
    assert seen == pins


def _check_constraints(text: str, doc: Dict[str, Any], target: str) -> None:
    pins = {n: v for n, (v, _) in _lock_pins(doc, target).items()}
    active = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    assert dict(ln.split("==", 1) for ln in active) == pins, active


def _check_pylock(text: str, doc: Dict[str, Any], target: str) -> None:
    data = tomllib.loads(text)
    got = {}
    for p in data["packages"]:
        files = list(p.get("wheels", [])) + ([p["sdist"]] if "sdist" in p else [])
        got[p["name"]] = (p["version"], tuple(sorted({f["hashes"]["sha256"] for f in files})))
    want = _lock_pins(doc, target)
    # pylock lists one sdist at most: hashes of further sdists are not carried
    assert got.keys() == want.keys()
    for name, (version, hashes) in want.items():
        assert got[name][0] == version and set(got[name][1]) <= set(hashes), name
    assert data["tool"]["envlock"]["target"] == target


def _check_uv(text: str, doc: Dict[str, Any], target: str) -> None:
    data = tomllib.loads(text)
    pins = {n: v for n, (v, _) in _lock_pins(doc, target).items()}
    got = dict(x.split("==", 1) for x in data["tool"]["uv"]["constraint-dependencies"])
    assert got == pins
    assert set(data) == {"tool"} and set(data["tool"]) == {"uv"}


def _check_conda(text: str, doc: Dict[str, Any], target: str) -> None:
    yaml = pytest.importorskip("yaml")
    data = yaml.safe_load(text)
    assert set(data) == {"name", "channels", "dependencies"}
    assert data["name"] == f"envlock-{target}"
    pip_items = data["dependencies"][-1]["pip"]
    pins = _lock_pins(doc, target)
    indexes = _lock_indexes(doc, target)
    seen = {}
    for item in pip_items:
        words = item.split(" ")
        if words[0] in ("--index-url", "--extra-index-url"):
            value = shlex.split(item)  # conda hands these lines to pip, which splits so
            assert len(value) == 2 and value[1].replace("%24{", "${") in indexes, item
            continue
        name, _, version = words[0].partition("==")
        assert all(w.startswith("--hash=sha256:") for w in words[1:]), item
        seen[name] = (version, tuple(sorted(w[len("--hash=sha256:"):] for w in words[1:])))
    assert seen == pins


#: the instructions of an exported Dockerfile, in order; nothing a lock holds may add one
_DOCKER_INSTRUCTIONS = ["ARG", "FROM", "ENV", "COPY", "RUN", "COPY", "RUN", "ENTRYPOINT",
                        "CMD"]


def _check_dockerfile(text: str, doc: Dict[str, Any], target: str) -> None:
    instructions: List[str] = []
    logical = ""
    for line in text.splitlines():
        if not logical and (not line.strip() or line.lstrip().startswith("#")):
            continue
        logical += line
        if line.endswith("\\"):
            logical = logical[:-1]
            continue
        instructions.append(logical)
        logical = ""
    assert not logical
    t = next(t for t in doc["target"] if t["name"] == target)
    env_lines = [i for i in instructions if i.startswith("ENV ")][1:]
    # NVIDIA_REQUIRE_CUDA (for the legacy runtime hook) when the lock has a driver floor
    require = [i for i in env_lines if i.startswith("ENV NVIDIA_REQUIRE_CUDA=")]
    assert len(require) <= 1
    env_lines = [i for i in env_lines if i not in require]
    kinds = [i.split(" ", 1)[0] for i in instructions]
    assert [k for k in kinds if k != "ENV"] == [k for k in _DOCKER_INSTRUCTIONS if k != "ENV"]
    assert kinds.count("ENV") == 1 + len(require) + len(t["env"]), kinds
    for line, name in zip(env_lines, sorted(t["env"])):
        key, _, value = line[len("ENV "):].partition("=")
        assert key == name and json.loads(value) == t["env"][name], line


_CHECKS = {"constraints": _check_constraints, "pylock": _check_pylock, "uv": _check_uv,
           "conda": _check_conda, "dockerfile": _check_dockerfile}


# -- the properties -------------------------------------------------------------------------

_TALLY: Dict[str, Counter] = {"lock": Counter(), "snapshot": Counter()}


@pytest.fixture(scope="module")
def lock_base() -> Dict[str, Any]:
    return tomllib.loads(LOCK.read_text())


@pytest.fixture(scope="module")
def snapshot_base() -> Dict[str, Any]:
    return json.loads(SNAPSHOT.read_text())


@pytest.fixture(scope="module")
def own_deps_index(tmp_path_factory: Any) -> Iterator[str]:
    """A loopback index holding a wheel of every distribution envlock's own dependency
    closure can name, at the version installed here (else one that satisfies it): the
    dockerfile export pins them from the configured index, and the suite runs offline
    (on a host without a network this property failed with exit 4 on PyPI)."""
    import importlib.metadata as md

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    from envlock.distribution import REQUIRES
    from support.index_server import IndexServer, make_wheel

    d = tmp_path_factory.mktemp("own-deps")
    with IndexServer() as srv:
        pypi = srv.add_index("pypi")
        seen = set()
        queue = [Requirement(r) for r in REQUIRES]
        while queue:
            req = queue.pop()
            name = canonicalize_name(req.name)
            if name in seen or (req.marker is not None and "extra" in str(req.marker)):
                continue
            seen.add(name)
            try:
                dist = md.distribution(name)
                version, requires = dist.version, list(dist.requires or [])
            except md.PackageNotFoundError:  # e.g. tomli, needed below Python 3.11
                version, requires = next(v for v in ("99.0", "2.0.1", "1.0")
                                         if req.specifier.contains(v)), []
            pypi.add(make_wheel(d, name, version, requires=requires))
            queue.extend(Requirement(r) for r in requires)
        yield srv.url("pypi")


def _run(argv: List[str], codes: List[int]) -> Result:
    """One CLI run under the contract (no exit 70, no traceback, one-line errors, no raw
    control characters); its exit code is added to ``codes``."""
    r = run_cli(argv)
    assert_contract(r, argv)
    _no_raw_controls(r, argv)
    codes.append(r.code)
    return r


def _no_raw_controls(r: Result, argv: List[str]) -> None:
    """What the commands print carries no control character but line ends and tabs."""
    for stream in (r.stdout, r.stderr):
        bad = [c for c in set(CONTROL.findall(stream)) if c not in "\n\t"]
        assert not bad, (argv, bad)


@SETTINGS
@given(data=st.data())
def test_valid_generated_locks(tmp_path_factory: Any, lock_base: Dict[str, Any],
                               own_deps_index: str, data: st.DataObject) -> None:
    with _environ(PIP_INDEX_URL=own_deps_index):
        _check_generated_lock(tmp_path_factory, lock_base, data)


@contextlib.contextmanager
def _environ(**values: str) -> Iterator[None]:
    """Set environment variables for the in-process CLI runs of one example."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _check_generated_lock(tmp_path_factory: Any, lock_base: Dict[str, Any],
                          data: st.DataObject) -> None:
    doc, broken = data.draw(valid_lock(lock_base))
    tmp = tmp_path_factory.mktemp("lock")
    path = tmp / "gen.lock"
    path.write_text(toml_text.dumps(doc), encoding="utf-8")
    target = "h20"
    codes = []
    for fmt in FORMATS:
        out = tmp / ("ctx" if fmt == "dockerfile" else f"out.{fmt}")
        argv = ["export", "--lock", str(path), "--format", fmt, "--target", target,
                "-o", str(out)]
        r = _run(argv, codes)
        if broken:
            assert r.code == 2, (argv, r.stderr)
            assert not out.exists()
            continue
        assert r.code == 0, (argv, r.stderr)
        if fmt == "requirements":
            _check_requirements(out, doc, target)
        else:
            rendered = (out / "Dockerfile") if fmt == "dockerfile" else out
            _CHECKS[fmt](rendered.read_text(encoding="utf-8"), doc, target)
    for argv in (["verify", "--lock", str(path), "--target", "h100-sxm", "--snapshot",
                  str(SNAPSHOT)],
                 ["verify", "--lock", str(path), "--target", "h100-sxm", "--snapshot",
                  str(SNAPSHOT), "--json"]):
        r = _run(argv, codes)
        if broken:
            assert r.code == 2, (argv, r.stderr)
        else:
            assert r.code in (0, 1), (argv, r.stderr)
            if "--json" in argv:
                json.loads(r.stdout)
    valid = all(c in (0, 1) for c in codes)
    _TALLY["lock"]["valid" if valid else "refused"] += 1
    event("valid" if valid else "refused (broken on purpose)")


def _most_validated(kind: str) -> None:
    """Most generated documents of ``kind`` validated (the rest are broken on purpose).
    Needs the property to have run first in this session (file order)."""
    tally = _TALLY[kind]
    total = sum(tally.values())
    if not total:
        pytest.skip(f"the {kind} property did not run in this session")
    share = tally["valid"] / total
    print(f"\ngenerated {kind}s: {total}, valid: {tally['valid']} ({share:.1%})")
    assert share >= MIN_VALID


def test_zz_most_generated_locks_validate() -> None:
    _most_validated("lock")


# -- snapshots ------------------------------------------------------------------------------

#: snapshots are machine facts, not rendered files: the reader keeps control characters, so
#: they are generated too, and ``verify``/``doctor`` must print them escaped
_ANY_TEXT = st.one_of(_TEXT, st.text(st.characters(blacklist_categories=("Cs",)), max_size=20),
                      st.sampled_from(["\x1b[2J\x1b[H", "\n\nPASS", "\r", "\u2028", "\x00"]))
_OPT_TEXT = st.one_of(st.none(), _ANY_TEXT)
_VERSIONISH = st.one_of(st.none(), _version_strategy(), _ANY_TEXT)
_DRIVER = st.one_of(st.none(), st.from_regex(r"[0-9]{2,3}(\.[0-9]{1,3}){1,2}", fullmatch=True))
_CC = st.one_of(st.none(), st.from_regex(r"[0-9]{1,2}\.[0-9]", fullmatch=True))
_ARCH = st.builds("{}_{}{}".format, st.sampled_from(["sm", "compute"]),
                  st.integers(10, 130), st.sampled_from(["", "a", "f"]))


@st.composite
def valid_snapshot(draw: Any, base: Dict[str, Any]) -> Dict[str, Any]:
    doc = json.loads(json.dumps(base))
    for key in ("hostname", "os", "distro", "kernel", "machine", "container",
                "virtualization"):
        if draw(st.booleans()):
            doc["host"][key] = draw(_OPT_TEXT)
    doc["host"]["glibc"] = draw(_VERSIONISH)
    doc["host"]["shm_bytes"] = draw(st.one_of(st.none(), st.integers(0, 2**70)))
    doc["host"]["cpu_count"] = draw(st.one_of(st.none(), st.integers(0, 10**6)))
    doc["python"] = {"version": draw(st.one_of(_VERSIONISH, st.sampled_from(
        ["3.11.9", "3.13.0t", "3.14.0a1+"]))), "implementation": draw(_OPT_TEXT),
        "executable": draw(_OPT_TEXT)}
    if draw(st.integers(0, 9)) == 0:
        doc["driver"] = None
    else:
        doc["driver"] = {"version": draw(_DRIVER),
                         "cuda": draw(st.one_of(st.none(), st.from_regex(
                             r"[0-9]{1,2}\.[0-9]{1,2}", fullmatch=True))),
                         "fabric_manager": draw(st.sampled_from(
                             ["running", "not-running", "not-applicable", None])),
                         "error": draw(_OPT_TEXT), "source": draw(_OPT_TEXT)}
    if draw(st.booleans()):
        gpus = []
        for i in range(draw(st.integers(0, 9))):
            gpus.append({"index": i, "name": draw(st.one_of(_OPT_TEXT, st.sampled_from(
                ["NVIDIA H100 80GB HBM3", "NVIDIA H20", "NVIDIA GeForce RTX 5090"]))),
                "uuid": draw(_OPT_TEXT), "compute_capability": draw(_CC),
                "memory_mib": draw(st.one_of(st.none(), st.integers(0, 2**40))),
                "pci_bus_id": draw(_OPT_TEXT), "mig": draw(st.one_of(st.none(), st.booleans())),
                "lost": draw(st.one_of(st.none(), st.booleans()))})
        doc["gpus"] = gpus
        doc["links"] = []
    if draw(st.booleans()):
        doc["packages"].update(draw(st.dictionaries(_ANY_TEXT, _ANY_TEXT, max_size=6)))
    if draw(st.booleans()):
        doc["packages"] = {k: draw(_VERSIONISH.map(lambda v: v or "")) if draw(st.booleans())
                           else v for k, v in doc["packages"].items()}
    for lib in doc["libraries"]:
        if draw(st.booleans()):
            lib.update(version=draw(_VERSIONISH), path=draw(_OPT_TEXT), owner=draw(_OPT_TEXT))
    if draw(st.integers(0, 5)) == 0:
        doc["torch"] = None
    else:
        doc["torch"] = {"version": draw(_VERSIONISH), "cuda": draw(st.one_of(
                            st.none(), st.sampled_from(["12.4", "11.8", "12.8.1", "13.0"]))),
                        "cudnn": draw(_VERSIONISH), "nccl": draw(_VERSIONISH),
                        "arch_list": draw(st.one_of(st.none(), st.lists(_ARCH, max_size=6))),
                        "source": draw(_OPT_TEXT)}
    doc["env"] = draw(st.dictionaries(st.one_of(_ANY_TEXT, st.sampled_from(
        ["CUDA_VISIBLE_DEVICES", "NCCL_DEBUG", "LD_LIBRARY_PATH", "NCCL_P2P_DISABLE"])),
        _ANY_TEXT, max_size=5))
    doc["notes"] = draw(st.lists(_ANY_TEXT, max_size=3))
    if draw(st.booleans()):
        doc["hardware_source"] = draw(_OPT_TEXT)
    return doc


@SETTINGS
@given(data=st.data())
def test_valid_generated_snapshots(tmp_path_factory: Any, snapshot_base: Dict[str, Any],
                                   data: st.DataObject) -> None:
    doc = data.draw(valid_snapshot(snapshot_base))
    path = tmp_path_factory.mktemp("snap") / "gen.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    codes = []
    for argv in (["verify", "--lock", str(LOCK), "--target", "h100-sxm", "--snapshot",
                  str(path)],
                 ["verify", "--lock", str(LOCK), "--target", "h100-sxm", "--snapshot",
                  str(path), "--json"],
                 ["doctor", "--snapshot", str(path)],
                 ["doctor", "--snapshot", str(path), "--json"]):
        r = _run(argv, codes)
        if "--json" in argv:
            json.loads(r.stdout)
    valid = all(c in (0, 1) for c in codes)
    _TALLY["snapshot"]["valid" if valid else "refused"] += 1
    event("valid" if valid else f"refused: {codes}")


def test_zz_most_generated_snapshots_validate() -> None:
    _most_validated("snapshot")
