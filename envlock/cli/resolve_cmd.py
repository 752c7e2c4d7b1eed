"""``envlock resolve``: hardware targets + requirements -> a pinned, hashed lock."""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from envlock.errors import ExitCode, UsageError

__all__ = ["register", "lock_json"]

DEFAULT_LOCK = "envlock.lock"


def register(sub: "argparse._SubParsersAction[Any]") -> None:
    p = sub.add_parser(
        "resolve",
        help="lock PyTorch and its CUDA stack (and your requirements) for GPU targets",
        description="Choose the PyTorch build that is right for each hardware target and "
                    "resolve the full closure into a pinned, hashed lock.",
        epilog="Preference: newest torch allowed, then newest CUDA line the driver runs, "
               "then fewest advisory overrides. Exit codes: 0 ok, 1 stale lock (--check), "
               "2 usage/input error, 3 no build fits, 4 index error, 6 requirements conflict, "
               "7 sdist build failed or forbidden (--no-build).")
    p.add_argument("requirements", nargs="*", metavar="REQ",
                   help="more requirements to lock with torch (e.g. transformers torchvision)")
    p.add_argument("--gpu", action="append", default=[], metavar="NAME",
                   help="a target GPU (repeat for several targets): H20, A100, 'RTX 4090'")
    p.add_argument("--cpu", action="store_true", help="also (or only) a CPU-only target")
    p.add_argument("--together", action="store_true",
                   help="one environment that serves every --gpu: a fleet of machines "
                        "with one GPU model per machine; a machine that mixes models in "
                        "one job (RTX 3090 + 4090) is checked with --from-snapshot of it, "
                        "which also reports the mixed-GPU hazards")
    p.add_argument("--from-snapshot", metavar="FILE",
                   help="target = the machine in this snapshot (GPUs, driver, Python)")
    p.add_argument("--from-node", metavar="FILE",
                   help="targets from Kubernetes node labels (GPU Feature Discovery): the "
                        "output of 'kubectl get nodes -o json' (one target per distinct "
                        "GPU/driver label set, named after the node pool) or of 'kubectl "
                        "get node NAME -o json'")
    p.add_argument("--torch", metavar="SPEC", help="torch version constraint, e.g. '>=2.4,<2.5'")
    p.add_argument("--cuda", metavar="X.Y", help="force a CUDA line (12.1, 12.8, 13.0, ...)")
    p.add_argument("--driver", metavar="VERSION",
                   help="the NVIDIA driver the targets run: a release (535.104.05) or a "
                        "branch (535, R535: its oldest release); default "
                        "$UV_CUDA_DRIVER_VERSION, $CONDA_OVERRIDE_CUDA, else none")
    p.add_argument("--python", default=None, metavar="X.Y",
                   help="target Python (default: the running interpreter's)")
    p.add_argument("--platform", default=None,
                   choices=["linux_x86_64", "linux_aarch64", "win_amd64"],
                   help="target platform (default linux_x86_64)")
    p.add_argument("--glibc", default=None, metavar="X.Y",
                   help="target glibc for manylinux wheels (default 2.28)")
    p.add_argument("-r", "--requirement", action="append", default=[], metavar="FILE",
                   help="read requirements from a file (repeatable); its --index-url, "
                        "--extra-index-url and -c lines count as pip's do")
    p.add_argument("-c", "--constraint", action="append", default=[], metavar="FILE",
                   help="a constraints file: versions allowed for packages that are "
                        "locked anyway, as pip's -c (repeatable)")
    p.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                   help="an environment variable the targets must run with (checked by verify)")
    p.add_argument("--index-url", help="primary package index (default: pip's configuration)")
    p.add_argument("--extra-index-url", action="append", default=None, metavar="URL",
                   help="more indexes, consulted only for packages the first lacks")
    p.add_argument("--pytorch-index-url", metavar="URL",
                   default=os.environ.get("ENVLOCK_PYTORCH_INDEX_URL",
                                          "https://download.pytorch.org/whl"),
                   help="base of the PyTorch index or its mirror ($ENVLOCK_PYTORCH_INDEX_URL)")
    p.add_argument("--prefer", choices=["pypi", "pytorch-index"], default=None,
                   help="rank builds on this index first among the qualifying builds of the "
                        "chosen torch release (default: newest CUDA line first); an "
                        "unreachable index falls back to an equivalent build either way")
    p.add_argument("--offline", action="store_true",
                   help="no network: use the cache, or only the matrix when nothing is cached")
    p.add_argument("--refresh", action="store_true",
                   help="revalidate every cached index page (default: reuse pages younger "
                        "than $ENVLOCK_INDEX_TTL seconds, 600, when the index sends no "
                        "caching headers)")
    p.add_argument("--prerelease", default="if-necessary",
                   choices=["if-necessary", "allow", "disallow", "explicit"],
                   help="pre-release versions (uv's modes): if-necessary (default) only when "
                        "no stable version satisfies, e.g. nltk==3.9b1; allow; disallow; "
                        "explicit: only for requirements that name a pre-release")
    p.add_argument("--no-build", action="store_true",
                   help="never run an sdist's build backend to read its dependencies: an "
                        "sdist that needs it is an error (exit 7)")
    p.add_argument("--trust-pkg-info", action="append", default=[], metavar="NAME",
                   help="read this project's dependencies from its sdist's PKG-INFO even "
                        "where it marks them dynamic, instead of building it (repeatable; "
                        "Metadata-Version 2.2 or later only; the lock records each use): "
                        "for sdists whose build imports what it does not declare, such "
                        "as flash-attn")
    p.add_argument("-o", "--output", default=DEFAULT_LOCK, metavar="FILE",
                   help=f"lock file to write (default {DEFAULT_LOCK}; '-' for stdout)")
    p.add_argument("--dry-run", action="store_true", help="resolve but do not write the lock")
    p.add_argument("--check", action="store_true",
                   help="exit 1 if the lock is stale (inputs, requirement files or matrix "
                        "changed); writes nothing")
    p.add_argument("--lock", metavar="FILE",
                   help="with --check: the lock to check, as verify and export name it "
                        f"(default {DEFAULT_LOCK}; -o FILE says the same)")
    p.add_argument("--json", action="store_true", help="machine-readable summary on stdout")
    p.add_argument("-v", "--verbose", action="store_true", help="explain every decision")
    p.set_defaults(run=run)


