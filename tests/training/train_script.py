"""A real 2-rank DDP training script in coqui-ai/TTS's shape: a custom length-bucket sampler.

``bug``: the custom sampler goes straight into the DataLoader under DDP (the coqui case), so
every rank trains on every sample; ``guard.check(..., strict=True)`` must stop it.
``fixed``: the sampler is wrapped for distribution (coqui's DistributedSamplerWrapper
behaviour) and ``set_epoch`` is called every epoch; the guard must stay silent.
"""

from __future__ import annotations

import os
import sys

import torch
import torch.distributed as dist
from samplers import CoquiStyleWrapper, LengthBucketSampler
from torch.utils.data import DataLoader, TensorDataset

import envlock.training as guard

mode = sys.argv[1]
if "--report-numpy" in sys.argv:
    import importlib.util

    try:
        numpy_ok = importlib.util.find_spec("numpy") is not None and bool(__import__("numpy"))
    except ImportError:
        numpy_ok = False
    if os.environ.get("RANK") == "0":
        print(f"numpy importable: {numpy_ok}", flush=True)
dist.init_process_group("gloo")
torch.manual_seed(0)
data = TensorDataset(torch.randn(512, 8), torch.randn(512, 1))
sampler = LengthBucketSampler(data)
if mode == "fixed":
    sampler = CoquiStyleWrapper(sampler)
loader = DataLoader(data, batch_size=16, sampler=sampler)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)

guard.check(loader, model, strict=True)
for epoch in range(2):
    if hasattr(sampler, "set_epoch"):
        sampler.set_epoch(epoch)
    guard.epoch(loader, epoch, strict=True)
    for x, y in loader:
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
dist.destroy_process_group()
print("trained", flush=True)
# no interpreter finalization: gloo's threads can abort it (see scenarios.py)
sys.stderr.flush()
os._exit(0)
