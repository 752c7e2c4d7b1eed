"""``--format dockerfile``: a build context whose image installs the lock and checks it.

``envlock export --format dockerfile -o DIR`` writes ``DIR/Dockerfile`` and everything it
copies (see :mod:`envlock.export.context`); nothing in the build is looked up by name
unpinned. The image keeps two environments apart:

* ``/opt/envlock`` is envlock's own virtual environment: its dependencies from
  ``envlock-requirements.txt`` (version and sha256 pinned) and envlock itself from the
  wheel in the context (``pip install --no-index --require-hashes``; the name ``envlock``
  on PyPI is someone else's project). ``/usr/local/bin/envlock`` links to its command.
* ``/opt/venv`` holds exactly the lock, installed with ``pip --no-deps --require-hashes``
  from the exported requirements. Neither environment can shadow the other's packages;
  ``envlock verify --python /opt/venv/bin/python`` inspects the locked one.

``envlock verify --stage build`` runs during the build (a wrong install fails the build),
``envlock verify --stage runtime`` in the entrypoint before the user's command (the wrong
driver or GPU fails the start, not an hour into training). The ``docker run`` flags come
from the matrix's advisories (``/dev/shm`` too small for NCCL and DataLoader workers).
A base image named by tag only is accepted with a warning comment: the tag can move, so
the build is reproducible only once the base is pinned as ``IMAGE@sha256:<digest>``.
"""

from __future__ import annotations

import json
import re
import shlex
from typing import Any, List, Optional, Tuple

from envlock.errors import UsageError
from envlock.export.common import ExportRequest, Exporter, header_lines, require_hashes

__all__ = ["DockerfileExporter", "EXPORTER", "docker_run_flags", "LOCK_IN_IMAGE",
           "CONTEXT_IN_IMAGE"]

LOCK_IN_IMAGE = "/etc/envlock/envlock.lock"
#: where the build context's envlock files are copied
CONTEXT_IN_IMAGE = "/etc/envlock/context"
_DIGEST = re.compile(r"^[^@\s]+@sha256:[0-9a-f]{64}$")
_SHM_DEFAULT = "--shm-size=16g"


def docker_run_flags(has_gpus: bool) -> Tuple[List[str], List[str]]:
    """(flags, one explanation per flag) for ``docker run``.

    ``--shm-size`` (or ``--ipc=host``) is read from the fixes of the matrix's advisories, so
    the advice stays the one the advisories give.
    """
    from envlock.matrix import get_matrix

    flags: List[str] = []
    why: List[str] = []
    if has_gpus:
        flags.append("--gpus all")
        why.append("--gpus all: the NVIDIA Container Toolkit mounts the driver and the "
                   "GPUs; the image carries no driver, only the CUDA libraries of the lock.")
    shm, ids, ipc = None, [], False
    for adv in sorted(get_matrix().advisories.values(), key=lambda a: a.id):
        for fix in adv.fix:
            if "docker run" not in fix:
                continue
            m = re.search(r"--shm-size=\S+", fix)
            if m:
                shm = shm or m.group(0)
                ids.append(adv.id)
                ipc = ipc or "--ipc=host" in fix
    shm = shm or _SHM_DEFAULT
    flags.append(shm)
    alt = " (or --ipc=host)" if ipc or not ids else ""
    src = f" (advisories {', '.join(sorted(set(ids)))})" if ids else ""
    why.append(f"{shm}{alt}: Docker gives containers 64 MiB of /dev/shm, too little for "
               f"NCCL's shared-memory transport and DataLoader workers{src}.")
    return flags, why


def _dq(value: str) -> str:
    """A Dockerfile ENV value, double-quoted."""
    return json.dumps(value)


def _check_base(base: str) -> bool:
    """Whether ``base`` is pinned by digest; :class:`UsageError` for a malformed one."""
    if "@" not in base:
        return False
    if not _DIGEST.match(base):
        raise UsageError(f"base image {base!r}: a digest must be IMAGE@sha256:<64 hexadecimal "
                         f"digits>")
    return True