def _parse_env(items: List[str]) -> Dict[str, str]:
    out = {}
    for item in items:
        if "=" not in item:
            raise UsageError(f"--env {item!r}: expected NAME=VALUE")
        k, v = item.split("=", 1)
        out[k.strip()] = v
    return out


def build_request(args: argparse.Namespace, matrix: Any, config: Any) -> Any:
    from envlock.index.config import redact
    from envlock.platforms import DEFAULT_GLIBC
    from envlock.resolve import requirement_lines_from_cli
    from envlock.resolve.target import (
        ResolveRequest,
        gpu_targets,
        parse_requirements,
        snapshot_target,
        torch_spec_from,
    )

    from envlock.resolve.target import FileOptions, local_labels

    options = FileOptions()
    lines, digests = requirement_lines_from_cli(args.requirements, args.requirement,
                                                args.constraint, options)
    digests = _relative_to_lock(digests, args.output)
    labelled = local_labels(parse_requirements(lines + options.constraints), args.cuda,
                            tuple(matrix.cuda_lines), cpu=bool(args.cpu and not args.gpu))
    cuda = labelled.cuda
    reqs = list(labelled.requirements[:len(lines)])
    spec, rest = torch_spec_from(reqs, args.torch)
    cspec, constraints = torch_spec_from(labelled.requirements[len(lines):], None)
    spec &= cspec
    if args.from_snapshot:
        if getattr(args, "from_node", None):
            raise UsageError("give --from-snapshot or --from-node, not both")
        if args.gpu or args.cpu:
            raise UsageError("--from-snapshot already names the target; drop --gpu/--cpu")
        from envlock.snapshot import load_snapshot

        snap = load_snapshot(args.from_snapshot)
        targets = [snapshot_target(matrix, snap, args.from_snapshot, args.python,
                                   args.platform, args.glibc)]
    elif getattr(args, "from_node", None):
        if args.gpu or args.cpu:
            raise UsageError("--from-node already names the targets; drop --gpu/--cpu")
        from envlock.resolve.nodes import node_targets, read_nodes

        targets = node_targets(matrix, read_nodes(args.from_node), args.from_node,
                               python=args.python or default_python(),
                               glibc=args.glibc or DEFAULT_GLIBC)
    elif not (args.gpu or args.cpu):
        targets = [_local_target(matrix, args)]
    else:
        targets = gpu_targets(matrix, args.gpu, cpu=args.cpu, together=args.together,
                              python=args.python or default_python(),
                              platform=args.platform or "linux_x86_64",
                              glibc=args.glibc or DEFAULT_GLIBC, driver=None)
    targets = [_with_driver(matrix, t, args.driver, args.from_snapshot) for t in targets]
    if args.cuda and args.cuda not in matrix.cuda_lines:
        raise UsageError(f"--cuda {args.cuda!r}: not a CUDA line the matrix knows "
                         f"({', '.join(matrix.cuda_lines)})")
    prefer = args.prefer or ("pytorch-index" if labelled.label else None)
    return ResolveRequest(
        targets=tuple(targets), torch=spec, cuda=cuda, requirements=tuple(rest),
        constraints=tuple(constraints),
        requirement_files=digests, offline=args.offline,
        indexes=tuple(redact(u) for u in config.indexes),
        pytorch_index=_pytorch_index(args, config), env=_parse_env(args.env),
        together=args.together, prefer=prefer, prerelease=args.prerelease,
        trust_pkg_info=_trusted_names(args.trust_pkg_info))


