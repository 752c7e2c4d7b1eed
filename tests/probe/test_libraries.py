"""The native library probe against real shared objects, real loaders and real caches.

Nothing in envlock is patched: fake CUDA libraries are compiled with gcc from
``tests/support/native/fakecuda.c`` (real entry points, real signatures, known answers),
the real ``nvidia-cuda-runtime-cu12`` wheel is asked for its version through ctypes, and
every prediction of which copy the loader picks is checked by a child process that
really ``dlopen``-s the consumer and reads ``/proc/self/maps``.
"""

from __future__ import annotations

import ctypes
import importlib.metadata
import json
import os
import platform
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import pytest
from packaging.version import Version

from envlock.probe.ldcache import read_ld_cache
from envlock.probe.libraries import LIBRARY_NAMES, decode_version, library_name, probe_libraries
from envlock.snapshot import Library

GCC = shutil.which("gcc")
NATIVE = Path(__file__).resolve().parents[1] / "support" / "native"
needs_gcc = pytest.mark.skipif(GCC is None, reason="gcc is not installed")


def _runtime_wheel() -> Optional[Tuple[importlib.metadata.Distribution, Path]]:
    try:
        dist = importlib.metadata.distribution("nvidia-cuda-runtime-cu12")
    except importlib.metadata.PackageNotFoundError:
        return None
    for f in dist.files or []:
        if f.name.startswith("libcudart.so.12"):
            return dist, Path(str(dist.locate_file(f)))
    return None


WHEEL = _runtime_wheel()
needs_wheel = pytest.mark.skipif(WHEEL is None, reason="nvidia-cuda-runtime-cu12 is not installed")


def build(out: Path, *, soname: Optional[str] = None, defines: Sequence[str] = (),
          needed: Sequence[Path] = (), runpath: Optional[str] = None,
          rpath: Optional[str] = None, source: str = "fakecuda.c") -> Path:
    """Compile a shared object; ``needed`` libraries are linked by their soname."""
    out.parent.mkdir(parents=True, exist_ok=True)
    cmd = [str(GCC), "-shared", "-fPIC", "-o", str(out), str(NATIVE / source)]
    cmd += [f"-D{d}" for d in defines]
    if soname:
        cmd.append(f"-Wl,-soname,{soname}")
    if runpath is not None:
        cmd += ["-Wl,--enable-new-dtags", f"-Wl,-rpath,{runpath}"]
    if rpath is not None:
        cmd += ["-Wl,--disable-new-dtags", f"-Wl,-rpath,{rpath}"]
    cmd.append("-Wl,--no-as-needed")
    for lib in needed:
        cmd += [f"-L{lib.parent}", f"-Wl,-rpath-link,{lib.parent}", f"-l:{lib.name}"]
    subprocess.run(cmd, check=True, capture_output=True)
    return out


_MAPS = r"""
import ctypes, json, sys
ctypes.CDLL(sys.argv[1])
paths = set()
with open("/proc/self/maps") as f:
    for line in f:
        parts = line.split(None, 5)
        if len(parts) == 6 and parts[5].startswith("/"):
            paths.add(parts[5].strip())
print(json.dumps(sorted(paths)))
"""


def really_loaded(consumer: Path, ld_library_path: Optional[str]) -> Dict[str, str]:
    """``library name -> mapped file`` after a real dlopen of ``consumer`` in a child."""
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    if ld_library_path is not None:
        env["LD_LIBRARY_PATH"] = ld_library_path
    proc = subprocess.run([sys.executable, "-c", _MAPS, str(consumer)], env=env,
                          capture_output=True, text=True, check=True)
    out: Dict[str, str] = {}
    for path in json.loads(proc.stdout):
        name = library_name(os.path.basename(path))
        if name is not None:
            assert name not in out, f"two copies of {name} mapped: {out[name]}, {path}"
            out[name] = path
    return out


Row = Tuple[str, str, Optional[str], Optional[str], bool]


