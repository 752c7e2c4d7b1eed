"""Core metadata of a source distribution, read or built the standard way.

An sdist's ``PKG-INFO`` is trustworthy only from Metadata-Version 2.2 on (PEP 643), and
only for fields not listed as ``Dynamic``. Older sdists (``setup.py`` with
``install_requires``) write a ``PKG-INFO`` without any ``Requires-Dist``: reading it would
lock the package bare. For those, the metadata is *built*, as pip and uv do (PEP 517):

1. unpack the sdist into a temporary directory (paths checked: nothing escapes it);
2. read ``[build-system]`` from ``pyproject.toml`` (absent: setuptools' legacy backend);
3. create a throwaway virtual environment without the host's site-packages and install
   the build requirements into it with pip, from the configured indexes;
4. call the backend's ``get_requires_for_build_wheel`` (install those too) and
   ``prepare_metadata_for_build_wheel``; a backend without that hook builds a wheel and
   the ``METADATA`` comes out of it.

The hooks run in a subprocess of the build environment's interpreter, through a small
runner script of ours (the backend's code never runs in envlock's process), contained by
:mod:`envlock.index.contain`: their own process group (and, where the platform allows it
without root, their own PID and network namespaces), a scrubbed environment with ``HOME``
in the build's temporary directory, one total deadline for the whole build (pip included,
``ENVLOCK_BUILD_DEADLINE``), and everything they started killed when a step ends. pip
gets the index credentials through its environment (``PIP_INDEX_URL`` ...), never its
command line, which every local user can read in ``ps``. The result is cached by the
sdist's sha256 by the caller, so a build happens once per file.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import venv
import zipfile
from dataclasses import dataclass
from email.parser import BytesHeaderParser
from pathlib import Path, PurePosixPath
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from envlock.errors import BuildError, IndexError_, NoBuildError

__all__ = ["needs_build", "pkg_info", "build_metadata", "BuildSettings", "declared_requires"]

#: The backend pip and uv assume when an sdist has no ``[build-system]`` table.
_LEGACY_BACKEND = "setuptools.build_meta:__legacy__"
_LEGACY_REQUIRES = ("setuptools>=40.8.0",)


@dataclass(frozen=True)
class BuildSettings:
    """How to install build requirements: the same indexes the resolution uses."""

    index_url: str
    extra_index_urls: Tuple[str, ...] = ()
    find_links: Tuple[str, ...] = ()
    #: seconds one sdist's whole build may take (pip installs and hooks together)
    timeout: float = 600.0


def needs_build(pkg_info_blob: Optional[bytes]) -> bool:
    """Whether ``PKG-INFO`` cannot be trusted for Requires-Dist (PEP 643).

    >>> needs_build(b"Metadata-Version: 2.2\\nName: a\\nVersion: 1\\n\\n")
    False
    >>> needs_build(b"Metadata-Version: 2.1\\nName: a\\nVersion: 1\\n\\n")
    True
    >>> needs_build(b"Metadata-Version: 2.2\\nName: a\\nVersion: 1\\nDynamic: Requires-Dist\\n")
    True
    """
    if pkg_info_blob is None:
        return True
    msg = BytesHeaderParser().parsebytes(pkg_info_blob)
    if _metadata_version(msg) < (2, 2):
        return True
    dynamic = {v.strip().lower() for v in (msg.get_all("Dynamic") or [])}
    return bool(dynamic & {"requires-dist", "requires-python", "provides-extra"})


def declared_requires(pkg_info_blob: Optional[bytes]) -> Optional[List[str]]:
    """The ``Requires-Dist`` lines of a ``PKG-INFO`` written by a tool that knew about
    ``Dynamic`` (Metadata-Version 2.2 or later), even where it marks them dynamic; None
    for an older one, whose missing lines say nothing (setuptools wrote none at all).

    What ``--trust-pkg-info`` reads instead of a build, and what the hint of a failed
    build shows: flash-attn's sdist lists ``torch`` and ``einops`` there, marked dynamic,
    and its ``setup.py`` imports torch, which its build requirements do not name.
    """
    if pkg_info_blob is None:
        return None
    msg = BytesHeaderParser().parsebytes(pkg_info_blob)
    if not (2, 2) <= _metadata_version(msg) < (3, 0):
        return None
    return [v.strip() for v in (msg.get_all("Requires-Dist") or [])]


def _metadata_version(msg: Any) -> Tuple[int, int]:
    """``Metadata-Version`` as (major, minor); (0, 0) when absent or malformed."""
    m = re.match(r"^(\d+)\.(\d+)$", (msg.get("Metadata-Version") or "").strip())
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def pkg_info(data: bytes, filename: str) -> Optional[bytes]:
    """The top-level ``PKG-INFO`` of an sdist archive, or None when it has none."""
    try:
        if filename.endswith(".zip"):
            with zipfile.ZipFile(_bytes_io(data)) as zf:
                for name in zf.namelist():
                    if name.count("/") == 1 and name.endswith("/PKG-INFO"):
                        return zf.read(name)
            return None
        with tarfile.open(fileobj=_bytes_io(data), mode="r:*") as tf:
            for member in tf.getmembers():
                if member.name.count("/") == 1 and member.name.endswith("/PKG-INFO"):
                    f = tf.extractfile(member)
                    if f is not None:
                        return f.read()
    except (tarfile.TarError, zipfile.BadZipFile, OSError, EOFError, ValueError) as exc:
        raise IndexError_(f"{filename}: unreadable sdist ({exc})") from None
    return None


def build_metadata(data: bytes, filename: str, project: str, settings: BuildSettings,
                   *, no_build: bool = False,
                   cancel: Optional[threading.Event] = None) -> bytes:
    """The METADATA a PEP 517 backend produces for this sdist."""
    if no_build:
        raise NoBuildError(
            f"{project} ({filename}) is only available as a source distribution whose "
            f"dependencies must be built (PKG-INFO lacks reliable Requires-Dist), and "
            f"--no-build forbids running its build backend")
    try:
        return _build_metadata(data, filename, settings,
                               _Run(time.monotonic() + settings.timeout, cancel))
    except OSError as exc:  # the disk, not the package: say which, in one line
        raise BuildError(f"{filename}: its build environment could not be prepared "
                         f"({os_reason(exc)})") from None


def os_reason(exc: OSError) -> str:
    """One short line for an OSError, also for the list of errors ``shutil.copytree``
    gathers (whose text is every file it failed on)."""
    if isinstance(exc, shutil.Error) and exc.args and isinstance(exc.args[0], list) \
            and exc.args[0]:
        first = exc.args[0][0]
        more = len(exc.args[0]) - 1
        reason = str(first[-1]) if isinstance(first, tuple) and first else str(first)
        return reason + (f" (and {more} more file{'s' if more > 1 else ''})" if more else "")
    text = exc.strerror or str(exc) or type(exc).__name__
    where = exc.filename if isinstance(exc.filename, str) else None
    return f"{text}: {where}" if where else text


@dataclass(frozen=True)
class _Run:
    """One build's total deadline (``time.monotonic()``) and the client's cancel switch."""

    deadline: float
    cancel: Optional[threading.Event] = None


#: the largest METADATA a build may produce (real ones are a few KB; torch's is 2 KB)
MAX_METADATA_BYTES = 16 * 1024 * 1024
#: the largest hook result file, and the most build requirements a hook may ask for
_MAX_RESULT_BYTES = 1024 * 1024
_MAX_REQUIRES = 1000


def _build_metadata(data: bytes, filename: str, settings: BuildSettings, run: _Run) -> bytes:
    from envlock.index.contain import build_directory

    with build_directory("envlock-build-") as tmp:
        return _build_in(tmp, data, filename, settings, run)


def _build_in(root: Path, data: bytes, filename: str, settings: BuildSettings,
              run: _Run) -> bytes:
    src = _unpack(data, filename, root / "src")
    requires, backend, backend_path = _build_system(src, filename)
    env_dir = root / "env"
    python = _make_env(env_dir)
    _install_build_requires(python, requires, settings, filename, run)
    out = root / "out"
    out.mkdir()
    home = root / "home"
    extra = _hook(python, src, backend, backend_path, "get_requires_for_build_wheel",
                  out, home, filename, run)
    if isinstance(extra, list) and extra:
        if len(extra) > _MAX_REQUIRES or not all(isinstance(r, str) and 0 < len(r) < 1000
                                                 for r in extra):
            raise BuildError(f"{filename}: its build backend asked for build requirements "
                             f"that are not a list of requirement strings")
        _pip_install(python, list(extra), settings, filename, run)
    result = _hook(python, src, backend, backend_path, "prepare_metadata",
                   out, home, filename, run)
    if not isinstance(result, str):
        raise BuildError(f"{filename}: the build backend returned no metadata")
    return _read_metadata(result, out, filename)


def _read_metadata(result: str, out: Path, filename: str) -> bytes:
    """The METADATA file a hook named: inside its output directory (a backend names the
    directory, so it could name any file of the user's), a regular file, at most
    :data:`MAX_METADATA_BYTES`."""
    real = os.path.realpath(os.path.join(out, result))
    base = os.path.realpath(out)
    if os.path.commonpath([real, base]) != base:
        raise BuildError(f"{filename}: the build backend named a METADATA file outside its "
                         f"output directory")
    try:
        fd = os.open(real, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)
                     | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise BuildError(f"{filename}: the build backend's METADATA is unreadable "
                         f"({exc.strerror or exc})") from None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise BuildError(f"{filename}: the build backend's METADATA is not a file")
        if st.st_size > MAX_METADATA_BYTES:
            raise BuildError(f"{filename}: the build backend's METADATA is {st.st_size} bytes, "
                             f"more than the {MAX_METADATA_BYTES // (1024 * 1024)} MiB "
                             f"envlock reads")
        blob = fh.read(MAX_METADATA_BYTES + 1)
    if len(blob) > MAX_METADATA_BYTES:
        raise BuildError(f"{filename}: the build backend's METADATA is more than the "
                         f"{MAX_METADATA_BYTES // (1024 * 1024)} MiB envlock reads")
    return blob


# -- steps -----------------------------------------------------------------------------------

def _bytes_io(data: bytes) -> io.BytesIO:
    return io.BytesIO(data)


def _safe(name: str) -> bool:
    p = PurePosixPath(name)
    return not p.is_absolute() and ".." not in p.parts and "\\" not in name


def _unpack(data: bytes, filename: str, dest: Path) -> Path:
    """Unpack into ``dest``; the single top-level directory is the source tree."""
    dest.mkdir(parents=True)
    try:
        if filename.endswith(".zip"):
            with zipfile.ZipFile(_bytes_io(data)) as zf:
                for info in zf.infolist():
                    if not _safe(info.filename):
                        raise BuildError(f"{filename}: unsafe path {info.filename!r}")
                zf.extractall(dest)
        else:
            with tarfile.open(fileobj=_bytes_io(data), mode="r:*") as tf:
                members = []
                for m in tf.getmembers():
                    if not _safe(m.name) or m.isdev():
                        raise BuildError(f"{filename}: unsafe member {m.name!r}")
                    if (m.issym() or m.islnk()) and not _safe(
                            str(PurePosixPath(m.name).parent / m.linkname)):
                        raise BuildError(f"{filename}: link {m.name!r} leaves the archive")
                    members.append(m)
                if sys.version_info >= (3, 12) or hasattr(tarfile, "data_filter"):
                    tf.extractall(dest, members=members, filter="data")
                else:  # pragma: no cover - old Pythons; members checked above
                    tf.extractall(dest, members=members)
    except (tarfile.TarError, zipfile.BadZipFile, OSError, EOFError) as exc:
        raise BuildError(f"{filename}: unreadable sdist ({exc})") from None
    tops = [p for p in dest.iterdir()]
    if len(tops) == 1 and tops[0].is_dir():
        return tops[0]
    return dest


def _build_system(src: Path, filename: str) -> Tuple[List[str], str, Optional[str]]:
    pp = src / "pyproject.toml"
    if not pp.is_file():
        return list(_LEGACY_REQUIRES), _LEGACY_BACKEND, None
    from envlock import _toml

    try:
        doc = _toml.loads(pp.read_text(encoding="utf-8"))
    except Exception as exc:  # noqa: BLE001 - any parse failure is the sdist's fault
        raise BuildError(f"{filename}: unreadable pyproject.toml ({exc})") from None
    bs = doc.get("build-system")
    if not isinstance(bs, dict):
        return list(_LEGACY_REQUIRES), _LEGACY_BACKEND, None
    requires = bs.get("requires", [])
    if not isinstance(requires, list) or not all(isinstance(r, str) for r in requires):
        raise BuildError(f"{filename}: [build-system].requires is not a list of strings")
    backend = bs.get("build-backend")
    if backend is None:
        return list(requires) or list(_LEGACY_REQUIRES), _LEGACY_BACKEND, None
    if not isinstance(backend, str):
        raise BuildError(f"{filename}: [build-system].build-backend is not a string")
    paths = bs.get("backend-path")
    backend_path = None
    if isinstance(paths, list) and paths:
        backend_path = os.pathsep.join(str((src / p).resolve()) for p in paths
                                       if isinstance(p, str) and _safe(p))
    return list(requires), backend, backend_path


def _make_env(env_dir: Path) -> str:
    """A virtual environment without pip and without the host's site-packages."""
    venv.EnvBuilder(with_pip=False, system_site_packages=False, clear=True,
                    symlinks=os.name != "nt").create(env_dir)
    bindir = "Scripts" if os.name == "nt" else "bin"
    exe = "python.exe" if os.name == "nt" else "python"
    return str(env_dir / bindir / exe)


def _site_packages(python: str) -> str:
    out = subprocess.run([python, "-I", "-c",
                          "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         capture_output=True, text=True, timeout=60)
    return out.stdout.strip()


#: (requirements, settings) -> a site-packages directory pip populated once in this
#: process; each build gets its own copy, so builds stay isolated from each other.
_TEMPLATES: Dict[Tuple[Tuple[str, ...], BuildSettings], Path] = {}
_TEMPLATES_LOCK = threading.Lock()
_TEMPLATE_ROOT: List[tempfile.TemporaryDirectory] = []


def _install_build_requires(python: str, requires: Sequence[str], settings: BuildSettings,
                            filename: str, run: _Run) -> None:
    if not requires:
        return
    key = (tuple(sorted(requires)), settings)
    target = Path(_site_packages(python))
    with _TEMPLATES_LOCK:
        template = _TEMPLATES.get(key)
        if template is None:
            if not _TEMPLATE_ROOT:
                from envlock.index.contain import Reaper

                _TEMPLATE_ROOT.append(tempfile.TemporaryDirectory(prefix="envlock-buildenv-",
                                                                  ignore_cleanup_errors=True))
                Reaper.tell(f"+dir {_TEMPLATE_ROOT[0].name}")
            template = Path(_TEMPLATE_ROOT[0].name) / str(len(_TEMPLATES))
            _pip_install_into(str(template), requires, settings, filename, run)
            _TEMPLATES[key] = template
    link_tree(template, target)


def link_tree(template: Path, target: Path) -> None:
    """Give a build environment the template's packages: its own directory tree (a build
    may add, replace or remove files there), with every file a hard link to the
    template's, or a copy where a link cannot be made (another file system).

    Copies cost the build requirements' full size for every build: backtracking through
    old vLLM sdists, each needing torch to build, filled 40 GB of /tmp (measured). The
    hooks run with PYTHONDONTWRITEBYTECODE and pip replaces files rather than writing into
    them, so the shared inodes are only read.
    """
    shutil.copytree(template, target, dirs_exist_ok=True, symlinks=True,
                    copy_function=_link_or_copy)


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _pip_install(python: str, requires: Sequence[str], settings: BuildSettings,
                 filename: str, run: _Run) -> None:
    if requires:
        _pip_install_into(_site_packages(python), requires, settings, filename, run)


def pip_environment(settings: BuildSettings,
                    environ: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    """pip's environment for installing build requirements: the indexes (credentials
    included) as ``PIP_INDEX_URL`` / ``PIP_EXTRA_INDEX_URL`` / ``PIP_FIND_LINKS``, which
    only this user can read (``/proc/PID/environ`` is private; argv is not)."""
    env = {k: v for k, v in (os.environ if environ is None else environ).items()
           if k not in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS",
                        "PIP_NO_INDEX", "PIP_REQUIRE_VIRTUALENV", "PYTHONPATH", "PYTHONHOME")}
    env.update(PIP_NO_INPUT="1", PYTHONNOUSERSITE="1", PIP_INDEX_URL=settings.index_url)
    if settings.extra_index_urls:
        env["PIP_EXTRA_INDEX_URL"] = " ".join(settings.extra_index_urls)
    if settings.find_links:
        env["PIP_FIND_LINKS"] = " ".join(settings.find_links)
    return env


def _pip_install_into(target: str, requires: Sequence[str], settings: BuildSettings,
                      filename: str, run: _Run) -> None:
    from envlock.index.contain import run_step
    import importlib.util

    if importlib.util.find_spec("pip") is None:
        raise BuildError(f"{filename}: its metadata must be built, and installing its build "
                         f"requirements ({', '.join(requires)}) needs pip in the Python that "
                         f"runs envlock ({sys.executable})")
    # no URL on the command line: the indexes and their credentials are in pip's
    # environment (pip_environment); build requirements come as wheels only, so pip itself
    # never runs another package's build backend with envlock's whole environment
    cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--no-input",
           "--disable-pip-version-check", "--no-warn-script-location", "--ignore-installed",
           "--no-user", "--upgrade", "--only-binary", ":all:", "--target", target,
           "--", *requires]
    Path(target).mkdir(parents=True, exist_ok=True)
    log = Path(target).parent / f".pip-{Path(target).name}.log"
    step = run_step(cmd, cwd=Path(target).parent, env=pip_environment(settings), log=log,
                    deadline=run.deadline, cancel=run.cancel,
                    what=f"{filename}: installing its build requirements "
                         f"({', '.join(requires)})")
    if step.returncode != 0:
        raise BuildError(f"{filename}: installing its build requirements "
                         f"({', '.join(requires)}) failed: "
                         f"{_last_line(step.output, step.returncode)}")


#: Runs inside the build environment: calls one hook and writes its result as JSON.
_RUNNER = r"""
import importlib, json, os, sys, zipfile
backend_name, backend_path, hook, out_dir, result_file = sys.argv[1:6]
if backend_path:
    sys.path[:0] = backend_path.split(os.pathsep)
mod_name, _, obj_path = backend_name.partition(":")
backend = importlib.import_module(mod_name)
for part in filter(None, obj_path.split(".")):
    backend = getattr(backend, part)
result = None
if hook == "get_requires_for_build_wheel":
    fn = getattr(backend, "get_requires_for_build_wheel", None)
    result = list(fn({})) if fn is not None else []
else:
    meta_dir = os.path.join(out_dir, "metadata")
    os.makedirs(meta_dir, exist_ok=True)
    fn = getattr(backend, "prepare_metadata_for_build_wheel", None)
    if fn is not None:
        name = fn(meta_dir, {})
        result = os.path.join(meta_dir, name, "METADATA")
    else:
        wheel_dir = os.path.join(out_dir, "wheel")
        os.makedirs(wheel_dir, exist_ok=True)
        whl = backend.build_wheel(wheel_dir, {})
        with zipfile.ZipFile(os.path.join(wheel_dir, whl)) as zf:
            names = [n for n in zf.namelist()
                     if n.count("/") == 1 and n.endswith(".dist-info/METADATA")]
            target = os.path.join(out_dir, "METADATA")
            with open(target, "wb") as f:
                f.write(zf.read(names[0]))
        result = target
with open(result_file, "w") as f:
    json.dump({"result": result}, f)
"""


def _hook(python: str, src: Path, backend: str, backend_path: Optional[str], hook: str,
          out: Path, home: Path, filename: str, run: _Run) -> object:
    from envlock.index.contain import hook_environment, run_step

    runner = out / "_envlock_hook.py"
    runner.write_text(_RUNNER)
    result_file = out / f"{hook}.json"
    cmd = [python, str(runner), backend, backend_path or "", hook, str(out), str(result_file)]
    step = run_step(cmd, cwd=src, env=hook_environment(home), log=out / f"{hook}.log",
                    deadline=run.deadline, cancel=run.cancel, isolate=True,
                    what=f"{filename}: its build backend ({backend})")
    if step.returncode != 0:
        raise BuildError(f"{filename}: its build backend ({backend}) failed: "
                         f"{_last_line(step.output, step.returncode)}")
    try:
        fd = os.open(result_file, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)
                     | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as fh:
            blob = fh.read(_MAX_RESULT_BYTES + 1)
        if len(blob) > _MAX_RESULT_BYTES:
            raise ValueError("the result is too large")
        doc = json.loads(blob)
        return doc["result"]
    except (OSError, ValueError, KeyError, TypeError, RecursionError) as exc:
        raise BuildError(f"{filename}: its build backend gave no result "
                         f"({type(exc).__name__})") from None


def _last_line(text: str, returncode: Optional[int] = None) -> str:
    """The end of a failed step's output, in one line, with how it ended.

    A line that points at a log file inside the build's temporary directory (meson's "A
    full log can be found at /tmp/envlock-build-.../meson-log.txt") is useless once that
    directory is gone: the lines before it are shown instead (the tail, up to three)."""
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    kept = [ln for ln in lines if not _TEMP_LOG.search(ln)]
    if len(kept) < len(lines):
        tail = " | ".join(kept[-3:])[-400:]
    else:
        tail = kept[-1][:300] if kept else ""
    how = _ended(returncode)
    if not tail:
        return "no output" + (f" ({how})" if how else "")
    return tail + (f" ({how})" if how else "")


#: a log path inside a build's temporary directory, deleted when the build ends
_TEMP_LOG = re.compile(r"envlock-build(env)?-[^\s/]*/\S*\.(log|txt)\b")


def _ended(returncode: Optional[int]) -> str:
    """``exit status 1`` / ``killed by signal SIGKILL`` (POSIX: a negative return code)."""
    if returncode is None or returncode == 0:
        return ""
    if returncode < 0:
        import signal

        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = str(-returncode)
        return f"killed by signal {name}"
    return f"exit status {returncode}"
