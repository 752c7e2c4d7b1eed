"""Exit codes and the error hierarchy, in one place.

Every failure a user can cause or meet is an :class:`EnvlockError` subclass that carries
its exit code. ``envlock.cli.main`` is the only place that catches them, prints the
one-line message and exits; library code never prints or exits. Partial results (a GPU
field NVML could not read, a check that was skipped) are values, not exceptions.
"""

from __future__ import annotations

import enum

__all__ = [
    "ExitCode",
    "EnvlockError",
    "UsageError",
    "InputError",
    "MatrixError",
    "UnknownGpuError",
    "UnknownVersionError",
    "NoCandidateError",
    "IndexError_",
    "OfflineError",
    "ProbeError",
    "ConflictError",
    "BuildError",
    "NoBuildError",
]


class ExitCode(enum.IntEnum):
    """Process exit codes. Documented in the README; tests assert them."""

    OK = 0
    #: verify/doctor/fleet found drift or problems; ``resolve --check`` found a stale lock.
    DRIFT = 1
    #: bad command line, missing or malformed input file, unknown name.
    USAGE = 2
    #: no PyTorch build satisfies the hardware and the user's constraints.
    NO_CANDIDATE = 3
    #: a package index could not be reached or answered garbage.
    NETWORK = 4
    #: the shipped compatibility matrix is invalid (a packaging bug, or a local edit).
    MATRIX = 5
    #: the requirements cannot be satisfied together (a dependency conflict, not hardware).
    CONFLICT = 6
    #: an sdist's metadata had to be built and the build failed, or ``--no-build`` forbade it.
    BUILD = 7
    #: a bug in envlock (an unexpected exception); the message asks for a report.
    INTERNAL = 70
    #: interrupted with Ctrl-C.
    INTERRUPTED = 130
    #: ended by SIGTERM (after stopping any sdist build it had running).
    TERMINATED = 143


class EnvlockError(Exception):
    """Base class: a message for one line on stderr, and an exit code."""

    exit_code: ExitCode = ExitCode.USAGE

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message


class UsageError(EnvlockError):
    """The command line does not make sense."""


class InputError(EnvlockError):
    """A file the user gave us is missing, unreadable or malformed."""


class MatrixError(EnvlockError):
    """The compatibility matrix failed validation; ``problems`` lists every issue."""

    exit_code = ExitCode.MATRIX

    def __init__(self, problems: list[str]) -> None:
        n = len(problems)
        first = problems[0] if problems else "unknown problem"
        more = f" (and {n - 1} more; run 'envlock matrix validate')" if n > 1 else ""
        super().__init__(f"compatibility matrix is invalid: {first}{more}")
        self.problems = problems


class UnknownGpuError(EnvlockError):
    """A GPU name matched nothing in the matrix."""

    def __init__(self, name: str, suggestions: list[str], note: str = "") -> None:
        msg = f"unknown GPU {name!r}"
        if note:
            msg += f": {note}"
        elif suggestions:
            msg += "; did you mean " + ", ".join(repr(s) for s in suggestions) + "?"
        super().__init__(msg)
        self.name = name
        self.suggestions = suggestions


class UnknownVersionError(EnvlockError):
    """A torch, CUDA or driver version the matrix does not know."""


class NoCandidateError(EnvlockError):
    """No PyTorch build fits; the message names the binding constraint and ways out."""

    exit_code = ExitCode.NO_CANDIDATE


class IndexError_(EnvlockError):
    """A package index failed (unreachable, HTTP error, malformed page).

    The trailing underscore avoids shadowing the builtin ``IndexError``.
    """

    exit_code = ExitCode.NETWORK


class OfflineError(IndexError_):
    """``--offline`` was asked for and the cache does not hold what is needed."""


class ProbeError(EnvlockError):
    """Probing the machine failed in a way that leaves nothing to report."""


class ConflictError(EnvlockError):
    """The requirements contradict each other (or an override); no hardware reason."""

    exit_code = ExitCode.CONFLICT


class BuildError(EnvlockError):
    """An sdist's metadata had to be built (PEP 517) and the build failed."""

    exit_code = ExitCode.BUILD


class NoBuildError(BuildError):
    """An sdist's metadata must be built and ``--no-build`` forbids it."""
