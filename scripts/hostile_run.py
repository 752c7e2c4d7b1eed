#!/usr/bin/env python
"""A hostile-input property run over every command's inputs (issue 32's acceptance run).

Each case gives one command hostile input and checks the contract a lock tool owes its
users, whatever it is fed:

- no exit 70 (internal error) and no traceback, on stdout or stderr;
- no hang: a case that runs past ``--case-limit`` seconds stops the run (faulthandler
  prints where it hung and the process exits 3);
- no write outside the requested path: every file of the sandbox (inputs, ``HOME``, a
  victim file that planted cache links point to) is compared before and after each case;
  only the requested output, the cache directory and the temporary directory may change,
  and no ``envlock-build-*`` directory may be left in the temporary directory;
- no planted secret (an environment variable, ``~/.netrc``, the index URL's password)
  in stdout, stderr, any file the case wrote, or any process's argv (``/proc/*/cmdline``,
  watched by a thread for the whole run).

The kinds of input (weights in :data:`KINDS`): mutated snapshots (``snapshot --show``,
``verify``, ``doctor``, ``fleet --snapshots``, ``resolve --from-snapshot``), mutated locks
(``export`` in every format, ``verify``), requirement files, crash logs, hostile ``-o``
paths, hostile project pages from a loopback index (with a planted cache), and sdists whose
build backends misbehave (daemons, hangs past the deadline, environment dumps, huge or
escaping METADATA).

    PYTHONPATH=. python scripts/hostile_run.py --cases 10000 --seed 1

prints one JSON summary; exit 0 when every case kept the contract, 1 otherwise.

Measured for issue 32 (two shards run side by side, ``--cases 5000 --seed 32`` and
``--seed 33``, 2 shared cores, 31 min): 10,000 cases (3,140 snapshot, 2,536 lock, 1,233
requirements, 792 log, 1,067 -o path, 1,203 hostile page, 29 sdist builds); exits 0: 2,137,
1: 94, 2: 6,659, 3: 20, 4: 882, 6: 183, 7: 25; 0 exit 70, 0 tracebacks, 0 hangs, 0 writes
outside the requested path, 0 planted secrets in output, files or argv (38,421 scans of
every process's argv), the victim file of the planted cache links intact.
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import os
import pickle
import random
import secrets
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

ROOT = Path(__file__).resolve().parents[1]
for p in (str(ROOT / "tests"), str(ROOT)):
    if p not in sys.path:
        sys.path.insert(0, p)

SECRET = "PlantedS3cret" + secrets.token_hex(6)
DATA = ROOT / "tests" / "data"
LOCK = DATA / "locks" / "cu121-h100-h20.lock"
SNAPSHOT = DATA / "snapshots" / "h100-match.json"
FORMATS = ["requirements", "constraints", "pylock", "uv", "conda", "dockerfile"]
KINDS = {"snapshot": 30, "lock": 25, "requirements": 12, "log": 8, "outpath": 10,
         "page": 12, "sdist": 0.4}

_SCALARS: List[Any] = [
    "", "\n--find-links http://evil/\nevil==1.0", "\x1b]0;title\x07\x1b[2J", "\x9b31m",
    "\ud800", "\udc80x", "\u2028", "../../PWNED", "/etc/passwd", "0" * 64, "9" * 400,
    "１２.４", "٥٣٥.١٠٤", "2.5.1+cu121", "==2.5.1", "not a version", "535.104.05", "-1",
    "inf", "nan", "1e309", "x" * 20000, "sm_90a", "H100 SXM", None, True, False, 0, -1,
    2 ** 70, 1.5, float("inf"), [], {}, ["a", 1], {"k": "v"},
]


def _scalar(rng: random.Random) -> Any:
    if rng.random() < 0.3:
        n = rng.randint(0, 30)
        return "".join(chr(rng.choice([rng.randint(0, 0x7f), rng.randint(0x80, 0x2fff),
                                       rng.randint(0xd800, 0xdfff)])) for _ in range(n))
    return rng.choice(_SCALARS)


def _paths(obj: Any, prefix: tuple = ()) -> List[tuple]:
    out = [prefix]
    if len(prefix) > 8:
        return out
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _paths(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += _paths(v, prefix + (i,))
    return out


def _mutate(doc: Any, rng: random.Random) -> Any:
    doc = pickle.loads(pickle.dumps(doc))
    for _ in range(rng.randint(1, 4)):
        paths = [p for p in _paths(doc) if p]
        if not paths:
            break
        path = rng.choice(paths)
        parent = doc
        for k in path[:-1]:
            parent = parent[k]
        action = rng.choice(["replace", "replace", "replace", "delete", "nest"])
        if action == "delete":
            del parent[path[-1]]
        elif action == "nest":
            v: Any = "x"
            for _ in range(rng.choice([3, 50, 3000])):
                v = [v]
            parent[path[-1]] = v
        else:
            parent[path[-1]] = _scalar(rng)
    return doc


def _json_text(doc: Any) -> str:
    try:
        return json.dumps(doc)
    except (RecursionError, ValueError):
        return "[" * 100000


class Sandbox:
    """The directories one run works in; what may change, and what may not."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.home, self.tmp, self.cache = base / "home", base / "tmp", base / "cache"
        self.inp, self.out = base / "in", base / "out"
        for d in (self.home, self.tmp, self.cache, self.inp, self.out):
            d.mkdir(parents=True, exist_ok=True)
        self.victim = base / "victim"
        self.victim.write_bytes(b"precious\n")
        self.victim.chmod(0o600)
        netrc = self.home / ".netrc"
        netrc.write_text(f"machine 127.0.0.1 login planted password {SECRET}\n")
        netrc.chmod(0o600)

    def state(self) -> Dict[str, Tuple[int, int]]:
        """(size, mtime_ns) of every file outside the places a case may write."""
        out: Dict[str, Tuple[int, int]] = {}
        for root, dirs, files in os.walk(self.base):
            r = Path(root)
            if r == self.base:
                dirs[:] = [d for d in dirs if d not in ("cache", "tmp", "out")]
            for f in files:
                try:
                    st = os.lstat(r / f)
                except OSError:
                    continue
                out[str(r / f)] = (st.st_size, st.st_mtime_ns)
        return out

    def written(self) -> List[Path]:
        files = []
        for d in (self.out, self.cache):
            for root, _, names in os.walk(d):
                files += [Path(root, n) for n in names]
        return files