def _trusted_names(names: List[str]) -> Tuple[str, ...]:
    """``--trust-pkg-info`` values as canonical project names, each once, sorted."""
    from packaging.utils import InvalidName, canonicalize_name

    out = set()
    for name in names:
        try:
            out.add(str(canonicalize_name(name, validate=True)))
        except InvalidName:
            raise UsageError(f"--trust-pkg-info {name!r}: not a project name") from None
    return tuple(sorted(out))


def _pytorch_index(args: argparse.Namespace, config: Any) -> str:
    """--pytorch-index-url / $ENVLOCK_PYTORCH_INDEX_URL, else a PyTorch-layout mirror among
    pip's indexes (``.../cu121`` as an extra index), else download.pytorch.org."""
    from envlock.resolve.reach import PYTORCH_DEFAULT, mirror_from_config

    given = args.pytorch_index_url.rstrip("/")
    if given != PYTORCH_DEFAULT:
        return given
    return mirror_from_config(config) or given


def default_python() -> str:
    """The running interpreter's X.Y, as uv and pip default to."""
    return f"{sys.version_info[0]}.{sys.version_info[1]}"


def _with_driver(matrix: Any, target: Any, driver: Optional[str],
                 from_snapshot: Optional[str]) -> Any:
    """The target with the driver it is resolved for: --driver, else a driver hint from the
    environment (for --gpu targets), else the snapshot's or this host's."""
    from dataclasses import replace

    from envlock.resolve.driver import driver_from_env, parse_driver

    if target.cpu:
        return target
    stated = parse_driver(driver, target.gpus) if driver else None
    if stated is None and target.driver is None and not from_snapshot:
        stated = driver_from_env(os.environ, matrix, target.gpus)
    if stated is None:
        return target
    notes = tuple(target.notes) + ((stated.note,) if stated.note else ())
    return replace(target, driver=stated.version, notes=notes)


def _local_target(matrix: Any, args: argparse.Namespace) -> Any:
    """This host as the target: its GPUs and its driver (NVML, else /proc and sysfs)."""
    from envlock.platforms import DEFAULT_GLIBC
    from envlock.probe.nvml import probe_nvml
    from envlock.resolve.target import gpu_targets

    report = probe_nvml()
    names = [g.name for g in report.gpus if g.name]
    if not names:
        hinted = _arch_hint_target(matrix, args)
        if hinted is not None:
            return hinted
        raise UsageError("nothing to resolve for: this host's GPUs could not be read; give "
                         "--gpu NAME (one or more), --cpu, --from-snapshot FILE, or "
                         "CONDA_OVERRIDE_CUDA_ARCH=X.Y")
    seen: List[str] = []
    gpus = []
    for g in report.gpus:
        if not g.name:
            continue
        m = matrix.gpu(g.name, g.memory_mib)
        if m.id not in seen:
            seen.append(m.id)
            gpus.append(m)
    base = gpu_targets(matrix, [g.id for g in gpus], cpu=False, together=True,
                       python=args.python or default_python(),
                       platform=args.platform or "linux_x86_64",
                       glibc=args.glibc or DEFAULT_GLIBC, driver=None)[0]
    version = report.driver.version if report.driver else None
    note = (f"this host: {', '.join(names)}, driver {version}" if version
            else f"this host: {', '.join(names)}; its driver version could not be read")
    from dataclasses import replace

    return replace(base, driver=version, origin="this host", notes=(note,), separate=False)



