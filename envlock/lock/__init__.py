"""The lock file: model, reading and (atomic) writing."""

from envlock.lock.io import load_lock, parse_lock, render_lock, write_lock
from envlock.lock.model import (
    LOCK_VERSION,
    AppliedAdvisory,
    Lock,
    LockedFile,
    LockedPackage,
    LockTarget,
    TorchChoice,
)

__all__ = ["Lock", "LockTarget", "LockedPackage", "LockedFile", "AppliedAdvisory",
           "TorchChoice", "LOCK_VERSION", "load_lock", "parse_lock", "render_lock",
           "write_lock"]