class ArgvWatch(threading.Thread):
    """Scans every process's command line for the secret for as long as the run lasts."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.stop = threading.Event()
        self.hits: List[str] = []
        self.scans = 0

    def run(self) -> None:
        needle = SECRET.encode()
        while not self.stop.wait(0.05):
            self.scans += 1
            for entry in os.listdir("/proc"):
                if entry.isdigit():
                    try:
                        cmd = Path("/proc", entry, "cmdline").read_bytes()
                    except OSError:
                        continue
                    if needle in cmd:
                        self.hits.append(cmd.replace(b"\0", b" ").decode("utf-8", "replace"))


def _world(tmp: Path) -> Any:
    from support.index_server import IndexServer
    from support.torch_world import add_package, add_torch_release

    srv = IndexServer()
    srv.__enter__()
    pypi = srv.add_index("pypi")
    add_torch_release(pypi, tmp, "2.5.1")
    add_package(pypi, tmp, "helper", "1.2")
    return srv


_BACKENDS = {
    "daemon": "pid = os.fork()\nif pid == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
              "        time.sleep(600)\n    os._exit(0)\nos.waitpid(pid, 0)\n",
    "hang": "time.sleep(600)\n",
    "envdump": "print(json.dumps(dict(os.environ)))\nprint(open(os.path.expanduser("
               "'~/.netrc')).read() if os.path.exists(os.path.expanduser('~/.netrc')) "
               "else '')\nraise SystemExit(3)\n",
    "netrc": "print(open('/proc/1/environ', 'rb').read()[:100])\n"
             "import glob\nfor p in glob.glob('/*/.netrc') + glob.glob('/root/.netrc'):\n"
             "    print(open(p).read())\nraise SystemExit(1)\n",
    "holder": "subprocess.Popen(['sleep', '600'])\n",
    "huge": "RESULT = 'huge'\n",
    "escape": "RESULT = '../../../../../../../../../etc/hostname'\n",
    "argv": "print(sys.argv)\nprint(open('/proc/%d/cmdline' % os.getppid(), 'rb').read())\n"
            "raise SystemExit(2)\n",
}


def _backend(name: str, kind: str) -> str:
    body = "\n".join("    " + ln for ln in _BACKENDS[kind].splitlines())
    return f'''
def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    import os, sys, time, json, subprocess
    RESULT = None
{body}
    if RESULT == "huge":
        d = os.path.join(metadata_directory, "x.dist-info")
        os.makedirs(d)
        with open(os.path.join(d, "METADATA"), "wb") as f:
            f.truncate(64 * 1024 * 1024)
        return "x.dist-info"
    if RESULT:
        return RESULT
    d = os.path.join(metadata_directory, "{name}-1.0.dist-info")
    os.makedirs(d)
    with open(os.path.join(d, "METADATA"), "w") as f:
        f.write("Metadata-Version: 2.1\\nName: {name}\\nVersion: 1.0\\n\\n")
    return "{name}-1.0.dist-info"
'''


def _hostile_page(rng: random.Random, name: str, srv: Any) -> Tuple[bytes, str]:
    whl = f"{name}-1.0-py3-none-any.whl"
    good = {"filename": whl, "url": f"{srv.base}/files/pypi/helper-1.2-py3-none-any.whl",
            "hashes": {"sha256": "0" * 64}}
    files: List[Any] = [good]
    for _ in range(rng.randint(0, 4)):
        f = dict(good)
        key = rng.choice(["filename", "url", "hashes", "requires-python", "yanked",
                          "core-metadata", "size", "upload-time"])
        f[key] = rng.choice([
            _scalar(rng), "http://u:IndexOwnPw@127.0.0.2:1/x.whl", "file:///etc/passwd",
            "javascript:alert(1)", "../../../etc/passwd", {"sha256": "z" * 64},
            {"sha256": _scalar(rng)}, "x" * 5000, rng.randint(-5, 2 ** 40)])
        files.append(f)
    if rng.random() < 0.5:
        doc: Any = {"meta": {"api-version": rng.choice(["1.0", "1.1", "2.0", _scalar(rng)])},
                    "name": rng.choice([name, _scalar(rng)]), "files": files}
        if rng.random() < 0.3:
            doc = _mutate(doc, rng)
        return _json_text(doc).encode("utf-8", "surrogatepass"), \
            "application/vnd.pypi.simple.v1+json"
    links = "".join(
        f'<a href="{rng.choice([str(_scalar(rng)), "file:///etc/passwd", good["url"]])}"'
        f' data-requires-python="{_scalar(rng)}">{_scalar(rng)}</a>'
        for _ in range(rng.randint(0, 5)))
    body = f"<html><body>{links}{'<div>' * rng.choice([0, 10, 5000])}</body></html>"
    return body.encode("utf-8", "surrogatepass"), "text/html"


class Runner:
    def __init__(self, sandbox: Sandbox, rng: random.Random, case_limit: float) -> None:
        self.sb = sandbox
        self.rng = rng
        self.case_limit = case_limit
        self.snapshot = json.loads(SNAPSHOT.read_text())
        import tomllib

        self.lock_doc = tomllib.loads(LOCK.read_text())
        self.srv: Any = None
        self.sdists = 0
        self.counts: Counter = Counter()
        self.codes: Counter = Counter()
        self.failures: List[Dict[str, Any]] = []

    # -- one case -----------------------------------------------------------------------
    def case(self, i: int, kind: str) -> None:
        from security.cli_run import run_cli

        rng = self.rng
        env: Dict[str, str] = {}
        argv = getattr(self, f"_{kind}")(i, rng, env)
        before = self.sb.state()
        old_env = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        faulthandler.dump_traceback_later(self.case_limit, exit=True)
        try:
            r = run_cli(argv)
        finally:
            faulthandler.cancel_dump_traceback_later()
            for k, v in old_env.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        self.counts[kind] += 1
        self.codes[f"{kind}:{r.code}"] += 1
        problems = []
        if r.code == 70:
            problems.append("exit 70")
        if "Traceback" in r.stdout or "Traceback" in r.stderr:
            problems.append("traceback")
        if SECRET in r.stdout or SECRET in r.stderr:
            problems.append("secret in output")
        for f in self.sb.written():
            try:
                if SECRET.encode() in f.read_bytes():
                    problems.append(f"secret in {f}")
            except OSError:
                pass
        after = self.sb.state()
        changed = [p for p in set(before) | set(after) if before.get(p) != after.get(p)
                   and not p.startswith(str(self.sb.inp))]
        if changed:
            problems.append(f"writes outside the requested path: {sorted(changed)[:3]}")
        left = [p.name for p in self.sb.tmp.iterdir() if p.name.startswith("envlock-build-")]
        if left:
            problems.append(f"build directories left: {left}")
            for p in left:
                shutil.rmtree(self.sb.tmp / p, ignore_errors=True)
        if problems:
            self.failures.append({"case": i, "kind": kind, "argv": argv[:12],
                                  "code": r.code, "problems": problems,
                                  "stderr": r.stderr[-400:]})
        for p in self.sb.out.iterdir():
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p, ignore_errors=True)
            else:
                p.unlink()

    def _out_path(self, rng: random.Random) -> str:
        choice = rng.choice(["file", "file", "newdir/", "dir", "link", "devnull", "noparent",
                             "dash"])
        out = self.sb.out
        if choice == "file":
            return str(out / "o.txt")
        if choice == "newdir/":
            return str(out / "newdir") + "/"
        if choice == "dir":
            (out / "d").mkdir(exist_ok=True)
            return str(out / "d")
        if choice == "link":
            (out / "target").write_text("old\n")
            (out / "l").symlink_to(out / "target")
            return str(out / "l")
        if choice == "devnull":
            return os.devnull
        if choice == "noparent":
            return str(out / "missing" / "x" / "o.txt")
        return "-"

    # -- the kinds ----------------------------------------------------------------------
    def _snapshot(self, i: int, rng: random.Random, env: Dict[str, str]) -> List[str]:
        path = self.sb.inp / "snap.json"
        path.write_text(_json_text(_mutate(self.snapshot, rng)), encoding="utf-8",
                        errors="surrogatepass")
        env["PLANTED_API_TOKEN"] = SECRET
        cmd = rng.choice(["show", "verify", "doctor", "fleet", "resolve"])
        o = self._out_path(rng)
        return {"show": ["snapshot", "--show", str(path)],
                "verify": ["verify", "--lock", str(LOCK), "--target", "h100-sxm",
                           "--snapshot", str(path), "--junit", o],
                "doctor": ["doctor", "--snapshot", str(path), "--junit", o],
                "fleet": ["fleet", "--snapshots", str(path), str(SNAPSHOT), "--lock",
                          str(LOCK), "--report", o],
                "resolve": ["resolve", "--from-snapshot", str(path), "--offline",
                            "--dry-run"]}[cmd]

    def _lock(self, i: int, rng: random.Random, env: Dict[str, str]) -> List[str]:
        from security.toml_text import dumps

        path = self.sb.inp / "gen.lock"
        try:
            text = dumps(_mutate(self.lock_doc, rng))
        except (RecursionError, ValueError, TypeError):
            text = "a = " + "[" * 5000
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        if rng.random() < 0.2:
            return ["verify", "--lock", str(path), "--snapshot", str(SNAPSHOT)]
        return ["export", "--lock", str(path), "--format", rng.choice(FORMATS),
                "--target", rng.choice(["h20", "h100-sxm"]), "-o", self._out_path(rng)]

    def _requirements(self, i: int, rng: random.Random, env: Dict[str, str]) -> List[str]:
        lines = [str(_scalar(rng)) if rng.random() < 0.5 else rng.choice([
            "numpy>=1", "torch==2.5.1", "-r /dev/zero", f"--index-url http://u:{SECRET}@e/s",
            "numpy @ https://x/y.whl", "-e .", "torch>=999", "-r self.txt", "a==1\\"])
            for _ in range(rng.randint(0, 6))]
        req = self.sb.inp / "self.txt"
        req.write_bytes("\n".join(lines).encode("utf-8", "surrogatepass"))
        return ["resolve", "--gpu", "H100 SXM", "--offline", "--dry-run", "-r", str(req)]

    def _log(self, i: int, rng: random.Random, env: Dict[str, str]) -> List[str]:
        lines = [str(_scalar(rng)) for _ in range(rng.randint(0, 8))]
        lines += rng.sample(["CUBLAS_STATUS_EXECUTION_FAILED when calling cublasGemmEx",
                             "exitcode: -8", "Signal 11 (SIGSEGV)", "\x00" * 50,
                             "NCCL WARN " + "a" * 5000], 2)
        log = self.sb.inp / "crash.log"
        log.write_bytes("\n".join(lines).encode("utf-8", "surrogatepass"))
        return ["doctor", "--snapshot", str(SNAPSHOT), "--log", str(log)]

    def _outpath(self, i: int, rng: random.Random, env: Dict[str, str]) -> List[str]:
        o = self._out_path(rng)
        if rng.random() < 0.5:
            return ["snapshot", "-o", o]
        return ["export", "--lock", str(LOCK), "--format", rng.choice(FORMATS), "--target",
                "h20", "-o", o]

    def _page(self, i: int, rng: random.Random, env: Dict[str, str]) -> List[str]:
        if self.srv is None:
            self.srv = _world(self.sb.base / "world")
        name = f"victim{i}"
        self.srv.raw[f"/pypi/simple/{name}/"] = (200, *_hostile_page(rng, name, self.srv))
        if rng.random() < 0.3:  # plant links to the victim file in the cache
            for sub in ("http", "pages", "metadata"):
                d = self.sb.cache / sub / f"{rng.randrange(256):02x}"
                d.mkdir(parents=True, exist_ok=True)
                link = d / f"{secrets.token_hex(32)}.body"
                if not link.exists():
                    link.symlink_to(self.sb.victim)
        env.update(ENVLOCK_CACHE_DIR=str(self.sb.cache), PLANTED_API_TOKEN=SECRET,
                   HOME=str(self.sb.home), NETRC=str(self.sb.home / ".netrc"))
        url = self.srv.url("pypi").replace("http://", f"http://u:{SECRET}@")
        return ["resolve", "--index-url", url, "--pytorch-index-url",
                f"{self.srv.base}/pytorch", "--gpu", "H100 SXM", "--torch", "==2.5.1", name,
                "-o", self._out_path(rng)]

    def _sdist(self, i: int, rng: random.Random, env: Dict[str, str]) -> List[str]:
        from support.index_server import make_sdist

        if self.srv is None:
            self.srv = _world(self.sb.base / "world")
        kind = rng.choice(sorted(_BACKENDS))
        name = f"hostile{i}"
        pyproject = ('[build-system]\nrequires = []\nbuild-backend = "backend"\n'
                     'backend-path = ["."]\n')
        sd = make_sdist(self.sb.base / "world" / "sdists", name, "1.0",
                        files={"backend.py": _backend(name, kind), "pyproject.toml": pyproject},
                        pkg_info=f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n\n")
        self.srv.indexes["pypi"].add(sd)
        self.sdists += 1
        env.update(ENVLOCK_CACHE_DIR=str(self.sb.cache), PLANTED_API_TOKEN=SECRET,
                   HOME=str(self.sb.home), NETRC=str(self.sb.home / ".netrc"),
                   ENVLOCK_BUILD_DEADLINE="8")
        url = self.srv.url("pypi").replace("http://", f"http://u:{SECRET}@")
        return ["resolve", "--index-url", url, "--pytorch-index-url",
                f"{self.srv.base}/pytorch", "--gpu", "H100 SXM", "--torch", "==2.5.1", name,
                "-o", str(self.sb.out / "l.lock")]


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--case-limit", type=float, default=120.0,
                    help="seconds one case may take before it counts as a hang")
    ap.add_argument("--kinds", default=",".join(KINDS), help="comma-separated kinds to run")
    args = ap.parse_args(argv)
    base = Path(tempfile.mkdtemp(prefix="envlock-hostile-"))
    sandbox = Sandbox(base)
    os.environ.update(HOME=str(sandbox.home), TMPDIR=str(sandbox.tmp),
                      ENVLOCK_CACHE_DIR=str(sandbox.cache), PIP_CONFIG_FILE=os.devnull)
    tempfile.tempdir = str(sandbox.tmp)
    rng = random.Random(args.seed)
    runner = Runner(sandbox, rng, args.case_limit)
    kinds = [k for k in args.kinds.split(",") if k in KINDS]
    weights = [KINDS[k] for k in kinds]
    watch = ArgvWatch()
    watch.start()
    start = time.monotonic()
    try:
        for i in range(args.cases):
            kind = rng.choices(kinds, weights)[0]
            runner.case(i, kind)
            if (i + 1) % 250 == 0:
                print(f"{i + 1} cases, {len(runner.failures)} failing, "
                      f"{time.monotonic() - start:.0f} s", file=sys.stderr, flush=True)
    finally:
        watch.stop.set()
        watch.join()
        if runner.srv is not None:
            runner.srv.__exit__(None, None, None)
    victim_ok = sandbox.victim.read_bytes() == b"precious\n"
    summary = {
        "cases": sum(runner.counts.values()), "seed": args.seed,
        "seconds": round(time.monotonic() - start, 1), "by_kind": dict(runner.counts),
        "exit_codes": dict(sorted(runner.codes.items())), "sdist_builds": runner.sdists,
        "exit_70": sum(1 for f in runner.failures if "exit 70" in f["problems"]),
        "tracebacks": sum(1 for f in runner.failures if "traceback" in f["problems"]),
        "hangs": 0,  # a hang ends the run (faulthandler, exit 3): reaching here means none
        "writes_outside": sum(1 for f in runner.failures
                              if any(p.startswith("writes outside") for p in f["problems"])),
        "secret_in_output": sum(1 for f in runner.failures
                                if any(p.startswith("secret") for p in f["problems"])),
        "secret_in_argv": len(watch.hits), "argv_scans": watch.scans,
        "victim_intact": victim_ok, "failures": runner.failures[:20],
    }
    print(json.dumps(summary, indent=1))
    shutil.rmtree(base, ignore_errors=True)
    return 0 if not runner.failures and not watch.hits and victim_ok else 1


if __name__ == "__main__":
    sys.exit(main())
