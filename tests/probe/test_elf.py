"""The ELF dynamic-section reader against gcc-built objects, system binaries, hand-built
ELF32/big-endian images, and garbage."""

from __future__ import annotations

import os
import platform
import random
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import pytest

from envlock.probe.elf import ElfDynamic, read_dynamic

GCC = shutil.which("gcc")
READELF = shutil.which("readelf")
NATIVE = Path(__file__).resolve().parents[1] / "support" / "native"
needs_gcc = pytest.mark.skipif(GCC is None, reason="gcc is not installed")
_E_MACHINE = {"x86_64": 62, "aarch64": 183, "ppc64le": 21, "s390x": 22, "riscv64": 243}


def build(out: Path, *link_args: str) -> Path:
    subprocess.run([str(GCC), "-shared", "-fPIC", "-o", str(out), str(NATIVE / "consumer.c"),
                    *link_args], check=True, capture_output=True)
    return out


def readelf_dynamic(path: Path) -> Dict[str, List[str]]:
    """NEEDED / SONAME / RPATH / RUNPATH as binutils' readelf reports them."""
    out = subprocess.run([str(READELF), "-dW", str(path)], capture_output=True, text=True,
                         check=True).stdout
    found: Dict[str, List[str]] = {}
    for tag, value in re.findall(r"\((NEEDED|SONAME|RPATH|RUNPATH)\)\s+[^\[]*\[(.*)\]", out):
        found.setdefault(tag, []).append(value)
    return found


def agrees_with_readelf(info: ElfDynamic, path: Path) -> None:
    if READELF is None:
        return
    ref = readelf_dynamic(path)
    assert list(info.needed) == ref.get("NEEDED", [])
    assert ([info.soname] if info.soname else []) == ref.get("SONAME", [])
    assert ([info.rpath] if info.rpath is not None else []) == ref.get("RPATH", [])
    assert ([info.runpath] if info.runpath is not None else []) == ref.get("RUNPATH", [])


def host_checks(info: ElfDynamic) -> None:
    assert info.elf_class == struct.calcsize("P") * 8
    assert info.little_endian == (sys.byteorder == "little")
    if platform.machine() in _E_MACHINE:
        assert info.machine == _E_MACHINE[platform.machine()]


@needs_gcc
def test_gcc_library_with_runpath(tmp_path: Path) -> None:
    lib = build(tmp_path / "libelftest.so.1", "-Wl,-soname,libelftest.so.1",
                "-Wl,--enable-new-dtags", "-Wl,-rpath,/opt/envlock-a:$ORIGIN/../b",
                "-Wl,--no-as-needed", "-lm")
    info = read_dynamic(lib)
    assert info is not None
    host_checks(info)
    assert info.soname == "libelftest.so.1"
    assert info.runpath == "/opt/envlock-a:$ORIGIN/../b"
    assert info.rpath is None
    assert info.needed[0] == "libm.so.6" and "libc.so.6" in info.needed
    assert not info.nodeflib
    agrees_with_readelf(info, lib)


@needs_gcc
def test_gcc_library_with_rpath_and_nodeflib(tmp_path: Path) -> None:
    lib = build(tmp_path / "librp.so", "-Wl,--disable-new-dtags", "-Wl,-rpath,$ORIGIN/x",
                "-Wl,-z,nodefaultlib")
    info = read_dynamic(lib)
    assert info is not None
    assert (info.soname, info.rpath, info.runpath) == (None, "$ORIGIN/x", None)
    assert info.nodeflib
    agrees_with_readelf(info, lib)


def test_system_binary() -> None:
    ls = Path("/bin/ls")
    if not ls.exists():
        pytest.skip("no /bin/ls")
    info = read_dynamic(ls)
    assert info is not None
    host_checks(info)
    assert "libc.so.6" in info.needed
    assert info.soname is None
    agrees_with_readelf(info, ls)


