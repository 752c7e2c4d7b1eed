"""One process, no launcher: the guard must be a silent no-op (run as a plain script)."""

from __future__ import annotations

import json

import torch
from torch.utils.data import DataLoader

import envlock.training as guard

loader = DataLoader(list(range(1000)), batch_size=8, shuffle=True)
model = torch.nn.Linear(4, 2)
found = guard.check(loader, model, strict=True)
found += guard.epoch(loader, 0, strict=True) + guard.epoch(loader, 1, strict=True)
print(json.dumps([f.id for f in found]))
