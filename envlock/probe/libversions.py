"""What each copy of a CUDA library says its version is.

Each library is asked through its own version function (``cudaRuntimeGetVersion``,
``cublasGetProperty``, ``cudnnGetVersion``, ``ncclGetVersion``, ...) via ctypes in a
short-lived child process: none of them needs a GPU, and a library whose constructor
misbehaves cannot take the caller down. Answers are remembered by real path, size and
mtime in a small JSON cache, so a second snapshot does not load the libraries again.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

__all__ = ["decode_version", "api_versions"]

_VERSION_CACHE_SCHEMA = "envlock.library-versions/1"
_CHILD_TIMEOUT_S = 60.0


def decode_version(name: str, raw: Sequence[int]) -> Optional[str]:
    """Turn what a library's version function returned into a dotted version.

    >>> decode_version("cudart", [12040]), decode_version("nccl", [22105])
    ('12.4', '2.21.5')
    >>> decode_version("cudnn", [90100]), decode_version("cudnn", [8902])
    ('9.1.0', '8.9.2')
    """
    if not raw or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0
                          for v in raw):
        return None
    if name == "cudart" and len(raw) == 1 and raw[0] > 0:
        v = raw[0]  # CUDART_VERSION: major*1000 + minor*10
        return f"{v // 1000}.{v % 1000 // 10}"
    if name in ("cublas", "cublasLt"):
        if len(raw) == 3:  # libraryPropertyType MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL
            return ".".join(str(v) for v in raw)
        if len(raw) == 1 and raw[0] > 0:  # CUBLAS_VERSION: major*10000 + minor*100 + patch
            v = raw[0]
            return f"{v // 10000}.{v % 10000 // 100}.{v % 100}"
    if name in ("cudnn", "nccl") and len(raw) == 1 and raw[0] > 0:
        v = raw[0]
        if v >= 10000:  # cuDNN 9+, NCCL 2.9+: major*10000 + minor*100 + patch
            return f"{v // 10000}.{v % 10000 // 100}.{v % 100}"
        return f"{v // 1000}.{v % 1000 // 100}.{v % 100}"  # major*1000 + minor*100 + patch
    if name == "nvjitlink" and len(raw) == 2:
        return f"{raw[0]}.{raw[1]}"
    return None


#: Run with ``python -I -S``: reads ``[[name, path], ...]`` on stdin, writes one JSON
#: ``[index, raw]`` line per library as soon as it is read, so a crash loses one answer.
#: The library's own writes to stdout are sent to stderr (discarded) first.
_CHILD = r"""
import ctypes, json, os, sys
out = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)
C = ctypes
def ints(lib, fn):
    f = getattr(lib, fn); f.restype = C.c_int; f.argtypes = [C.POINTER(C.c_int)]
    v = C.c_int(0)
    return [v.value] if f(C.byref(v)) == 0 else None
def props(lib, fn):
    f = getattr(lib, fn); f.restype = C.c_int; f.argtypes = [C.c_int, C.POINTER(C.c_int)]
    got = []
    for t in (0, 1, 2):
        v = C.c_int(0)
        if f(t, C.byref(v)) != 0:
            return None
        got.append(v.value)
    return got
def size_t(lib, fn):
    f = getattr(lib, fn); f.restype = C.c_size_t; f.argtypes = []
    return [int(f())]
def cublaslt(lib):
    try:
        return props(lib, "cublasLtGetProperty")
    except AttributeError:
        return size_t(lib, "cublasLtGetVersion")
def nvjitlink(lib):
    f = lib.nvJitLinkVersion; f.restype = C.c_int; f.argtypes = [C.POINTER(C.c_uint)] * 2
    a, b = C.c_uint(0), C.c_uint(0)
    return [a.value, b.value] if f(C.byref(a), C.byref(b)) == 0 else None
READ = {"cudart": lambda l: ints(l, "cudaRuntimeGetVersion"),
        "cublas": lambda l: props(l, "cublasGetProperty"),
        "cublasLt": cublaslt,
        "cudnn": lambda l: size_t(l, "cudnnGetVersion"),
        "nccl": lambda l: ints(l, "ncclGetVersion"),
        "nvjitlink": nvjitlink}
for i, (name, path) in enumerate(json.loads(sys.stdin.read())):
    raw = None
    try:
        raw = READ[name](C.CDLL(path, mode=os.RTLD_LOCAL))
    except Exception:
        pass
    out.write(json.dumps([i, raw]) + "\n")
    out.flush()