@needs_gcc
def test_object_file_is_elf_without_dynamic_section(tmp_path: Path) -> None:
    obj = tmp_path / "c.o"
    subprocess.run([str(GCC), "-c", "-o", str(obj), str(NATIVE / "consumer.c")], check=True)
    info = read_dynamic(obj)
    assert info is not None
    host_checks(info)
    assert (info.needed, info.soname, info.rpath, info.runpath) == ((), None, None, None)


# -- hand-built images: the encodings this machine does not produce ----------------------

_DT = {"NEEDED": 1, "SONAME": 14, "RPATH": 15, "RUNPATH": 29}


def image(*, is64: bool, little: bool, machine: int, dyn: Sequence[Tuple[str, str]],
          vaddr: int = 0x10000, dynamic: bool = True) -> bytes:
    """A minimal ET_DYN: header, PT_LOAD (file offset 0 at ``vaddr``), PT_DYNAMIC, strings."""
    e = "<" if little else ">"
    ehsize, phentsize = (64, 56) if is64 else (52, 32)
    phnum = 2 if dynamic else 1
    strtab = bytearray(b"\0")
    entries: List[Tuple[int, int]] = []
    for tag, text in dyn:
        entries.append((_DT[tag], len(strtab)))
        strtab += text.encode() + b"\0"
    str_off = ehsize + phnum * phentsize
    dyn_off = (str_off + len(strtab) + 7) & ~7
    entries += [(5, vaddr + str_off), (10, len(strtab)), (0, 0)]
    dyn_fmt = e + ("qQ" if is64 else "iI")
    dyn_bytes = b"".join(struct.pack(dyn_fmt, t, v) for t, v in entries)
    total = dyn_off + len(dyn_bytes)
    ident = b"\x7fELF" + bytes([2 if is64 else 1, 1 if little else 2, 1]) + b"\0" * 9
    if is64:
        hdr = struct.pack(e + "HHIQQQIHHHHHH", 3, machine, 1, 0, ehsize, 0, 0, ehsize,
                          phentsize, phnum, 0, 0, 0)
        ph = struct.pack(e + "IIQQQQQQ", 1, 5, 0, vaddr, vaddr, total, total, 0x1000)
        if dynamic:
            ph += struct.pack(e + "IIQQQQQQ", 2, 6, dyn_off, vaddr + dyn_off, vaddr + dyn_off,
                              len(dyn_bytes), len(dyn_bytes), 8)
    else:
        hdr = struct.pack(e + "HHIIIIIHHHHHH", 3, machine, 1, 0, ehsize, 0, 0, ehsize,
                          phentsize, phnum, 0, 0, 0)
        ph = struct.pack(e + "IIIIIIII", 1, 0, vaddr, vaddr, total, total, 5, 0x1000)
        if dynamic:
            ph += struct.pack(e + "IIIIIIII", 2, dyn_off, vaddr + dyn_off, vaddr + dyn_off,
                              len(dyn_bytes), len(dyn_bytes), 6, 4)
    body = ident + hdr + ph + bytes(strtab)
    return body + b"\0" * (dyn_off - len(body)) + dyn_bytes


DYN = [("NEEDED", "libcudart.so.12"), ("SONAME", "libx.so.1"), ("NEEDED", "libm.so.6"),
       ("RPATH", "/r1:/r2"), ("RUNPATH", "$ORIGIN/../lib")]


@pytest.mark.parametrize(("is64", "little", "machine"), [
    (False, False, 20),   # ELF32 big-endian (PowerPC)
    (False, True, 3),     # ELF32 little-endian (i386)
    (True, False, 22),    # ELF64 big-endian (s390x)
    (True, True, 183),    # ELF64 little-endian (AArch64)
])
def test_hand_built_images(tmp_path: Path, is64: bool, little: bool, machine: int) -> None:
    p = tmp_path / "img.so"
    p.write_bytes(image(is64=is64, little=little, machine=machine, dyn=DYN))
    assert read_dynamic(p) == ElfDynamic(
        elf_class=64 if is64 else 32, little_endian=little, machine=machine,
        needed=("libcudart.so.12", "libm.so.6"), soname="libx.so.1", rpath="/r1:/r2",
        runpath="$ORIGIN/../lib")
    p.write_bytes(image(is64=is64, little=little, machine=machine, dyn=[], dynamic=False))
    assert read_dynamic(p) == ElfDynamic(elf_class=64 if is64 else 32, little_endian=little,
                                         machine=machine)