def _arch_hint_target(matrix: Any, args: argparse.Namespace) -> Any:
    """A GPU-less build host that states conda's ``CONDA_OVERRIDE_CUDA_ARCH`` (CEP 46: the
    lowest compute capability of the machines it builds for): every GPU of that compute
    capability, as one target (the GPU model stays unknown). None without the variable."""
    from dataclasses import replace

    from envlock.platforms import DEFAULT_GLIBC
    from envlock.resolve.installer_env import CONDA_CUDA_ARCH, parse_cuda_arch
    from envlock.resolve.target import gpu_targets

    raw = os.environ.get(CONDA_CUDA_ARCH, "").strip()
    if not raw:
        return None
    cc = parse_cuda_arch(raw)
    if cc is None:
        raise UsageError(f"{CONDA_CUDA_ARCH}={raw!r} is not a compute capability like 8.6")
    gpus = [g for g in matrix.gpus.values() if g.compute_capability == cc]
    if not gpus:
        raise UsageError(f"{CONDA_CUDA_ARCH}={cc}: no GPU the matrix knows is compute "
                         f"capability {cc}")
    base = gpu_targets(matrix, [g.id for g in gpus], cpu=False, together=True,
                       python=args.python or default_python(),
                       platform=args.platform or "linux_x86_64",
                       glibc=args.glibc or DEFAULT_GLIBC, driver=None)[0]
    note = (f"{CONDA_CUDA_ARCH}={cc}: no GPU on this host; resolved for every GPU of compute "
            f"capability {cc} ({len(gpus)} models; the model stays unknown)")
    return replace(base, name=f"cc{cc}", origin=CONDA_CUDA_ARCH, notes=(note,),
                   family=f"cc{cc}", separate=True)


def _lock_dir(output: str) -> Path:
    return Path.cwd() if output == "-" else Path(os.path.abspath(output)).parent


def _relative_to_lock(digests: Dict[str, str], output: str) -> Dict[str, str]:
    """Requirement-file paths as the lock records them: relative to the lock's directory
    (POSIX separators), so ``--check`` works from any directory."""
    base = _lock_dir(output)
    out = {}
    for path, digest in digests.items():
        rel = os.path.relpath(os.path.abspath(path), base)
        out[Path(rel).as_posix()] = digest
    return out


def _ask_early(client: Any, config: Any, requirements: Sequence[str]) -> None:
    """Ask the first index for the pages of the command line's requirements now, before
    the matrix is read and the request built (~0.2 s of a cold start, imports mostly):
    the resolution asks for them first anyway, from the same index, and the client gives
    it these answers. The torch family and CUDA wheels are left to the resolution (their
    index depends on the build it picks); a line that does not parse is left to it too,
    which says what is wrong with it."""
    from envlock.families import TORCH_FAMILY, is_cuda_wheel

    if not config.indexes:
        return
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    for text in requirements[:64]:
        try:
            name = canonicalize_name(Requirement(text).name)
        except InvalidRequirement:
            continue
        if name not in TORCH_FAMILY and not is_cuda_wheel(name):
            client.prefetch_page(config.indexes[0], name)


def _first_names(requirements: Sequence[str]) -> Tuple[str, ...]:
    """Projects whose pages a resolve reads first (torch's, the first requirement's),
    normalised as in index URLs (PEP 503), without parsing the requirement (packaging is
    not imported yet); a line this does not read gives nothing."""
    names = ["torch"]
    for text in requirements[:1]:
        m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", text)
        if m:
            names.append(re.sub(r"[-_.]+", "-", m.group(1)).lower())
    return tuple(names)


def _index_config(args: argparse.Namespace) -> Any:
    """pip's configuration, then the requirements files' index lines, then the command
    line's options (the command line's --index-url wins over a file's)."""
    from envlock.index.config import load_index_config

    # (no file: the resolver, which reads them, is not imported yet: the pages asked
    # early wait for nothing but this)
    files = _file_options(args) if args.requirement or args.constraint else None
    extras = list(args.extra_index_url or []) + [
        u for u in (files.extra_index_urls if files else ())
        if u not in (args.extra_index_url or [])]
    return load_index_config(
        index_url=args.index_url or (files.index_url if files else None),
        extra_index_urls=tuple(extras) if args.extra_index_url is not None or extras
        else None)


def _file_options(args: argparse.Namespace) -> Any:
    """Index options and constraints of the requirements and constraints files."""
    from envlock.resolve import requirement_lines_from_cli
    from envlock.resolve.target import FileOptions

    options = FileOptions()
    requirement_lines_from_cli((), args.requirement, args.constraint, options)
    return options


def _has_target_args(args: argparse.Namespace) -> bool:
    return bool(args.gpu or args.cpu or args.from_snapshot or getattr(args, "from_node", None))