class DockerfileExporter(Exporter):
    name = "dockerfile"
    summary = "Dockerfile build context: the lock and envlock, verified at build and start"
    needs_hashes = True

    def filename(self, target: str) -> str:
        return "Dockerfile"

    def warnings(self, request: ExportRequest) -> List[str]:
        base = request.options.get("base_image") or f"python:{request.target.python}-slim"
        if "@" in base:
            return []
        return [f"WARNING: the base image {base} is named by tag only: the tag can move, so "
                f"this build is not reproducible until the base is pinned by digest (export "
                f"again with --base {base}@sha256:<digest>)."]

    def render(self, request: ExportRequest) -> str:
        """The Dockerfile. ``request.options``: ``base_image``; ``envlock_wheel`` (the
        wheel's file name in the context, absent when envlock comes from a URL)."""
        from envlock import __version__
        from envlock.export import context as ctx

        t = request.target
        if not t.platform.startswith("linux_"):
            raise UsageError(f"target {t.name} is {t.platform}: a Dockerfile needs a Linux "
                             f"target (resolve with --platform linux_x86_64 or "
                             f"linux_aarch64)")
        if t.python.endswith("t") and not request.options.get("base_image"):
            raise UsageError(f"target {t.name} is the free-threaded Python {t.python}, for "
                             f"which there is no official slim image; pass --base")
        require_hashes(request, "dockerfile")
        base = request.options.get("base_image") or f"python:{t.python}-slim"
        pinned = _check_base(base)
        arm = t.platform == "linux_aarch64"
        flags, why = docker_run_flags(bool(t.gpus))
        tag = f"envlock-{t.name}"
        wheel = request.options.get("envlock_wheel")
        body = [
            "Build it from its directory (the build context; it holds every file the build "
            "copies):",
            f"  docker build -t {tag} .",
            "Run it with the flags the advisories call for:",
            f"  docker run {' '.join(flags)} {tag} python train.py",
            *why,
            f"The base image is Debian with glibc >= {t.glibc or '2.28'} as the wheels need.",
            f"envlock {__version__} (distribution envlock-gpu) lives in /opt/envlock, apart "
            f"from the locked environment in /opt/venv; it is installed from "
            + (f"{wheel} in this context" if wheel else "the --envlock-from URL")
            + " with pip --no-index --require-hashes, never by name from an index.",
            "envlock verify checks the installed packages during the build and the driver "
            "and GPUs at every start (--stage runtime) before your command runs.",
        ]
        lines = header_lines(request, "Dockerfile", body,
                             [] if pinned else self.warnings(request))
        verify = (f"envlock verify --python /opt/venv/bin/python --lock {LOCK_IN_IMAGE} "
                  f"--target {shlex.quote(t.name)}")
        entry = json.dumps(["/bin/sh", "-c", f"{verify} --stage runtime && exec \"$@\"",
                            "envlock-entrypoint"])
        envlock_files = [ctx.ENVLOCK_REQUIREMENTS, ctx.ENVLOCK_WHEEL_REQ] + (
            [wheel] if wheel else [])
        lines += [
            "",
            f"ARG BASE_IMAGE={base}",
            "FROM " + ("--platform=linux/arm64 " if arm else "") + "${BASE_IMAGE}",
            "",
            "ENV PYTHONDONTWRITEBYTECODE=1 \\",
            "    PIP_NO_CACHE_DIR=1 \\",
            "    PIP_DISABLE_PIP_VERSION_CHECK=1 \\",
            "    ENVLOCK_PYTHON=/opt/venv/bin/python \\",
            "    VIRTUAL_ENV=/opt/venv \\",
            "    PATH=/opt/venv/bin:$PATH",
        ]
        require = _require_cuda(t)
        if require:
            lines += ["", "# for runtimes that still evaluate it (the legacy NVIDIA container "
                          "runtime hook):",
                      "# the CUDA version the lock's driver floor supports. In CDI mode the",
                      "# NVIDIA Container Toolkit does not evaluate it "
                      "(NVIDIA/nvidia-container-toolkit#1470):",
                      "# the entrypoint's envlock verify --stage runtime is the gate there",
                      f"ENV NVIDIA_REQUIRE_CUDA={_dq(require)}"]
        if t.env:
            lines += ["", "# the environment the lock was resolved for (envlock verify "
                          "checks it)"]
            lines += [f"ENV {k}={_dq(t.env[k])}" for k in sorted(t.env)]
        pip_envlock = "pip --python /opt/envlock/bin/python install --no-deps --require-hashes"
        lines += [
            "",
            "# envlock in its own virtual environment: its dependencies pinned by version and",
            "# sha256, envlock itself from this context (--no-index: never looked up by name)",
            f"COPY {' '.join(envlock_files)} {CONTEXT_IN_IMAGE}/",
            "RUN python -m venv --without-pip /opt/envlock \\",
            f" && {pip_envlock} --only-binary :all: \\",
            f"        -r {CONTEXT_IN_IMAGE}/{ctx.ENVLOCK_REQUIREMENTS} \\",
            f" && cd {CONTEXT_IN_IMAGE} \\",
            f" && {pip_envlock} --no-index -r {ctx.ENVLOCK_WHEEL_REQ} \\",
            " && ln -s /opt/envlock/bin/envlock /usr/local/bin/envlock",
            "",
            "# the locked environment: exactly the lock, hash-checked, nothing resolved again",
            f"COPY {ctx.REQUIREMENTS} {ctx.LOCK} /etc/envlock/",
            "RUN python -m venv --without-pip /opt/venv \\",
            " && pip --python /opt/venv/bin/python install --no-deps --require-hashes \\",
            f"        -r /etc/envlock/{ctx.REQUIREMENTS} \\",
            f" && {verify} --stage build",
            "",
            f"ENTRYPOINT {entry}",
            'CMD ["python"]',
        ]
        return "\n".join(lines) + "\n"


def _require_cuda(t: Any) -> Optional[str]:
    """``cuda>=X.Y`` for the lock's driver floor (the newest CUDA its driver supports),
    or None for a CPU target or a lock without a floor."""
    if not t.gpus or not t.driver_min:
        return None
    from envlock.matrix import get_matrix

    cuda = get_matrix().driver_full_cuda(t.driver_min)
    return f"cuda>={cuda}" if cuda else None


EXPORTER = DockerfileExporter()