# -- garbage never raises ---------------------------------------------------------------

def test_garbage_is_none(tmp_path: Path) -> None:
    rng = random.Random(1234)
    cases = {
        "empty": b"",
        "text": b"GROUP ( /lib/x86_64-linux-gnu/libc.so.6 )\n",
        "magic-only": b"\x7fELF",
        "bad-class": b"\x7fELF\x07\x01\x01" + b"\0" * 100,
        "bad-data": b"\x7fELF\x02\x09\x01" + b"\0" * 100,
        "random": bytes(rng.randrange(256) for _ in range(4096)),
        "elf-random": b"\x7fELF\x02\x01\x01" + bytes(rng.randrange(256) for _ in range(4096)),
    }
    for name, data in cases.items():
        p = tmp_path / name
        p.write_bytes(data)
        assert read_dynamic(p) is None, name
    assert read_dynamic(tmp_path) is None  # a directory
    assert read_dynamic(tmp_path / "missing") is None


def test_strings_outside_the_image_are_none(tmp_path: Path) -> None:
    data = bytearray(image(is64=True, little=True, machine=62, dyn=DYN))
    # point DT_STRTAB at an address no PT_LOAD covers
    at = data.find(struct.pack("<qQ", 5, 0x10000 + 64 + 2 * 56))
    assert at > 0
    data[at + 8:at + 16] = struct.pack("<Q", 0x900000)
    p = tmp_path / "bad.so"
    p.write_bytes(bytes(data))
    assert read_dynamic(p) is None


@needs_gcc
def test_truncated_copies_are_none(tmp_path: Path) -> None:
    lib = build(tmp_path / "libt.so", "-Wl,-soname,libt.so", "-Wl,--enable-new-dtags",
                "-Wl,-rpath,/somewhere")
    data = lib.read_bytes()
    e_phoff, = struct.unpack_from("<Q" if struct.calcsize("P") == 8 else "<I", data,
                                  32 if struct.calcsize("P") == 8 else 28)
    cuts = [0, 3, 4, 16, 40, 63, e_phoff + 1]
    if READELF is not None:  # just short of the end of the dynamic section
        out = subprocess.run([str(READELF), "-d", str(lib)], capture_output=True, text=True,
                             check=True).stdout
        m = re.search(r"Dynamic section at offset (0x[0-9a-f]+)", out)
        assert m is not None
        cuts.append(int(m.group(1), 16) + 8)
    for cut in cuts:
        p = tmp_path / f"cut{cut}"
        p.write_bytes(data[:cut])
        assert read_dynamic(p) is None, cut


@needs_gcc
def test_mutated_copies_never_raise(tmp_path: Path) -> None:
    lib = build(tmp_path / "libm.so", "-Wl,-soname,libmut.so.1", "-Wl,--enable-new-dtags",
                "-Wl,-rpath,$ORIGIN")
    data = lib.read_bytes()
    rng = random.Random(99)
    p = tmp_path / "mut.so"
    outcomes: Dict[str, int] = {"none": 0, "info": 0}
    for _ in range(300):
        buf = bytearray(data)
        for _ in range(rng.randrange(1, 8)):
            pos = rng.randrange(min(len(buf), 16384))
            buf[pos] = rng.randrange(256)
        p.write_bytes(bytes(buf))
        result: Optional[ElfDynamic] = read_dynamic(p)
        outcomes["none" if result is None else "info"] += 1
    assert outcomes["none"] + outcomes["info"] == 300


def test_special_files_are_none(tmp_path: Path) -> None:
    fifo = tmp_path / "libfifo.so.1"
    os.mkfifo(fifo)
    assert read_dynamic(fifo) is None  # returns at once instead of blocking on open
    assert read_dynamic("/dev/null") is None