def run(args: argparse.Namespace, out: Any) -> int:
    """The command; a run whose every input is unchanged since a recorded one replays it
    (:mod:`envlock.replay`) without importing the resolver."""
    from envlock import replay
    from envlock._cache_files import cache_dir

    progress_shown = out.stderr_is_tty and not args.json
    eligible = bool((args.gpu or args.cpu) and not (
        args.check or args.refresh or args.from_snapshot or getattr(args, "from_node", None)
        or args.lock is not None or progress_shown))
    # the key: the command line as main() looked it up (replay.replayed), before parsing
    session = replay.begin(getattr(args, "argv", None) or [], cache_dir(), eligible,
                           replay.streams_of(out))
    if session is None:
        return _run(args, out)
    streams = out.stdout, out.stderr
    tee_out, tee_err = replay.Tee(out.stdout), replay.Tee(out.stderr)
    out.stdout, out.stderr = tee_out, tee_err
    session.start()
    try:
        code = _run(args, out)
    finally:
        session.stop()
        out.stdout, out.stderr = streams
    if code == ExitCode.OK:
        lock_text: Optional[str] = None
        written = None if args.dry_run or args.output == "-" else args.output
        if written is not None:
            # only a regular file is read back: -o /dev/stdout or a FIFO was written
            # into, and reading it would wait for ever (such a run is not recorded)
            import stat as _stat

            try:
                if not _stat.S_ISREG(os.stat(written).st_mode):
                    return code
                lock_text = Path(written).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                return code
        session.store(written, lock_text, tee_out.text(), tee_err.text())
    return code


def _run(args: argparse.Namespace, out: Any) -> int:
    if args.lock is not None:
        if not args.check:
            raise UsageError("--lock names the lock that --check reads; a new lock is "
                             "written with -o FILE")
        if args.output not in (DEFAULT_LOCK, args.lock):
            raise UsageError(f"--lock {args.lock} and -o {args.output} name two locks; "
                             f"pass one of them")
        args.output = args.lock
    if args.check:
        from envlock.matrix import get_matrix

        return _check(args, out, get_matrix())
    config = _index_config(args)
    from envlock._cache_files import cache_dir, root_warning

    cdir = cache_dir()
    if not args.offline:
        # the requests in a helper process (envlock.index.netproc), or at least the first
        # request's imports and TLS context in the background, from now on: the matrix
        # and the resolver are read meanwhile (envlock.index.http.warm_up). The helper
        # only for requirements of the user's own: a bare build's closure (torch's 20
        # small pages) does not pay for a second interpreter's memory (about 30 MB)
        from envlock.index.http import warm_up

        warm_up(config, cdir, _first_names(args.requirements),
                helper=bool(args.requirements or args.requirement), refresh=args.refresh)
    from envlock._redact import strip_userinfo

    # the command is written into the lock: never with the credentials of a URL in it
    command = "envlock resolve " + " ".join(shlex.quote(strip_userinfo(a))
                                            for a in _argv_for_header(args))
    from envlock.index.client import IndexClient

    shared = root_warning(cdir)
    if shared:
        out.error("envlock: warning: " + _one_line_text(shared))
    progress = _Progress(out) if out.stderr_is_tty and not args.json else None
    client = IndexClient(config, cache_dir=cdir, offline=args.offline,
                         on_request=progress.request if progress else None,
                         refresh=args.refresh, no_build=args.no_build,
                         trust_pkg_info=_trusted_names(args.trust_pkg_info),
                         on_build=lambda filename: out.error(
                             "envlock: note: running the build backend of "
                             f"{_one_line_text(filename)} to learn its dependencies "
                             "(--no-build or ENVLOCK_NO_BUILD=1 forbids it)"))
    try:
        _ask_early(client, config, args.requirements)
        from envlock.matrix import get_matrix

        matrix = get_matrix()
        request = build_request(args, matrix, config)
        from envlock.resolve import resolve

        lock = resolve(request, matrix, config, client=client, command=command.strip(),
                       on_event=progress.event if progress else None)
    finally:
        client.close()
        used = client.transport.helper_usage
        if used is not None and (args.debug or os.environ.get("ENVLOCK_DEBUG")):
            import resource

            own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            out.error(f"envlock: debug: peak RSS {own} KiB here, {used[0]} KiB in the "
                      f"network helper (CPU {used[1]:.3f} s)")
        if progress:
            progress.done()
    path: Optional[str] = None
    if not args.dry_run:
        from envlock.lock.io import render_lock, write_lock

        if args.output == "-":
            if not args.json:
                out.stdout.write(render_lock(lock))
        else:
            write_lock(lock, args.output)
            path = args.output
    if args.json:
        out.print(json.dumps(lock_json(lock, path), indent=2))
        return ExitCode.OK
    if args.output == "-" and not args.dry_run:
        return ExitCode.OK
    for i, t in enumerate(lock.targets):
        tv = t.torch
        where = "PyPI" if tv and tv.on_pypi else (tv.index if tv else "")
        hw = ", ".join(f"{g} ({cc})" for g, cc in zip(t.gpus, t.compute_capabilities)) or "CPU"
        if t.family:
            hw = (f"the {t.family} family ({len(t.gpus)} models, "
                  f"{t.compute_capabilities[0]})")
        from envlock.versions import driver_label

        drv = f"; driver >= {driver_label(t.driver_min)}" if t.driver_min else ""
        version = tv.installed_version if tv else "?"
        variant = tv.variant if tv else "?"
        out.print(f"{t.name}: torch {version} ({variant}, "
                  f"{where}) for {hw}, Python {t.python}, {t.platform}{drv}; "
                  f"{len(t.packages)} package{'' if len(t.packages) == 1 else 's'}"
                  + ("" if t.closure == "full" else " (GPU core only: offline, nothing cached)"))
        for a in t.advisories:
            out.print(f"  advisory {a.id} [{a.action}]: {a.summary}"
                      + (f" -> {', '.join(a.override)}" if a.override else "")
                      + (f" (not confirmed: {', '.join(a.unknown)} unknown)"
                         if a.unknown else ""))
        spec = request.targets[i] if i < len(request.targets) else None
        if not args.verbose:  # --verbose prints them with the whole decision
            for line in t.decision:
                if line.startswith("index fallback: "):
                    out.print(f"  {line}")
            for note in (spec.notes if spec is not None else ()):
                out.print(f"  {note}")
            from envlock.resolve.family import MEMBER_FLOORS

            for r in t.driver_min_reasons:
                if r.startswith(MEMBER_FLOORS):
                    out.print(f"  {r}")
        if spec is not None:
            _print_driver_hint(out, args, request, spec, t.driver_min)
        _print_installer_env(out, t.installer_env, args.verbose)
        if args.verbose:
            for line in t.decision:
                out.print(f"  - {line}")
            for r in t.driver_min_reasons:
                out.print(f"  - driver minimum: {r}")
    hint = _installed_torch_hint(args, request, lock, command, matrix)
    if hint:
        out.print(hint)
    if path:
        out.print(f"wrote {path}")
    return ExitCode.OK


