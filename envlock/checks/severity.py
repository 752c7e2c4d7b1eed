"""One severity per finding kind, whichever command reports it.

The same machine used to get four verdicts: ``verify`` called a mixed RTX 3090 + 4090 +
A6000 box an error, ``doctor`` a warning, ``fleet`` a warning without ``--lock`` and an
error with it. A kind's severity is decided here, once, and every command (verify,
doctor, fleet) passes its findings through :func:`settle`:

* ``error``: blocks training (the job cannot run right: no kernels, a missing package,
  a library that is not the locked one);
* ``warning``: a hazard that needs a look (it may or may not bite on this job);
* ``info``: a note.

A hazard is promoted to ``error`` when a log shows it killed the job (the log's evidence
names the process death and this finding explains it): then it did block training.
Advisories keep the severity their matrix row gives, unless this table names them.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Dict, Iterable, List, Sequence

from envlock.checks.finding import Finding

__all__ = ["KIND_SEVERITY", "settle", "settle_all", "killed_the_job"]

#: verify's own kinds, and the advisories that describe the same cause (one severity for
#: the cause, whichever id a command happens to report it under)
KIND_SEVERITY: Dict[str, str] = {
    "python-mismatch": "error",
    "package-missing": "error",
    "package-version": "error",
    "package-files": "error",
    "package-unexpected": "warning",
    "library-shadowed": "error",
    "library-version": "error",
    "library-duplicate": "warning",
    "library-other-soname": "info",
    "cuda-major-mix": "error",
    "driver-too-old": "error",
    "driver-unavailable": "error",
    "gpu-no-kernels": "error",
    # mixed GPUs in one job: a hazard until a crash shows it bit
    "gpu-mixed-capability": "warning",
    "gpu-mixed-model": "warning",
    "multi-gpu-sigsegv-mixed-gpus": "warning",
    "cuda-device-order-unset-mixed-gpus": "warning",
    "gpu-not-in-lock": "warning",
    "env-mismatch": "error",
}


def killed_the_job(f: Finding) -> bool:
    """A log shows the job died (a signal, a watchdog timeout) and this finding explains
    it: the evidence of a log match, not a fact of the machine alone."""
    if f.evidence not in ("pattern", "signal") or f.not_confirmed:
        return False
    lines: Sequence[str] = f.extra.get("evidence", ()) or ()
    return any(str(e).startswith("process death") for e in lines)


def settle(f: Finding) -> Finding:
    """The finding at its kind's severity, promoted to ``error`` when it killed the job."""
    severity = KIND_SEVERITY.get(f.id, f.severity)
    if killed_the_job(f):
        severity = "error"
    return f if severity == f.severity else replace(f, severity=severity)


def settle_all(findings: Iterable[Finding]) -> List[Finding]:
    return [settle(f) for f in findings]
