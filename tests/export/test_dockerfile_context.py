"""The Dockerfile build context, built for real: every step of the exported Dockerfile is
replayed with real pip in fresh virtual environments, offline, from the context alone.

No Docker daemon here: the image's paths (/opt/envlock, /opt/venv, /etc/envlock,
/usr/local/bin) are mapped into a temporary directory and each COPY, ENV and RUN is
carried out as ``docker build`` would, with this machine's Python as the base image's.
The locked packages and envlock's own dependencies come from the loopback index the lock
was resolved against (planted wheels); envlock itself only from the context's wheel.
"""

from __future__ import annotations

import hashlib
import json
import shlex
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Dict, Iterator, List, Optional

import pytest

from envlock.probe.packages import installed_packages
from exportkit import (ENVLOCK_IMPORTS, World, check_verify_build, instructions,
                       locked_versions, repack_installed)
from support.names import bare_envlock
from support.torch_world import clean_env

pytestmark = pytest.mark.replay

ROOT = Path(__file__).resolve().parents[2]
#: distributions of envlock's dependencies (ENVLOCK_IMPORTS names modules)
DEPS = ("packaging", "resolvelib", "urllib3", "certifi", "tomlkit", "nvidia-ml-py")
assert len(DEPS) == len(ENVLOCK_IMPORTS) - 1