def _installed_torch_hint(args: argparse.Namespace, request: Any, lock: Any, command: str,
                          matrix: Any) -> Optional[str]:
    """``--from-snapshot`` with no torch asked for locks the newest torch for the machine's
    GPUs, which may not be the one it runs: say so, with the command that locks the
    installed release (and its CUDA line) instead."""
    if not args.from_snapshot or str(request.torch) or len(lock.targets) != 1:
        return None
    from packaging.version import InvalidVersion, Version

    from envlock.snapshot import load_snapshot

    snap = load_snapshot(args.from_snapshot)
    have = snap.packages.get("torch") or (snap.torch.version if snap.torch else None)
    picked = lock.targets[0].torch
    if not have or picked is None:
        return None
    try:
        release = Version(have.split("+")[0]).base_version
        if release == Version(picked.installed_version.split("+")[0]).base_version:
            return None
    except InvalidVersion:
        return None
    rerun = [command, "--torch", shlex.quote(f"=={release}")]
    cuda = snap.torch.cuda if snap.torch else None
    if cuda and not args.cuda and cuda in matrix.cuda_lines:
        rerun += ["--cuda", cuda]
    return (f"the snapshot's machine has torch {_one_line_text(have)}; this lock picks "
            f"{picked.installed_version}, the newest for its GPUs. To lock the installed "
            f"release: {' '.join(rerun)}")


def _print_installer_env(out: Any, env: Dict[str, str], verbose: bool) -> None:
    """The values a variant-aware installer (uv, pip) and conda/pixi need on a host
    without this GPU to pick what the lock holds; with ``--verbose``, pixi's table."""
    from envlock.resolve.installer_env import (
        CONDA_CUDA,
        CONDA_CUDA_ARCH,
        FORCE_CUDA,
        FORCE_SM_ARCH,
        pixi_snippet,
    )

    if not env:
        return
    out.print(f"  without this GPU: {FORCE_CUDA}={env.get(FORCE_CUDA, '')} "
              f"{FORCE_SM_ARCH}={env.get(FORCE_SM_ARCH, '')}; conda "
              f"{CONDA_CUDA}={env.get(CONDA_CUDA, '')} "
              f"{CONDA_CUDA_ARCH}={env.get(CONDA_CUDA_ARCH, '')}")
    if verbose:
        for line in pixi_snippet(dict(env)).splitlines():
            out.print(f"    {line}")


