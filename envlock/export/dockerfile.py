"""``--format dockerfile``: an image that installs the lock for one target and checks it.

The image is a slim official Python base with two parts kept apart:

* ``/opt/venv`` holds exactly the lock, installed with ``pip --no-deps --require-hashes``
  from the requirements that envlock exports *inside* the build from the copied lock (one
  source of truth: the lock, not a second file to keep in step);
* ``/opt/envlock`` holds envlock and its own dependencies (``pip install --target``), so
  they never enter the locked environment. ``/usr/local/bin/envlock`` runs it with the
  locked environment's interpreter and ``/opt/envlock`` appended to ``sys.path``: the
  locked packages come first, so ``envlock verify`` sees the environment the user's
  command will run in.

``envlock verify --stage build`` runs during the build (a wrong install fails the build),
``envlock verify --stage runtime`` in the entrypoint before the user's command (the wrong
driver or GPU fails the start, not an hour into training). The ``docker run`` flags come
from the matrix's advisories (``/dev/shm`` too small for NCCL and DataLoader workers).
"""

from __future__ import annotations

import json
import posixpath
import re
import shlex
from typing import List, Tuple

from envlock.errors import UsageError
from envlock.export.common import ExportRequest, Exporter, header_lines, require_hashes

__all__ = ["DockerfileExporter", "EXPORTER", "docker_run_flags", "LOCK_IN_IMAGE"]

LOCK_IN_IMAGE = "/etc/envlock/envlock.lock"
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


def _context_path(lock_path: str) -> Tuple[str, bool]:
    """The lock's path inside the build context, and whether it had to be changed."""
    p = lock_path.replace("\\", "/")
    if p and not p.startswith("/") and ".." not in p.split("/"):
        return posixpath.normpath(p), False
    return posixpath.basename(p) or "envlock.lock", True


def _dq(value: str) -> str:
    """A Dockerfile ENV value, double-quoted."""
    return json.dumps(value)


class DockerfileExporter(Exporter):
    name = "dockerfile"
    summary = "Dockerfile: slim Python image with the lock, verified at build and start"
    needs_hashes = True

    def filename(self, target: str) -> str:
        return f"Dockerfile.{target}"

    def render(self, request: ExportRequest) -> str:
        from envlock import __version__

        t = request.target
        if not t.platform.startswith("linux_"):
            raise UsageError(f"target {t.name} is {t.platform}: a Dockerfile needs a Linux "
                             f"target (resolve with --platform linux_x86_64 or "
                             f"linux_aarch64)")
        if t.python.endswith("t") and not request.options.get("base_image"):
            raise UsageError(f"target {t.name} is the free-threaded Python {t.python}, for "
                             f"which there is no official slim image; pass --base-image")
        require_hashes(request, "dockerfile")
        base = request.options.get("base_image") or f"python:{t.python}-slim"
        arm = t.platform == "linux_aarch64"
        ctx_lock, moved = _context_path(request.lock_path)
        flags, why = docker_run_flags(bool(t.gpus))
        fname = self.output_name(request)
        tag = f"envlock-{t.name}"
        body = [
            "Build it in a directory (the build context) that holds the lock as "
            f"{ctx_lock}:",
            f"  docker build -f {fname} -t {tag} .",
            "Run it with the flags the advisories call for:",
            f"  docker run {' '.join(flags)} {tag} python train.py",
            *why,
            f"The base image {base} is Debian with glibc >= {t.glibc or '2.28'} as the "
            f"wheels need; pin it by digest (--build-arg BASE_IMAGE=...@sha256:...) for "
            f"rebuilds that are identical.",
            "envlock verify checks the installed packages during the build and the driver "
            "and GPUs at every start (--stage runtime) before your command runs.",
        ]
        if moved:
            body.append(f"The lock {request.lock_path} is outside the build context: copy "
                        f"it next to this Dockerfile as {ctx_lock}.")
        lines = header_lines(request, "Dockerfile", body)
        export_cmd = (f"envlock export --format requirements --lock {LOCK_IN_IMAGE} "
                      f"--target {shlex.quote(t.name)} -o /etc/envlock/requirements.txt")
        verify = f"envlock verify --lock {LOCK_IN_IMAGE} --target {shlex.quote(t.name)}"
        launcher = ("printf '%s\\n' '#!/opt/venv/bin/python' 'import sys' "
                    "\"sys.path.append('/opt/envlock')\" 'from envlock.cli import run' "
                    "'run()' > /usr/local/bin/envlock")
        entry = json.dumps(["/bin/sh", "-c", f"{verify} --stage runtime && exec \"$@\"",
                            "envlock-entrypoint"])
        lines += [
            "",
            f"ARG BASE_IMAGE={base}",
            "FROM " + ("--platform=linux/arm64 " if arm else "") + "${BASE_IMAGE}",
            "",
            "ENV PYTHONDONTWRITEBYTECODE=1 \\",
            "    PIP_NO_CACHE_DIR=1 \\",
            "    PIP_DISABLE_PIP_VERSION_CHECK=1 \\",
            "    VIRTUAL_ENV=/opt/venv \\",
            "    PATH=/opt/venv/bin:$PATH",
        ]
        if t.env:
            lines += ["", "# the environment the lock was resolved for (envlock verify "
                          "checks it)"]
            lines += [f"ENV {k}={_dq(t.env[k])}" for k in sorted(t.env)]
        lines += [
            "",
            "# envlock, apart from the locked environment (its dependencies must not change "
            "it)",
            f"ARG ENVLOCK_REQUIREMENT=envlock=={__version__}",
            "RUN pip install --target /opt/envlock \"${ENVLOCK_REQUIREMENT}\" \\",
            f" && {launcher} \\",
            " && chmod 755 /usr/local/bin/envlock",
            "",
            "# the locked environment: exactly the lock, hash-checked, nothing resolved again",
            f"COPY {ctx_lock} {LOCK_IN_IMAGE}",
            "RUN python -m venv --without-pip /opt/venv \\",
            f" && {export_cmd} \\",
            " && pip --python /opt/venv/bin/python install --no-deps --require-hashes \\",
            "        -r /etc/envlock/requirements.txt \\",
            f" && {verify} --stage build",
            "",
            f"ENTRYPOINT {entry}",
            'CMD ["python"]',
        ]
        return "\n".join(lines) + "\n"


EXPORTER = DockerfileExporter()
