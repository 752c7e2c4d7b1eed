"""The training guard on a real NCCL process group, where a GPU is lent (run under torchrun).

``share``: every rank calls ``torch.cuda.set_device(0)`` (the "duplicate GPU" mistake), the
loader is sharded; the guard must name the device binding, through the c10d store, before
any NCCL collective runs. The script then wraps the model in DDP the way the user would,
and NCCL's own refusal is printed to stderr: that text is a real crash log for ``doctor``.
``share-nosampler``: the same, and the loader is not sharded either.
``bound``: each rank on its LOCAL_RANK's GPU, DDP, a DistributedSampler, two epochs of
training with ``guard.epoch``; the guard must stay silent (``strict=True``).

Rank 0 prints one JSON line: the finding ids and titles, and whether training ran.
"""

from __future__ import annotations

import json
import os
import sys
import traceback

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

import envlock.training as guard

mode = sys.argv[1]
local = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(0 if mode.startswith("share") else local)
dist.init_process_group("nccl")
torch.manual_seed(0)
data = TensorDataset(torch.randn(512, 8), torch.randn(512, 1))
sampler = None if mode == "share-nosampler" else DistributedSampler(data)
loader = DataLoader(data, batch_size=16, sampler=sampler)
model = torch.nn.Linear(8, 1).cuda()
out = {"mode": mode, "world": dist.get_world_size(), "trained": False}
if mode == "bound":
    model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local])
    found = guard.check(loader, model, strict=True, quiet=True)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for epoch in range(2):
        assert sampler is not None
        sampler.set_epoch(epoch)
        found += guard.epoch(loader, epoch, strict=True, quiet=True)
        for x, y in loader:
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x.cuda()), y.cuda()).backward()
            opt.step()
    torch.cuda.synchronize()
    out["trained"] = True
else:
    found = guard.check(loader, model, quiet=True)
    try:  # what the user's next line does: NCCL refuses two ranks on one GPU
        torch.nn.parallel.DistributedDataParallel(model, device_ids=[0])
        torch.cuda.synchronize()
        out["ddp"] = "ok"
    except Exception as exc:  # noqa: BLE001 - the error is the point: printed as a log
        traceback.print_exc()
        out["ddp"] = type(exc).__name__
out["ids"] = [f.id for f in found]
out["findings"] = [f.to_dict() for f in found]
if dist.get_rank() == 0:
    print(json.dumps(out), flush=True)
sys.stderr.flush()
# no interpreter finalization or destroy_process_group: a communicator that failed to
# initialise can hang the teardown
os._exit(0)