def _print_driver_hint(out: Any, args: argparse.Namespace, request: Any, spec: Any,
                       floor: Optional[str]) -> None:
    """No driver known: name the lock's floor, and the command for the oldest branch these
    GPUs are commonly deployed on when the floor leaves it out."""
    from envlock.matrix import get_matrix
    from envlock.resolve.driver import driver_hint

    hint = driver_hint(get_matrix(), spec, request.torch, request.cuda,
                       tuple(str(r) for r in request.requirements), floor)
    if hint is None:
        return
    out.print(f"  no driver given: this lock needs driver >= {hint.floor} "
              f"(R{hint.floor_branch} or newer)")
    if not hint.left_out:
        return
    names = spec.family or " + ".join(g.name for g in spec.gpus)
    common = ", ".join(f"R{b}" for b, _ in hint.deployed)
    out.print(f"  {names} machines commonly run {common}; this lock does not run on "
              f"{', '.join(f'R{b}' for b in hint.left_out)}")
    if hint.oldest is None or hint.build is None:
        out.print("  no build qualifies on those branches with these constraints")
        return
    older = [b for b in hint.left_out if b < hint.oldest]
    if older:
        out.print(f"  no build qualifies on {', '.join(f'R{b}' for b in older)}")
    argv: List[str] = []
    skip = False
    # one target of several (--gpu A --gpu B): a --driver applies to every target, so the
    # command names this target's GPU alone, or it fails on the others (exit 3)
    alone = len(request.targets) > 1 and not request.together
    dropped = ("-o", "--output", "--driver") + (("--gpu",) if alone else ())
    for a in _argv_for_header(args):
        if skip:
            skip = False
        elif a in dropped:
            skip = True
        elif not a.startswith(tuple(f"{d}=" for d in dropped if d.startswith("--"))):
            argv.append(a)
    if alone:
        from envlock.resolve.family import member_name

        argv = ["--gpu", spec.family or member_name(spec.gpus[0])] + argv
    from envlock._redact import strip_userinfo

    cmd = "envlock resolve " + " ".join(shlex.quote(strip_userinfo(a)) for a in argv
                                        + ["--driver", f"R{hint.oldest}"])
    out.print(f"  for every R{hint.oldest} release ({hint.build}): {cmd}")


def _argv_for_header(args: argparse.Namespace) -> List[str]:
    argv = list(getattr(args, "argv", None) or sys.argv[1:])
    while argv and argv[0] in ("--debug", "resolve"):
        argv = argv[1:]
    return [a for a in argv if a not in ("--json", "-v", "--verbose", "--dry-run", "--refresh")]


def lock_json(lock: Any, path: Optional[str]) -> Dict[str, Any]:
    """The stable ``--json`` contract of ``envlock resolve``."""
    targets = []
    for t in lock.targets:
        tv = t.torch
        targets.append({
            "name": t.name,
            "gpus": list(t.gpus),
            "gpu_models": list(t.gpu_models),
            "compute_capabilities": list(t.compute_capabilities),
            "python": t.python,
            "platform": t.platform,
            "torch": None if tv is None else {
                "version": tv.version, "variant": tv.variant, "cuda": tv.cuda,
                "index": tv.index, "installed_version": tv.installed_version,
                "arch_list": list(tv.arch_list) if tv.arch_list is not None else None},
            "driver_min": t.driver_min,
            "driver_min_reasons": list(t.driver_min_reasons),
            "closure": t.closure,
            "libraries": dict(t.libraries),
            "packages": [{"name": p.name, "version": p.version, "index": p.index,
                          "hashes": [f"sha256:{h}" for h in p.hashes],
                          **({"specifier": p.specifier} if p.specifier else {})}
                         for p in t.packages],
            "advisories": [{"id": a.id, "action": a.action, "summary": a.summary,
                            **({"override": list(a.override)} if a.override else {}),
                            **({"unknown": list(a.unknown)} if a.unknown else {})}
                           for a in t.advisories],
            "decision": list(t.decision),
            "machines": t.machines,
            "family": t.family,
            "installer_env": dict(t.installer_env),
        })
    return {"lock": path, "envlock_version": lock.envlock_version,
            "matrix_version": lock.matrix_version, "inputs_hash": lock.inputs_hash,
            "targets": targets}