"""


def api_versions(copies: Sequence[Tuple[str, str]], environ: Mapping[str, str],
                 cache_path: Optional[Path]) -> Dict[str, Optional[str]]:
    """``real path -> version the library reports`` for each ``(name, real path)``
    (``None``: it could not be asked)."""
    cache = _load_version_cache(cache_path)
    result: Dict[str, Optional[str]] = {}
    todo: List[Tuple[str, str, Tuple[int, int]]] = []
    for name, real in copies:
        try:
            st = os.stat(real)
        except OSError:
            result[real] = None
            continue
        stamp = (st.st_size, st.st_mtime_ns)
        hit = cache.get(real)
        if hit is not None and (hit.get("size"), hit.get("mtime_ns")) == stamp:
            v = hit.get("version")
            result[real] = v if isinstance(v, str) else None
        else:
            todo.append((name, real, stamp))
    if not todo:
        return result
    answers = _ask_child([(n, r) for n, r, _ in todo], environ)
    changed = False
    for i, (name, real, stamp) in enumerate(todo):
        known, raw = answers.get(i, (False, None))
        version = decode_version(name, raw) if raw is not None else None
        result[real] = version
        if known:
            cache[real] = {"size": stamp[0], "mtime_ns": stamp[1], "version": version}
            changed = True
    if changed and cache_path is not None:
        _save_version_cache(cache_path, cache)
    return result


def _ask_child(jobs: List[Tuple[str, str]],
               environ: Mapping[str, str]) -> Dict[int, Tuple[bool, Optional[List[int]]]]:
    """``index -> (settled, raw)``; unsettled answers (a crash, a timeout) are not cached.

    A child that dies part-way (a library crashed it) is restarted after the library it was
    on, which answers nothing this time.
    """
    answers: Dict[int, Tuple[bool, Optional[List[int]]]] = {}
    if not sys.executable:
        return answers
    child_env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    if environ.get("LD_LIBRARY_PATH"):
        child_env["LD_LIBRARY_PATH"] = environ["LD_LIBRARY_PATH"]
    deadline = time.monotonic() + _CHILD_TIMEOUT_S
    start = 0
    while start < len(jobs):
        left = deadline - time.monotonic()
        if left <= 0:
            break
        batch = jobs[start:]
        try:
            proc = subprocess.run([sys.executable, "-I", "-S", "-c", _CHILD],
                                  input=json.dumps(batch), capture_output=True, text=True,
                                  env=child_env, timeout=left, check=False)
            stdout, finished = proc.stdout, True
        except subprocess.TimeoutExpired as exc:
            stdout = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            finished = False
        except (OSError, subprocess.SubprocessError):
            break
        got = 0
        for line in stdout.splitlines():
            try:
                i, raw = json.loads(line)
            except (ValueError, TypeError):
                continue
            if isinstance(i, int) and 0 <= i < len(batch) and isinstance(raw, (list, type(None))):
                answers[start + i] = (True, raw)
                got = max(got, i + 1)
        if got == len(batch) or not finished:
            break
        answers[start + got] = (False, None)  # took the child down: not cached, not retried now
        start += got + 1
    return answers


def _load_version_cache(path: Optional[Path]) -> Dict[str, Dict[str, object]]:
    if path is None:
        return {}
    try:
        from envlock._cache_files import read_entry

        data = json.loads(read_entry(Path(path).parent, path, 16 * 1024 * 1024))
    except (OSError, ValueError, RecursionError):
        return {}
    if not isinstance(data, dict) or data.get("schema") != _VERSION_CACHE_SCHEMA:
        return {}
    entries = data.get("entries")
    if not isinstance(entries, dict):
        return {}
    return {k: v for k, v in entries.items() if isinstance(k, str) and isinstance(v, dict)}


def _save_version_cache(path: Path, entries: Mapping[str, Mapping[str, object]]) -> None:
    """Write atomically; a cache we cannot write only costs speed next time."""
    path = Path(path)
    doc = {"schema": _VERSION_CACHE_SCHEMA, "entries": dict(sorted(entries.items()))}
    from envlock._cache_files import write_entry

    try:  # never through a link planted in a shared cache directory
        write_entry(path.parent, path, (json.dumps(doc, indent=1) + "\n").encode("utf-8"))
    except OSError:
        pass
