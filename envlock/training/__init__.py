"""Training guard: catch DDP mistakes in the first second of a run, from inside the run.

A DDP job whose DataLoader is not sharded, whose process group was never initialised or
whose ranks share a GPU runs without an error; the only symptoms are no speed-up and idle
GPUs. Snapshots and logs cannot see this; the training process can. Used on every rank::

    import envlock.training as guard
    guard.check(loader, model)          # once, before the first step, on every rank
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        guard.epoch(loader, epoch)      # optional, local: catches a missing set_epoch

Both return the :class:`~envlock.checks.finding.Finding` values they found; rank 0 also
prints them to stderr (this API runs inside the user's process, where there is no envlock
command line to render them; ``quiet=True`` turns that off). ``strict=True`` raises
:class:`TrainingGuardError` on every rank when an error or warning was found; nothing
else ever leaves them (the guard must not break the job it guards). The ranks exchange
their facts as JSON through the job's own c10d store (:mod:`envlock.exchange`), with a
deadline (``timeout=``): no pickle, no numpy, no collective and no CUDA device.

Importing this package does not import torch: the checks import it when they run.
"""

from __future__ import annotations

from envlock.training.errors import TrainingGuardError
from envlock.training.guard import check, epoch

__all__ = ["check", "epoch", "TrainingGuardError"]
