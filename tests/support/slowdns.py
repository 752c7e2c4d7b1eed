"""A real envlock process behind a name server that does not answer.

``native/slow_dns.c`` is built into a small shared library and preloaded (LD_PRELOAD) into the
process under test, so CPython's own ``socket.getaddrinfo`` calls the C library's entry
point and blocks in C, exactly where a lookup behind a dead DNS server blocks. Nothing of
envlock is replaced. Linux/glibc with a C compiler only; the tests skip elsewhere.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path
from typing import Dict

from support.fakenvml import compiler

__all__ = ["SlowDnsUnavailable", "build_slow_dns", "slow_dns_env", "HOST"]

SOURCE = Path(__file__).with_name("native") / "slow_dns.c"
#: a host name the library holds up (any name ending in ".slow-dns.test")
HOST = "index.slow-dns.test"


class SlowDnsUnavailable(RuntimeError):
    """No C compiler or not Linux: the library cannot be built or preloaded."""


def build_slow_dns(tmpdir: Path) -> Path:
    """Compile the library into ``tmpdir`` (once per source) and return its path."""
    cc = compiler()
    if cc is None or not sys.platform.startswith("linux"):
        raise SlowDnsUnavailable("needs Linux and a C compiler (gcc or $CC)")
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:16]
    lib = Path(tmpdir) / f"libslowdns-{digest}.so"
    if lib.is_file():
        return lib
    partial = lib.with_suffix(".part")
    cmd = [cc, "-shared", "-fPIC", "-O1", "-Wall", "-Wextra", "-Werror", "-o", str(partial),
           str(SOURCE), "-ldl"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"building the slow resolver failed:\n{' '.join(cmd)}\n"
                           f"{proc.stderr}")
    partial.replace(lib)
    return lib


def slow_dns_env(lib: Path, mark: Path, seconds: int = 120) -> Dict[str, str]:
    """The environment entries that preload the library; ``mark`` gets a line when a
    lookup starts."""
    return {"LD_PRELOAD": str(lib), "SLOW_DNS_MARK": str(mark),
            "SLOW_DNS_SECONDS": str(seconds)}
