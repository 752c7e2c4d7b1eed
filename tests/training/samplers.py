"""Minimal re-implementations of two frameworks' sharded samplers, by behaviour only.

Written for these tests in our own words (the packages are not dependencies):

* :class:`AccelerateStyleShard` follows Hugging Face accelerate's ``BatchSamplerShard``
  (accelerate/data_loader.py): it wraps a batch sampler that is the same on every process
  and, with ``split_batches=False``, gives batch ``i`` to process ``i % num_processes``;
  with ``split_batches=True`` it cuts every batch into ``num_processes`` slices and yields
  slice ``process_index``.
* :class:`CoquiStyleWrapper` follows coqui-ai/TTS's ``DistributedSamplerWrapper``
  (TTS/utils/samplers.py): a ``DistributedSampler`` subclass whose "dataset" is the inner
  sampler; ``__iter__`` lists the inner sampler's order (the same on every rank), pads it to
  ``total_size`` and keeps the contiguous block ``[num_samples * rank, + num_samples)``;
  ``set_epoch`` passes the epoch on to the inner sampler.
"""

from __future__ import annotations

from typing import Iterator, List, Sized

from torch.utils.data import DistributedSampler, Sampler


class AccelerateStyleShard:
    def __init__(self, batch_sampler, num_processes: int = 1, process_index: int = 0,
                 split_batches: bool = False) -> None:
        self.batch_sampler = batch_sampler
        self.num_processes = num_processes
        self.process_index = process_index
        self.split_batches = split_batches

    def __len__(self) -> int:
        n = len(self.batch_sampler)
        if self.split_batches:
            return n
        return (n + self.num_processes - 1 - self.process_index) // self.num_processes

    def __iter__(self) -> Iterator[List[int]]:
        for i, batch in enumerate(self.batch_sampler):
            if self.split_batches:
                size = len(batch) // self.num_processes
                yield batch[self.process_index * size:(self.process_index + 1) * size]
            elif i % self.num_processes == self.process_index:
                yield batch


class CoquiStyleWrapper(DistributedSampler):
    def __init__(self, sampler: Sampler, num_replicas=None, rank=None,
                 shuffle: bool = True, seed: int = 0) -> None:
        super().__init__(sampler, num_replicas=num_replicas, rank=rank, shuffle=shuffle,
                         seed=seed)

    def __iter__(self) -> Iterator[int]:
        order = list(self.dataset)[:self.total_size]
        order += order[:self.total_size - len(order)]
        start = self.num_samples * self.rank
        return iter(order[start:start + self.num_samples])

    def set_epoch(self, epoch: int) -> None:
        super().set_epoch(epoch)
        if hasattr(self.dataset, "set_epoch"):
            self.dataset.set_epoch(epoch)


class LengthBucketSampler(Sampler):
    """A coqui-like custom sampler: indices grouped by a (fake) length, shuffled inside
    buckets with a seed (plus the epoch, once ``set_epoch`` is called) -- the same order on
    every rank, so unsharded every rank sees every sample."""

    def __init__(self, data: Sized, seed: int = 0, bucket: int = 16) -> None:
        self.n = len(data)
        self.seed = seed
        self.epoch = 0
        self.bucket = bucket

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return self.n

    def __iter__(self) -> Iterator[int]:
        import random

        rng = random.Random(self.seed + self.epoch)
        order = list(range(self.n))
        for start in range(0, self.n, self.bucket):
            part = order[start:start + self.bucket]
            rng.shuffle(part)
            order[start:start + self.bucket] = part
        return iter(order)
