"""Run under torchrun where a GPU is lent: ``share`` puts every rank on cuda:0 (the NCCL
"duplicate GPU" mistake), ``bound`` binds each rank to its LOCAL_RANK (needs one GPU per
rank). Prints rank 0's finding ids as JSON."""

from __future__ import annotations

import json
import os
import sys

import torch
import torch.distributed as dist

import envlock.training as guard

torch.cuda.set_device(0 if sys.argv[1] == "share" else int(os.environ["LOCAL_RANK"]))
dist.init_process_group("gloo")
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 2).cuda())
found = guard.check(None, model, quiet=True)
if dist.get_rank() == 0:
    print(json.dumps({"ids": [f.id for f in found], "titles": [f.title for f in found]}))
dist.destroy_process_group()
# no interpreter finalization: gloo's threads can abort it (see scenarios.py)
sys.stdout.flush()
os._exit(0)
