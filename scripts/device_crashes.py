"""Make real GPU failures on a lent GPU host, one child process each, and keep their output.

Each case is a few lines of ordinary PyTorch (or Triton) that fail the way users' jobs
fail: out of memory, an invalid device ordinal, a device-side assert, an illegal memory
access, no visible GPU. The child's stdout and stderr are written unedited to
``OUTDIR/<case>.log``; ``doctor --log`` is then judged on them (tests/checks). Run by
``scripts/device_check.sh``; needs torch with CUDA and a GPU.

    python scripts/device_crashes.py OUTDIR [CASE...]
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import List

CASES = {
    # a plain cudaMalloc far beyond the card (never managed memory: that can hang a GPU)
    "oom": ("import torch\n"
            "x = torch.empty(1 << 40, dtype=torch.uint8, device='cuda')\n", {}),
    "ordinal": ("import torch\n"
                "n = torch.cuda.device_count()\n"
                "torch.zeros(1, device=f'cuda:{n + 3}')\n", {}),
    "assert": ("import torch\n"
               "x = torch.zeros(10, device='cuda')\n"
               "i = torch.tensor([20], device='cuda')\n"
               "print(x[i].sum().item())\n", {}),
    "assert-blocking": ("import torch\n"
                        "x = torch.zeros(10, device='cuda')\n"
                        "i = torch.tensor([20], device='cuda')\n"
                        "print(x[i].sum().item())\n", {"CUDA_LAUNCH_BLOCKING": "1"}),
    "illegal-address": ("import torch, triton, triton.language as tl\n"
                        "@triton.jit\n"
                        "def poke(p):\n"
                        "    tl.store(p + 1000000000000, 1.0)\n"
                        "x = torch.zeros(1, device='cuda')\n"
                        "poke[(1,)](x)\n"
                        "torch.cuda.synchronize()\n"
                        "print(x.item())\n", {}),
    "no-visible-gpu": ("import torch\n"
                       "torch.zeros(1, device='cuda')\n", {"CUDA_VISIBLE_DEVICES": ""}),
    "bad-visible-gpu": ("import torch\n"
                        "print(torch.cuda.is_available(), torch.cuda.device_count())\n"
                        "torch.zeros(1, device='cuda')\n", {"CUDA_VISIBLE_DEVICES": "7"}),
}


def main(out: Path, only: List[str]) -> int:
    out.mkdir(parents=True, exist_ok=True)
    for name, (code, env) in CASES.items():
        if only and name not in only:
            continue
        full = dict(os.environ, **env)
        script = out / f"{name}.py"  # a file: Triton reads a kernel's source from it
        script.write_text(code)
        try:
            p = subprocess.run([sys.executable, str(script)], env=full, capture_output=True,
                               text=True, timeout=120)
            text, rc = p.stdout + p.stderr, p.returncode
        except subprocess.TimeoutExpired as exc:
            parts = [x.decode(errors="replace") if isinstance(x, bytes) else (x or "")
                     for x in (exc.stdout, exc.stderr)]
            text, rc = "".join(parts), "timeout"
        (out / f"{name}.log").write_text(text)
        print(f"{name}: exit {rc}, {len(text)} chars", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), sys.argv[2:]))