def rows(libs: Sequence[Library], under: Path) -> List[Row]:
    """The copies under ``under`` as (name, relative path, version, owner, selected)."""
    base = os.path.realpath(under)
    return [(lib.name, os.path.relpath(str(lib.path), base), lib.version, lib.owner,
             lib.selected)
            for lib in libs
            if lib.path and os.path.realpath(lib.path).startswith(base + os.sep)]


def assert_one_selected_at_most(libs: Sequence[Library]) -> None:
    for name in LIBRARY_NAMES:
        assert sum(1 for lib in libs if lib.name == name and lib.selected) <= 1, name
    assert all(lib.loaded is None for lib in libs)


def selected(libs: Sequence[Library], name: str) -> Optional[Library]:
    return next((lib for lib in libs if lib.name == name and lib.selected), None)


# -- 1. the real runtime wheel -----------------------------------------------------------

@needs_wheel
def test_real_runtime_wheel_version_and_owner(tmp_path: Path) -> None:
    assert WHEEL is not None
    dist, lib_path = WHEEL
    release = Version(dist.version).release

    # The function the probe relies on answers without a GPU or a driver.
    lib = ctypes.CDLL(str(lib_path), mode=os.RTLD_LOCAL)
    code = ctypes.c_int(0)
    assert lib.cudaRuntimeGetVersion(ctypes.byref(code)) == 0
    assert (code.value // 1000, code.value % 1000 // 10) == release[:2]

    expected = Library(name="cudart", version=".".join(map(str, release)),
                       path=str(lib_path), owner="nvidia-cuda-runtime-cu12")
    # with every default: the wheel is found in this interpreter's site-packages
    found = [x for x in probe_libraries()
             if x.name == "cudart" and os.path.realpath(str(x.path)) == os.path.realpath(lib_path)]
    assert [(x.version, x.owner, x.loaded) for x in found] == \
        [(expected.version, expected.owner, None)]

    # isolated: only the wheel's site-packages, no LD_LIBRARY_PATH, no cache, no toolkit
    site_dir = Path(str(dist.locate_file("")))
    libs = probe_libraries(env={}, site_dirs=[str(site_dir)], cuda_roots=[],
                           ld_cache=str(tmp_path / "absent"),
                           version_cache=tmp_path / "versions.json")
    ours = [x for x in libs if x.owner == "nvidia-cuda-runtime-cu12"]
    assert [(x.name, x.version, x.path) for x in ours] == \
        [("cudart", expected.version, str(lib_path))]
    assert_one_selected_at_most(libs)


# -- 2. shadowing: LD_LIBRARY_PATH against DT_RUNPATH and DT_RPATH ------------------------

@needs_gcc
@needs_wheel
@pytest.mark.parametrize(("dtags", "shadow_on_path", "winner"), [
    ("runpath", True, "shadow"),   # LD_LIBRARY_PATH is searched before DT_RUNPATH
    ("rpath", True, "wheel"),      # DT_RPATH is searched before LD_LIBRARY_PATH
    ("runpath", False, "wheel"),   # nothing shadows: RUNPATH finds the wheel
])
def test_shadowing_follows_the_real_loader(tmp_path: Path, dtags: str, shadow_on_path: bool,
                                           winner: str) -> None:
    assert WHEEL is not None
    dist, wheel_lib = WHEEL
    wheel_dir = str(wheel_lib.parent)
    shadow = build(tmp_path / "shadow" / "libcudart.so.12", soname="libcudart.so.12",
                   defines=["CUDART_CODE=12010"])
    consumer = build(tmp_path / "app" / f"libuses_{dtags}.so", source="consumer.c",
                     needed=[wheel_lib],
                     **({"runpath": wheel_dir} if dtags == "runpath" else {"rpath": wheel_dir}))
    ld_path = str(shadow.parent) if shadow_on_path else None
    env = {"LD_LIBRARY_PATH": ld_path} if ld_path else {}

    libs = probe_libraries(env=env, site_dirs=[str(Path(str(dist.locate_file(""))))],
                           cuda_roots=[], ld_cache=str(tmp_path / "absent"),
                           consumer=str(consumer))
    assert_one_selected_at_most(libs)
    release = ".".join(map(str, Version(dist.version).release))
    cudart = {os.path.realpath(str(x.path)): x for x in libs if x.name == "cudart"}
    wheel_row = cudart[os.path.realpath(wheel_lib)]
    assert (wheel_row.version, wheel_row.owner) == (release, "nvidia-cuda-runtime-cu12")
    if shadow_on_path:
        shadow_row = cudart[os.path.realpath(shadow)]
        assert (shadow_row.path, shadow_row.version, shadow_row.owner) == \
            (str(shadow), "12.1", None)
    else:
        assert os.path.realpath(shadow) not in cudart  # not on any searched path

    chosen = selected(libs, "cudart")
    assert chosen is not None
    expect = shadow if winner == "shadow" else wheel_lib
    assert os.path.realpath(str(chosen.path)) == os.path.realpath(expect)
    # and the real loader agrees
    assert really_loaded(consumer, ld_path)["cudart"] == os.path.realpath(str(chosen.path))


# -- 3. fake cuBLAS / cuDNN / NCCL / nvJitLink in a wheel tree and on the system -----------

def _dist_info(site: Path, name: str, version: str, files: Sequence[Path]) -> None:
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    lines = [f"{f.relative_to(site).as_posix()},sha256=AAAA,{f.stat().st_size}" for f in files]
    lines += [f"{info.name}/METADATA,,", f"{info.name}/RECORD,,"]
    (info / "RECORD").write_text("\n".join(lines) + "\n")


@pytest.fixture
def fake_machine(tmp_path: Path) -> Dict[str, Path]:
    if GCC is None:
        pytest.skip("gcc is not installed")
    site = tmp_path / "site"
    nv = site / "nvidia"
    lt = build(nv / "cublas/lib/libcublasLt.so.12", soname="libcublasLt.so.12",
               defines=["CUBLASLT_VER=12,4,5"])
    cublas = build(nv / "cublas/lib/libcublas.so.12", soname="libcublas.so.12",
                   defines=["CUBLAS_VER=12,4,5"], needed=[lt], runpath="$ORIGIN")
    cudnn = build(nv / "cudnn/lib/libcudnn.so.9", soname="libcudnn.so.9",
                  defines=["CUDNN_CODE=90100"])
    nccl = build(nv / "nccl/lib/libnccl.so.2", soname="libnccl.so.2", defines=["NCCL_CODE=22105"])
    jit = build(nv / "nvjitlink/lib/libnvJitLink.so.12", soname="libnvJitLink.so.12",
                defines=["NVJITLINK_VER=12,4"])
    _dist_info(site, "nvidia-cublas-cu12", "12.4.5.8", [lt, cublas])
    _dist_info(site, "nvidia-cudnn-cu12", "9.1.0.70", [cudnn])
    _dist_info(site, "nvidia-nccl-cu12", "2.21.5", [nccl])
    _dist_info(site, "nvidia-nvjitlink-cu12", "12.4.127", [jit])
    (site / "nvidia_broken-1.0.dist-info").mkdir()  # no METADATA, no RECORD

    # "system" copies, on LD_LIBRARY_PATH
    sysdir = tmp_path / "sys"
    build(sysdir / "libnccl.so.2.7.8", soname="libnccl.so.2", defines=["NCCL_CODE=2708"])
    (sysdir / "libnccl.so.2").symlink_to("libnccl.so.2.7.8")
    build(sysdir / "libcudnn.so.8", soname="libcudnn.so.8", defines=["CUDNN_CODE=8902"])
    build(sysdir / "libnvJitLink.so.12.0.76", soname="libnvJitLink.so.12")  # no version call
    (sysdir / "libnvJitLink.so.12").symlink_to("libnvJitLink.so.12.0.76")
    build(sysdir / "libcublasLt.so.11", soname="libcublasLt.so.11",
          defines=["CUBLASLT_CODE=111103"])
    gone = build(tmp_path / "gone" / "libgone.so.1", soname="libgone.so.1")
    build(sysdir / "libcublas.so.11.11.3.6", soname="libcublas.so.11",
          defines=["CUBLAS_VER=11,11,3"], needed=[gone])
    shutil.rmtree(gone.parent)  # so this cuBLAS cannot be loaded
    (sysdir / "libcudart.so.12").write_bytes(b"not a shared object\n")

    # a toolkit: a byte copy of the wheel's cuDNN (a distinct copy) and a link to its
    # NCCL (the same copy, reached twice)
    cuda = tmp_path / "cuda"
    (cuda / "lib64").mkdir(parents=True)
    shutil.copy2(cudnn, cuda / "lib64" / "libcudnn.so.9")
    (cuda / "lib64" / "libnccl.so.2").symlink_to(nccl)

    runpath = ":".join(f"$ORIGIN/../site/nvidia/{c}/lib" for c in ("cublas", "cudnn", "nccl"))
    consumer = build(tmp_path / "app" / "libconsumer.so", source="consumer.c",
                     needed=[cublas, cudnn, nccl], runpath=runpath)
    return {"root": tmp_path, "site": site, "sys": sysdir, "cuda": cuda, "consumer": consumer}


#: The fake machine's tests leave out the real host's trusted directories: a GPU host has
#: its own cuDNN 9 and NCCL in /lib/x86_64-linux-gnu, which would win a plain search.
NO_SYSTEM_DIRS: Tuple[str, ...] = ()


def _probe(m: Dict[str, Path], cache: Optional[Path] = None) -> Tuple[Library, ...]:
    return probe_libraries(env={"LD_LIBRARY_PATH": str(m["sys"])}, site_dirs=[str(m["site"])],
                           ld_cache=str(m["root"] / "absent"), cuda_roots=[str(m["cuda"])],
                           consumer=str(m["consumer"]), version_cache=cache,
                           default_dirs=NO_SYSTEM_DIRS)


EXPECTED = [
    ("cudart", "sys/libcudart.so.12", "12", None, False),
    ("cublas", "site/nvidia/cublas/lib/libcublas.so.12", "12.4.5.8", "nvidia-cublas-cu12", True),
    ("cublas", "sys/libcublas.so.11.11.3.6", "11.11.3.6", None, False),
    ("cublasLt", "site/nvidia/cublas/lib/libcublasLt.so.12", "12.4.5.8", "nvidia-cublas-cu12",
     True),
    ("cublasLt", "sys/libcublasLt.so.11", "11.11.3", None, False),
    ("cudnn", "site/nvidia/cudnn/lib/libcudnn.so.9", "9.1.0.70", "nvidia-cudnn-cu12", True),
    ("cudnn", "sys/libcudnn.so.8", "8.9.2", None, False),
    ("cudnn", "cuda/lib64/libcudnn.so.9", "9.1.0", None, False),
    ("nccl", "site/nvidia/nccl/lib/libnccl.so.2", "2.21.5", "nvidia-nccl-cu12", False),
    ("nccl", "sys/libnccl.so.2", "2.7.8", None, True),
    ("nvjitlink", "site/nvidia/nvjitlink/lib/libnvJitLink.so.12", "12.4.127",
     "nvidia-nvjitlink-cu12", False),
    ("nvjitlink", "sys/libnvJitLink.so.12", "12.0.76", None, True),
]


def test_fake_libraries_versions_owners_copies_and_selection(fake_machine: Dict[str, Path]) -> None:
    m = fake_machine
    libs = _probe(m)
    assert rows(libs, m["root"]) == EXPECTED
    assert_one_selected_at_most(libs)
    # What the loader really maps for the consumer is what the probe selected; nvJitLink
    # is not in the consumer's graph, so it is predicted as a dlopen by soname instead.
    loaded = really_loaded(m["consumer"], str(m["sys"]))
    assert sorted(loaded) == ["cublas", "cublasLt", "cudnn", "nccl"]
    for name, path in loaded.items():
        chosen = selected(libs, name)
        assert chosen is not None and os.path.realpath(str(chosen.path)) == path, name


def test_default_consumer_is_torch_in_site_dirs(fake_machine: Dict[str, Path]) -> None:
    """A torch-shaped site: ``torch/lib/libtorch_cuda.so`` with the wheels' RUNPATH, and a
    CUDA-13 style ``nvidia/cu13/lib`` runtime owned by its wheel."""
    m = fake_machine
    site = m["site"]
    cu13 = build(site / "nvidia/cu13/lib/libcudart.so.13", soname="libcudart.so.13",
                 defines=["CUDART_CODE=13000"])
    deep = build(site / "nvidia/cu13/extra/lib/libnvJitLink.so.13", soname="libnvJitLink.so.13",
                 defines=["NVJITLINK_VER=13,0"])
    _dist_info(site, "nvidia-cuda-runtime", "13.0.96", [cu13])
    (site / "torch").mkdir()
    (site / "torch" / "__init__.py").write_text("")
    runpath = ":".join(f"$ORIGIN/../../nvidia/{c}/lib" for c in ("cu13", "cublas", "nccl"))
    torch_cuda = build(site / "torch/lib/libtorch_cuda.so", source="consumer.c",
                       needed=[cu13, site / "nvidia/cublas/lib/libcublas.so.12",
                               site / "nvidia/nccl/lib/libnccl.so.2"], runpath=runpath)
    libs = probe_libraries(env={"LD_LIBRARY_PATH": str(m["sys"])}, site_dirs=[str(site)],
                           ld_cache=str(m["root"] / "absent"), cuda_roots=[],
                           default_dirs=NO_SYSTEM_DIRS)
    got = {r[1]: r[2:] for r in rows(libs, m["root"])}
    assert got["site/nvidia/cu13/lib/libcudart.so.13"] == ("13.0.96", "nvidia-cuda-runtime", True)
    assert got["site/nvidia/cu13/extra/lib/libnvJitLink.so.13"] == ("13.0", None, False)
    assert got["sys/libnccl.so.2"] == ("2.7.8", None, True)  # LD_LIBRARY_PATH beats RUNPATH
    assert got["site/nvidia/cublas/lib/libcublas.so.12"][2] is True
    assert os.path.realpath(deep) in {os.path.realpath(str(x.path)) for x in libs}
    loaded = really_loaded(torch_cuda, str(m["sys"]))
    assert sorted(loaded) == ["cublas", "cublasLt", "cudart", "nccl"]
    for name, path in loaded.items():
        chosen = selected(libs, name)
        assert chosen is not None and os.path.realpath(str(chosen.path)) == path, name


def test_plain_search_without_a_consumer(fake_machine: Dict[str, Path]) -> None:
    """No torch in the site dirs: only LD_LIBRARY_PATH / cache / default dirs can win."""
    m = fake_machine
    libs = probe_libraries(env={"LD_LIBRARY_PATH": str(m["sys"])}, site_dirs=[str(m["site"])],
                           ld_cache=str(m["root"] / "absent"), cuda_roots=[str(m["cuda"])],
                           default_dirs=NO_SYSTEM_DIRS)
    picked = {r[0]: r[1] for r in rows(libs, m["root"]) if r[4]}
    # cuDNN 9 is only in the wheel (not searched without RUNPATH): the 8 on the path wins.
    # Nothing answers to libcublas.so.12 or libcublas.so.11 (the system copy has no soname
    # link), nor to libcudart.so.12 (not ELF): no cuBLAS or runtime is selected.
    assert picked == {"cublasLt": "sys/libcublasLt.so.11",
                      "cudnn": "sys/libcudnn.so.8",
                      "nccl": "sys/libnccl.so.2",
                      "nvjitlink": "sys/libnvJitLink.so.12"}


def test_version_cache_is_written_and_reused(fake_machine: Dict[str, Path]) -> None:
    m = fake_machine
    cache = m["root"] / "state" / "versions.json"
    first = _probe(m, cache)
    doc = json.loads(cache.read_text())
    assert doc["schema"] == "envlock.library-versions/1"
    ours = {k: v for k, v in doc["entries"].items() if k.startswith(str(m["root"]))}
    nccl_sys = os.path.realpath(m["sys"] / "libnccl.so.2.7.8")
    st = os.stat(nccl_sys)
    assert ours[nccl_sys] == {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "version": "2.7.8"}
    assert ours[os.path.realpath(m["sys"] / "libcudart.so.12")]["version"] is None
    assert len(ours) == len(EXPECTED)
    assert _probe(m, cache) == first

    # The cache is believed while size and mtime match ...
    doc["entries"][nccl_sys]["version"] = "2.99.1"
    cache.write_text(json.dumps(doc))
    again = {r[1]: r[2] for r in rows(_probe(m, cache), m["root"])}
    assert again["sys/libnccl.so.2"] == "2.99.1"
    # ... and not once the file changes.
    os.utime(nccl_sys, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    fresh = {r[1]: r[2] for r in rows(_probe(m, cache), m["root"])}
    assert fresh["sys/libnccl.so.2"] == "2.7.8"
    assert json.loads(cache.read_text())["entries"][nccl_sys]["version"] == "2.7.8"


def test_broken_cache_and_missing_dirs_do_not_crash(fake_machine: Dict[str, Path]) -> None:
    m = fake_machine
    cache = m["root"] / "versions.json"
    cache.write_text("{not json")
    libs = probe_libraries(env={"LD_LIBRARY_PATH": f"{m['root']}/nowhere::{m['sys']}"},
                           site_dirs=[str(m["site"]), str(m["root"] / "no-site")],
                           ld_cache=str(m["sys"] / "libcudart.so.12"),  # garbage cache file
                           cuda_roots=[str(m["root"] / "no-cuda")], consumer="/dev/null",
                           version_cache=cache,
                           default_dirs=NO_SYSTEM_DIRS)
    assert {r[1] for r in rows(libs, m["root"])} >= {"sys/libnccl.so.2",
                                                     "site/nvidia/nccl/lib/libnccl.so.2"}
    assert json.loads(cache.read_text())["schema"] == "envlock.library-versions/1"


@pytest.mark.parametrize(("name", "raw", "version"), [
    ("cudart", [12040], "12.4"), ("cudart", [11080], "11.8"), ("cudart", [13000], "13.0"),
    ("cublas", [12, 4, 5], "12.4.5"), ("cublasLt", [111103], "11.11.3"),
    ("cudnn", [90100], "9.1.0"), ("cudnn", [8902], "8.9.2"), ("cudnn", [7605], "7.6.5"),
    ("nccl", [22105], "2.21.5"), ("nccl", [2708], "2.7.8"),
    ("nvjitlink", [12, 4], "12.4"),
    ("cudart", [], None), ("cudart", [0], None), ("nccl", [-1], None), ("cublas", [1, 2], None),
])
def test_decode_version(name: str, raw: List[int], version: Optional[str]) -> None:
    assert decode_version(name, raw) == version


@pytest.mark.parametrize(("filename", "name"), [
    ("libcudart.so.12", "cudart"), ("libcudart.so.12.4.127", "cudart"),
    ("libcudart-9335f6a2.so.11.0", "cudart"), ("libcublas.so.12", "cublas"),
    ("libcublasLt.so.12", "cublasLt"), ("libcudnn.so.9", "cudnn"), ("libnccl.so.2", "nccl"),
    ("libnvJitLink.so.12", "nvjitlink"), ("libcudnn_ops.so.9", None), ("libcudart.so", None),
    ("libcudart_static.a", None), ("libnccl.so.2.bak", None),
])
def test_library_name(filename: str, name: Optional[str]) -> None:
    assert library_name(filename) == name


# -- 5. ld.so.cache ---------------------------------------------------------------------

_LDCONFIG_ABI = {"x86_64": "libc6,x86-64", "aarch64": "libc6,AArch64",
                 "ppc64le": "libc6,64bit", "s390x": "libc6,64bit"}


def _ldconfig() -> Optional[str]:
    return shutil.which("ldconfig") or next(
        (p for p in ("/sbin/ldconfig", "/usr/sbin/ldconfig") if os.path.exists(p)), None)


@pytest.mark.skipif(not os.path.exists("/etc/ld.so.cache") or _ldconfig() is None,
                    reason="no ld.so.cache or ldconfig on this machine")
def test_ld_cache_matches_ldconfig() -> None:
    out = subprocess.run([str(_ldconfig()), "-p"], capture_output=True, text=True,
                         check=True).stdout
    abi = _LDCONFIG_ABI.get(platform.machine())
    expected: Dict[str, List[str]] = {}
    for line in out.splitlines():
        m = re.match(r"^\s+(\S+) \(([^)]*)\) => (.+)$", line)
        if m and (abi is None or ",".join(m.group(2).split(",")[:2]) == abi):
            expected.setdefault(m.group(1), []).append(m.group(3))
    cache = read_ld_cache("/etc/ld.so.cache")
    assert cache["libc.so.6"][0] == expected["libc.so.6"][0]
    if abi is not None:
        assert cache == {k: tuple(v) for k, v in expected.items()}
        assert list(cache) == list(expected)  # cache order


@pytest.mark.skipif(not os.path.exists("/etc/ld.so.cache"), reason="no ld.so.cache")
def test_ld_cache_truncated_or_garbage_is_empty(tmp_path: Path) -> None:
    data = Path("/etc/ld.so.cache").read_bytes()
    for cut in (0, 10, 20, 47, 48, 100, len(data) // 2, len(data) - 1):
        p = tmp_path / f"cut{cut}"
        p.write_bytes(data[:cut])
        assert read_ld_cache(str(p)) == {}, cut
    junk = tmp_path / "junk"
    junk.write_bytes(b"glibc-ld.so.cache1.1" + b"\xff" * 200)
    assert read_ld_cache(str(junk)) == {}
    assert read_ld_cache(str(tmp_path / "missing")) == {}
    assert read_ld_cache(str(tmp_path)) == {}


def _cache_bytes(entries: Sequence[Tuple[int, str, str]], *, old_prefix: bool) -> bytes:
    """A cache as ldconfig writes it (new format, optionally after an old-format table)."""
    strings = bytearray()
    offsets = []
    start = 48 + 24 * len(entries)
    for _flags, key, value in entries:
        k = start + len(strings)
        strings += key.encode() + b"\0"
        v = start + len(strings)
        strings += value.encode() + b"\0"
        offsets.append((k, v))
    new = b"glibc-ld.so.cache1.1" + struct.pack("<IIB3xI12x", len(entries), len(strings), 2, 0)
    for (flags, _k, _v), (k, v) in zip(entries, offsets):
        new += struct.pack("<iIIIQ", flags, k, v, 0, 0)
    new += bytes(strings)
    if not old_prefix:
        return new
    old = b"ld.so-1.7.0\0" + struct.pack("<I", 1) + struct.pack("<iII", 3, 0, 0)
    return old + b"\0" * (-len(old) % 8) + new


@pytest.mark.parametrize("old_prefix", [False, True])
def test_ld_cache_format_and_abi_filter(tmp_path: Path, old_prefix: bool) -> None:
    entries = [(0x0303, "libcudart.so.12", "/opt/cuda/lib64/libcudart.so.12"),
               (0x0003, "libcudart.so.12", "/opt/cuda/lib/libcudart.so.12"),  # 32-bit
               (0x0303, "libcudart.so.12", "/usr/lib/x86_64-linux-gnu/libcudart.so.12"),
               (0x0A03, "libnccl.so.2", "/usr/lib/aarch64-linux-gnu/libnccl.so.2")]
    p = tmp_path / "ld.so.cache"
    p.write_bytes(_cache_bytes(entries, old_prefix=old_prefix))
    assert read_ld_cache(str(p), machine="x86_64") == {
        "libcudart.so.12": ("/opt/cuda/lib64/libcudart.so.12",
                            "/usr/lib/x86_64-linux-gnu/libcudart.so.12")}
    assert read_ld_cache(str(p), machine="aarch64") == {
        "libnccl.so.2": ("/usr/lib/aarch64-linux-gnu/libnccl.so.2",)}
    assert read_ld_cache(str(p), machine="i686") == {
        "libcudart.so.12": ("/opt/cuda/lib/libcudart.so.12",)}