def _envlock(*args: str, env: Dict[str, str], cwd: Optional[Path] = None
             ) -> subprocess.CompletedProcess:  # type: ignore[type-arg]
    return subprocess.run([sys.executable, "-m", "envlock", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=180)


def _env(world: World, d: Path) -> Dict[str, str]:
    return clean_env({"PYTHONPATH": str(ROOT), "PIP_INDEX_URL": world.torch.pypi_url,
                      "ENVLOCK_CACHE_DIR": str(d / "cache"), "SOURCE_DATE_EPOCH": "1700000000"})


@pytest.fixture(scope="module")
def context(world: World, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """``envlock export --format dockerfile -o DIR`` for the h20 target of the multi lock,
    with envlock's dependencies planted on the loopback PyPI."""
    d = tmp_path_factory.mktemp("docker-context")
    pypi = world.torch.server.indexes["pypi"]
    for name in DEPS:
        if name not in pypi.files:
            pypi.add(repack_installed(name, world.directory / "envlock-deps"))
    env = _env(world, d)
    shutil.copy(world.multi_lock, d / "multi.lock")
    proc = _envlock("export", "--format", "dockerfile", "--lock", "multi.lock", "--target",
                    "h20", "-o", "ctx", env=env, cwd=d)
    assert proc.returncode == 0, proc.stderr
    assert "named by tag only" in proc.stderr
    yield d / "ctx"


class Image:
    """The image's filesystem under ``root``; runs Dockerfile steps as a build would."""

    PATHS = ("/usr/local/bin", "/opt/envlock", "/opt/venv", "/etc/envlock")

    def __init__(self, root: Path, context: Path) -> None:
        self.root, self.context = root, context
        for p in self.PATHS:
            (root / p.lstrip("/")).mkdir(parents=True, exist_ok=True)
        env = clean_env()
        env.pop("PYTHONPATH", None)  # nothing from this checkout leaks into the image
        # the image's PATH: its /usr/local/bin, then this machine's (never its envlock)
        host = [p for p in env.get("PATH", "").split(":")
                if p and not (Path(p) / "envlock").exists()]
        env["PATH"] = ":".join([self.map("/usr/local/bin"), *host])
        self.env = env

    def map(self, text: str) -> str:
        for p in self.PATHS:
            text = text.replace(p, str(self.root / p.lstrip("/")))
        return text

    def sh(self, script: str, *args: str) -> subprocess.CompletedProcess:  # type: ignore[type-arg]
        script = self.map(script)
        # the base image's python and pip are this machine's
        script = script.replace("pip --python", f"{shlex.quote(sys.executable)} -m pip "
                                                f"--no-cache-dir --python")
        script = script.replace("python -m venv", f"{shlex.quote(sys.executable)} -m venv")
        return subprocess.run(["sh", "-c", script, *args], env=self.env, capture_output=True,
                              text=True, timeout=300, cwd=str(self.root))

    def build(self, dockerfile: str) -> List[subprocess.CompletedProcess]:  # type: ignore[type-arg]
        """Every step in order, up to the first RUN that fails; the RUN results."""
        runs = []
        for word, args in instructions(dockerfile):
            if word in ("ARG", "FROM", "ENTRYPOINT", "CMD"):
                continue
            if word == "ENV":
                for item in shlex.split(args):
                    key, _, value = item.partition("=")
                    self.env[key] = self.map(value).replace("$PATH", self.env["PATH"])
            elif word == "COPY":
                *sources, dest = args.split()
                target = Path(self.map(dest))
                assert dest.endswith("/"), "several sources need a directory destination"
                target.mkdir(parents=True, exist_ok=True)
                for src in sources:
                    assert "/" not in src and ".." not in src, src  # inside the context
                    shutil.copy(self.context / src, target / src)
            elif word == "RUN":
                runs.append(self.sh(args))
                if runs[-1].returncode != 0:
                    break
            else:
                raise AssertionError(f"the replay does not know {word}")
        return runs


def _dockerfile(ctx: Path) -> str:
    return (ctx / "Dockerfile").read_text()


def _site(venv: Path) -> Path:
    return next((venv / "lib").glob("python*/site-packages"))


def test_context_holds_everything_the_build_copies(context: Path) -> None:
    names = sorted(p.name for p in context.iterdir())
    wheel = next(n for n in names if n.endswith(".whl"))
    assert wheel.startswith("envlock_gpu-") and wheel.endswith("-py3-none-any.whl")
    assert names == sorted(["Dockerfile", "envlock.lock", "requirements.txt",
                            "envlock-requirements.txt", "envlock-wheel.txt", wheel])
    header = _dockerfile(context).splitlines()
    assert header[0].startswith("# Dockerfile for target h20 of ctx/envlock.lock")
    assert header[2] == ("#   envlock export --format dockerfile --lock multi.lock --target h20 "
                         "-o ctx")
    copied = [s for w, a in instructions(_dockerfile(context)) if w == "COPY"
              for s in a.split()[:-1]]
    assert sorted(copied) == sorted(n for n in names if n != "Dockerfile")
    digest = hashlib.sha256((context / wheel).read_bytes()).hexdigest()
    assert f"./{wheel} --hash=sha256:{digest}" in (context / "envlock-wheel.txt").read_text()
    reqs = (context / "envlock-requirements.txt").read_text()
    for name in ("packaging", "urllib3", "certifi", "tomlkit", "nvidia-ml-py"):
        assert f"\n{name}==" in reqs
    for gone in ("requests", "idna", "charset-normalizer"):  # no longer envlock's
        assert f"\n{gone}==" not in reqs
    assert "tomli" not in reqs  # Python 3.11 target: the marker leaves it out


def test_replayed_build_installs_apart_and_verifies(context: Path, world: World,
                                                    tmp_path: Path) -> None:
    image = Image(tmp_path / "image", context)
    runs = image.build(_dockerfile(context))
    envlock_run, lock_run = runs
    assert envlock_run.returncode == 0, envlock_run.stdout + envlock_run.stderr
    # the lock's environment is exactly the lock: nothing of envlock's leaked in
    venv, own = image.root / "opt" / "venv", image.root / "opt" / "envlock"
    assert installed_packages([str(_site(venv))]) == locked_versions(world.multi_lock, "h20")
    mine = installed_packages([str(_site(own))])
    assert set(mine) == {"envlock-gpu", *DEPS}
    # envlock verify --stage build, run by the isolated envlock on the locked interpreter
    (verify,) = [s for s in _last_run(context).split(" && ") if s.startswith("envlock verify")]
    assert "--python /opt/venv/bin/python" in verify
    judged = image.sh(verify + " --json")
    check_verify_build(judged.stdout + judged.stderr[-3000:] * (judged.returncode > 1),
                       judged.returncode, venv, "h20")
    assert lock_run.returncode == judged.returncode, lock_run.stdout + lock_run.stderr
    # docker run: the entrypoint's gate runs before the user's command, or stops it
    (entry,) = [json.loads(a) for w, a in instructions(_dockerfile(context))
                if w == "ENTRYPOINT"]
    gate = image.sh(entry[2].split(" && ")[0])
    run = image.sh(entry[2], entry[3], "python", "-c", "print('the user command ran')")
    if gate.returncode == 0:
        assert run.returncode == 0 and "the user command ran" in run.stdout
    else:  # this machine is no H20 with a driver: the gate keeps the command from running
        assert run.returncode == gate.returncode == 1, gate.stdout + gate.stderr
        assert "the user command ran" not in run.stdout


def _last_run(context: Path) -> str:
    return [a for w, a in instructions(_dockerfile(context)) if w == "RUN"][-1]


def _tamper_wheel(ctx: Path) -> None:
    wheel = next(ctx.glob("envlock_gpu-*.whl"))
    with zipfile.ZipFile(wheel, "a") as zf:
        zf.writestr("envlock/planted.py", "print('not envlock')\n")


def _flip_hash(ctx: Path, file: str, nth: int = 0) -> None:
    """Change one hex digit of the ``nth`` ``--hash=sha256:`` in ``file``."""
    text = (ctx / file).read_text()
    at = -1
    for _ in range(nth + 1):
        at = text.index("--hash=sha256:", at + 1)
    pos = at + len("--hash=sha256:")
    digit = "0" if text[pos] != "0" else "1"
    (ctx / file).write_text(text[:pos] + digit + text[pos + 1:])


@pytest.mark.parametrize("tamper, step", [
    (_tamper_wheel, 0),
    (lambda c: _flip_hash(c, "envlock-wheel.txt"), 0),
    (lambda c: _flip_hash(c, "envlock-requirements.txt", 2), 0),
    (lambda c: _flip_hash(c, "requirements.txt", 3), 1),
], ids=["wheel-bytes", "wheel-hash", "dependency-hash", "lock-hash"])
def test_a_tampered_context_fails_the_build(  # type: ignore[no-untyped-def]
        context: Path, tmp_path: Path, tamper, step: int) -> None:
    ctx = tmp_path / "ctx"
    shutil.copytree(context, ctx)
    tamper(ctx)
    runs = Image(tmp_path / "image", ctx).build(_dockerfile(ctx))
    assert len(runs) == step + 1 and all(r.returncode == 0 for r in runs[:step])
    failed = runs[step]
    assert failed.returncode != 0
    assert "DO NOT MATCH THE HASHES" in failed.stderr, failed.stderr[-2000:]


def test_no_output_names_bare_envlock(context: Path, run_export, locks_dir: Path) -> None:
    """Every file of the build context (the wheel's metadata too) and every export format
    of every fixture lock: nothing asks an index for the unrelated ``envlock``."""
    from envlock.export import FORMATS

    texts = {p.name: p.read_text() for p in context.iterdir() if p.suffix != ".whl"}
    with zipfile.ZipFile(next(context.glob("*.whl"))) as zf:
        texts.update({n: zf.read(n).decode() for n in zf.namelist() if ".dist-info/" in n})
    for lock in sorted(locks_dir.glob("*.lock")):
        for fmt in FORMATS:
            if fmt == "dockerfile":
                continue  # the context above
            r = run_export("--format", fmt, "--lock", lock.name, "--target",
                           _first_target(lock))
            texts[f"{lock.name}:{fmt}"] = r.stdout + r.stderr
    found = {k: hits for k, t in texts.items() if (hits := list(bare_envlock(t)))}
    assert found == {}
    assert "Name: envlock-gpu" in texts[next(k for k in texts if k.endswith("METADATA"))]


def _first_target(lock: Path) -> str:
    from envlock.lock.io import load_lock

    return load_lock(lock).targets[0].name


def test_envlock_from_a_wheel_or_url_pinned_by_sha256(context: Path, world: World,
                                                      tmp_path: Path) -> None:
    wheel = next(context.glob("envlock_gpu-*.whl"))
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    shutil.copy(world.multi_lock, tmp_path / "multi.lock")
    env = _env(world, tmp_path)
    base = ["export", "--format", "dockerfile", "--lock", "multi.lock", "--target", "h20"]
    ok = _envlock(*base, "-o", "a", "--envlock-from", str(wheel), "--envlock-sha256", digest,
                  env=env, cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert (tmp_path / "a" / "envlock-wheel.txt").read_text() == \
        (context / "envlock-wheel.txt").read_text()
    assert (tmp_path / "a" / wheel.name).read_bytes() == wheel.read_bytes()
    url = "https://example.com/wheels/" + wheel.name
    ok = _envlock(*base, "-o", "b", "--envlock-from", url, "--envlock-sha256", digest,
                  env=env, cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert (f"envlock-gpu @ {url} --hash=sha256:{digest}"
            in (tmp_path / "b" / "envlock-wheel.txt").read_text())
    assert not list((tmp_path / "b").glob("*.whl"))
    assert wheel.name not in (tmp_path / "b" / "Dockerfile").read_text().split("COPY", 1)[1]
    bad = "0" * 64
    for args, message in [
        (["--envlock-from", str(wheel), "--envlock-sha256", bad],
         f"not the --envlock-sha256 {bad}"),
        (["--envlock-from", str(wheel)], "--envlock-from needs --envlock-sha256"),
        (["--envlock-sha256", digest], "--envlock-sha256 needs --envlock-from"),
        (["--envlock-from", "http://example.com/" + wheel.name, "--envlock-sha256", digest],
         "use https"),
        (["--envlock-from", str(context / "Dockerfile"), "--envlock-sha256", digest],
         "not a wheel of envlock-gpu"),
        (["--envlock-from", str(wheel), "--envlock-sha256", "abc"], "is not a sha256"),
    ]:
        r = _envlock(*base, "-o", "c", *args, env=env, cwd=tmp_path)
        assert r.returncode == 2 and message in r.stderr, (args, r.stderr)
        assert len(r.stderr.strip().splitlines()) <= 2, r.stderr  # no traceback
    assert not (tmp_path / "c").exists()