def _check(args: argparse.Namespace, out: Any, matrix: Any) -> int:
    import hashlib

    from envlock.lock.io import load_lock
    from envlock._files import read_user_bytes
    from envlock.errors import EnvlockError
    from envlock.resolve.target import hash_inputs, requirements_digest

    path = args.output if args.output != "-" else DEFAULT_LOCK
    lock = load_lock(path)
    reasons: List[str] = []
    if _has_target_args(args) or args.requirements or args.requirement or args.constraint:
        config = _index_config(args)
        request = build_request(args, matrix, config)
        fresh_hash = request.inputs_hash(matrix.version)
        if fresh_hash != lock.inputs_hash:
            reasons.append("the command's inputs differ from the ones the lock was made from")
    else:
        inputs = dict(lock.inputs)
        files = dict(inputs.get("requirement-files") or {})
        base = _lock_dir(path)
        for f, digest in sorted(files.items()):
            # relative to the lock (older locks: to the directory envlock ran in)
            where = [base / f] if not Path(f).is_absolute() else [Path(f)]
            where.append(Path(f))
            data = None
            for candidate in where:
                try:
                    data = read_user_bytes(candidate, "requirements file")
                    break
                except EnvlockError:
                    continue
            if data is None:
                reasons.append(f"requirements file {f} is gone")
                continue
            text = data.decode("utf-8", "replace")
            now = requirements_digest(text)
            legacy = "sha256:" + hashlib.sha256(data).hexdigest()
            if digest not in (now, legacy):
                reasons.append(f"{f} changed")
                files[f] = now
        inputs["requirement-files"] = files
        if inputs.get("matrix-version") != matrix.version:
            reasons.append(f"the matrix changed ({inputs.get('matrix-version')} -> "
                           f"{matrix.version})")
        inputs["matrix-version"] = matrix.version
        if not reasons and hash_inputs(inputs) != lock.inputs_hash:
            reasons.append("the lock's recorded inputs do not match its inputs-hash "
                           "(edited by hand?)")
    if getattr(args, "json", False):
        out.print(json.dumps({"lock": path, "up_to_date": not reasons, "stale": reasons,
                              "regenerate": lock.command if reasons else None}, indent=2))
        return ExitCode.DRIFT if reasons else ExitCode.OK
    if reasons:
        for r in reasons:
            out.print(f"stale: {r}")
        out.print(f"{path} is stale; regenerate it with: {lock.command}")
        return ExitCode.DRIFT
    out.print(f"{path} is up to date")
    return ExitCode.OK


def url_label(url: str) -> str:
    """What a progress line names for a request: the project, never a URL's hash folder.

    >>> url_label("https://pypi.org/simple/torch/")
    'torch'
    >>> url_label("https://files.example/packages/3f/9a/0c1d2e/torch-2.5.1-cp311-cp311-"
    ...           "manylinux1_x86_64.whl.metadata#sha256=ab")
    'torch 2.5.1 (metadata)'
    >>> url_label("https://files.example/packages/ab/cd/filelock-3.13.1.tar.gz")
    'filelock 3.13.1'
    """
    path = url.split("#", 1)[0].split("?", 1)[0].rstrip("/")
    last = path.rsplit("/", 1)[-1] or path
    what = ""
    if last.endswith(".metadata"):
        last, what = last[: -len(".metadata")], " (metadata)"
    from packaging.utils import InvalidSdistFilename, InvalidWheelFilename
    from packaging.utils import parse_sdist_filename, parse_wheel_filename

    try:
        if last.endswith(".whl"):
            name, version, _, _ = parse_wheel_filename(last)
            return f"{name} {version}{what}"
        if last.endswith((".tar.gz", ".zip")):
            name, version = parse_sdist_filename(last)
            return f"{name} {version}{what}"
    except (InvalidWheelFilename, InvalidSdistFilename):
        pass
    return last


class _Progress:
    """A one-line status on stderr (only when stderr is a terminal)."""

    def __init__(self, out: Any) -> None:
        self.out = out
        self.n = 0
        self.last = ""

    def request(self, url: str) -> None:
        self.n += 1
        self._show(f"fetching ({self.n}) {url_label(url)}")

    def event(self, text: str) -> None:
        self._show(text)

    def _show(self, text: str) -> None:
        line = text[:78]
        self.out.stderr.write("\r" + line.ljust(len(self.last)))
        self.out.stderr.flush()
        self.last = line

    def done(self) -> None:
        if self.last:
            self.out.stderr.write("\r" + " " * len(self.last) + "\r")
            self.out.stderr.flush()


def _one_line_text(text: str) -> str:
    from envlock._text import escape_controls

    return escape_controls(text)
