"""Fleet mode: prove that every node of a distributed job runs the same environment.

A job of 512 GPUs fails in confusing ways when one node has another driver, NCCL or GPU;
``envlock fleet`` finds that node before training starts. The parts:

* :mod:`~envlock.fleet.launch`: rank, world size, node and rendezvous point from torchrun's
  or Slurm's environment (Slurm host lists included);
* :mod:`~envlock.fleet.fingerprint`: the facts that must agree and their 16-hex digest,
  sent in a message under 1 KB;
* :mod:`~envlock.fleet.compare`: rank 0's judgement (groups, differences, the lock);
* :mod:`~envlock.fleet.protocol`: the live exchange over a c10d store, with deadlines;
* :mod:`~envlock.fleet.report`: the JSON report and the table.

Only the live protocol imports torch (``envlock-gpu[torch]``); comparing snapshot files
offline does not.
"""
