"""Reading and writing ``envlock.lock`` (TOML).

Writing uses tomlkit so the file opens with a generated-file header naming the command
that regenerates it; everything is sorted, and nothing time-dependent is written, so a
re-run on the same inputs is byte-identical. Writes are atomic: a temporary file in the
same directory is renamed over the target, so Ctrl-C or a network error never leaves a
half-written lock.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, List, Mapping, Optional, Sequence, Tuple

from envlock import _toml, _toml_emit
from envlock._toml_emit import Unsupported
from envlock._files import atomic_write_text, read_user_text
from envlock._text import clean_for_output, escape_controls, first_control
from envlock.errors import InputError
from envlock.lock.model import (
    LOCK_VERSION,
    AppliedAdvisory,
    Lock,
    LockedFile,
    LockedPackage,
    LockTarget,
    TorchChoice,
)

__all__ = ["render_lock", "write_lock", "load_lock", "parse_lock", "atomic_write_text"]


def render_lock(lock: Lock) -> str:
    """The lock as TOML. URL credentials are stripped from every string and control
    characters escaped (the command also goes into a comment, where a newline would
    start a new line of TOML).

    The header and ``[inputs]`` are built with tomlkit; the ``[[target]]`` tables, most of
    the file, are written by :mod:`envlock._toml_emit` in tomlkit's exact layout (tests
    hold the two byte-identical), falling back to tomlkit for any shape it does not know.
    """
    lock = clean_for_output(lock)
    targets = sorted(lock.targets, key=lambda t: t.name)
    if targets:
        try:
            tail = "".join(_target_text(t) for t in targets)
        except Unsupported:
            pass
        else:
            return _render_tomlkit(lock, with_targets=False) + tail
    return _render_tomlkit(lock, with_targets=True)


def _target_text(t: LockTarget) -> str:
    """One ``[[target]]`` table and its sub-tables, as tomlkit writes them (see
    :func:`_render_tomlkit`, the reference). Raises :class:`Unsupported`."""
    e = _toml_emit
    head: List[Any] = [("name", t.name), ("gpus", list(t.gpus)),
                       ("gpu-models", list(t.gpu_models)),
                       ("compute-capabilities", list(t.compute_capabilities))]
    if t.family:
        head.append(("family", t.family))
    if t.machines != "one":
        head.append(("machines", t.machines))
    head += [("python", t.python), ("platform", t.platform), ("glibc", t.glibc)]
    if t.driver:
        head.append(("driver", t.driver))
    if t.driver_min:
        head.append(("driver-min", t.driver_min))
    out = ["\n[[target]]\n", *e.lines(head),
           f"driver-min-reasons = {_emit_multiline(t.driver_min_reasons)}\n",
           f"closure = {e.value(t.closure)}\n",
           f"decision = {_emit_multiline(t.decision)}\n"]
    if t.torch is not None:
        tc = t.torch
        torch: List[Any] = [("version", tc.version), ("variant", tc.variant)]
        if tc.cuda:
            torch.append(("cuda", tc.cuda))
        torch += [("index", tc.index), ("installed-version", tc.installed_version),
                  ("on-pypi", tc.on_pypi)]
        if tc.arch_list is not None:
            torch.append(("arch-list", list(tc.arch_list)))
        if tc.ptx is not None:
            torch.append(("ptx", list(tc.ptx)))
        out += ["\n[target.torch]\n", *e.lines(torch)]
    out.append(e.sorted_table("target.libraries", t.libraries))
    out.append(e.sorted_table("target.env", t.env))
    for a in sorted(t.advisories, key=lambda a: (a.id, a.action)):
        adv: List[Any] = [("id", a.id), ("action", a.action), ("summary", a.summary)]
        if a.override:
            adv.append(("override", list(a.override)))
        if a.unknown:
            adv.append(("unknown", list(a.unknown)))
        out += ["\n[[target.advisory]]\n", *e.lines(adv)]
    if not t.packages:
        raise Unsupported("tomlkit moves an empty array of tables")
    for p in sorted(t.packages, key=lambda p: p.name):
        pkg: List[Any] = [("name", p.name), ("version", p.version)]
        if p.specifier:
            pkg.append(("specifier", p.specifier))
        if p.index:
            pkg.append(("index", p.index))
        if p.direct:
            pkg.append(("direct", True))
        files = [e.inline_table([("name", f.name), ("url", f.url)]
                                + ([("sha256", f.sha256)] if f.sha256 else []))
                 for f in sorted(p.files, key=lambda f: f.name)]
        out += ["\n[[target.package]]\n", *e.lines(pkg),
                f"files = {e.multiline_array(files)}\n"]
    return "".join(out)


def _emit_multiline(items: Sequence[Any]) -> str:
    """:func:`_multiline`'s array: one line when it holds at most one item."""
    if len(items) > 1:
        return _toml_emit.multiline_array([_toml_emit.string(i) for i in items])
    return _toml_emit.inline_array(items)


def _render_tomlkit(lock: Lock, with_targets: bool) -> str:
    """The lock (already cleaned) rendered by tomlkit; without the ``[[target]]`` tables
    when ``with_targets`` is false (:func:`_target_text` writes those)."""
    import tomlkit

    doc = tomlkit.document()
    doc.add(tomlkit.comment(f"This file is generated by envlock {lock.envlock_version}. "
                            f"Do not edit it by hand."))
    doc.add(tomlkit.comment("Regenerate it with:"))
    doc.add(tomlkit.comment(f"  {lock.command}"))
    doc.add(tomlkit.nl())
    doc["version"] = lock.version
    doc["envlock-version"] = lock.envlock_version
    doc["matrix-version"] = lock.matrix_version
    doc["inputs-hash"] = lock.inputs_hash
    doc["command"] = lock.command
    inputs = tomlkit.table()
    for k in sorted(lock.inputs):
        inputs[k] = _plain(lock.inputs[k])
    doc["inputs"] = inputs
    if not with_targets:
        return tomlkit.dumps(doc)
    targets = tomlkit.aot()
    for t in sorted(lock.targets, key=lambda t: t.name):
        tt = tomlkit.table()
        tt["name"] = t.name
        tt["gpus"] = list(t.gpus)
        tt["gpu-models"] = list(t.gpu_models)
        tt["compute-capabilities"] = list(t.compute_capabilities)
        if t.family:
            tt["family"] = t.family
        if t.machines != "one":
            tt["machines"] = t.machines
        tt["python"] = t.python
        tt["platform"] = t.platform
        tt["glibc"] = t.glibc
        if t.driver:
            tt["driver"] = t.driver
        if t.driver_min:
            tt["driver-min"] = t.driver_min
        tt["driver-min-reasons"] = _multiline(list(t.driver_min_reasons))
        tt["closure"] = t.closure
        tt["decision"] = _multiline(list(t.decision))
        if t.torch is not None:
            tc = tomlkit.table()
            tc["version"] = t.torch.version
            tc["variant"] = t.torch.variant
            if t.torch.cuda:
                tc["cuda"] = t.torch.cuda
            tc["index"] = t.torch.index
            tc["installed-version"] = t.torch.installed_version
            tc["on-pypi"] = t.torch.on_pypi
            if t.torch.arch_list is not None:
                tc["arch-list"] = list(t.torch.arch_list)
            if t.torch.ptx is not None:
                tc["ptx"] = list(t.torch.ptx)
            tt["torch"] = tc
        libs = tomlkit.table()
        for k in sorted(t.libraries):
            libs[k] = t.libraries[k]
        tt["libraries"] = libs
        env = tomlkit.table()
        for k in sorted(t.env):
            env[k] = t.env[k]
        tt["env"] = env
        advs = tomlkit.aot()
        for a in sorted(t.advisories, key=lambda a: (a.id, a.action)):
            at = tomlkit.table()
            at["id"] = a.id
            at["action"] = a.action
            at["summary"] = a.summary
            if a.override:
                at["override"] = list(a.override)
            if a.unknown:
                at["unknown"] = list(a.unknown)
            advs.append(at)
        if len(advs):
            tt["advisory"] = advs
        pkgs = tomlkit.aot()
        for p in sorted(t.packages, key=lambda p: p.name):
            pt = tomlkit.table()
            pt["name"] = p.name
            pt["version"] = p.version
            if p.specifier:
                pt["specifier"] = p.specifier
            if p.index:
                pt["index"] = p.index
            if p.direct:
                pt["direct"] = True
            files = tomlkit.array()
            for f in sorted(p.files, key=lambda f: f.name):
                it = tomlkit.inline_table()
                it["name"] = f.name
                it["url"] = f.url
                if f.sha256:
                    it["sha256"] = f.sha256
                files.append(it)
            if p.files:
                files.multiline(True)
            pt["files"] = files
            pkgs.append(pt)
        tt["package"] = pkgs
        targets.append(tt)
    doc["target"] = targets
    return tomlkit.dumps(doc)


def _multiline(items: List[str]) -> Any:
    import tomlkit

    arr = tomlkit.array()
    for i in items:
        arr.append(i)
    if len(items) > 1:
        arr.multiline(True)
    return arr


def _plain(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in sorted(value.items())}
    if value is None:
        return ""
    return value


def write_lock(lock: Lock, path: Path) -> None:
    atomic_write_text(path, render_lock(lock))


# -- reading --------------------------------------------------------------------------------


class _R:
    def __init__(self, origin: str) -> None:
        self.origin = origin

    def fail(self, path: str, msg: str) -> None:
        raise InputError(f"{self.origin}: {path}: {msg}")

    def get(self, d: Mapping[str, Any], key: str, typ: Any, path: str,
            required: bool = True, default: Any = None) -> Any:
        if not isinstance(d, dict):
            self.fail(path or "document", "expected a table")
        if key not in d:
            if required:
                self.fail(f"{path}.{key}" if path else key, "missing")
            return default
        v = d[key]
        if typ is list and isinstance(v, list):
            return v
        if typ == "strs" and isinstance(v, list):
            for i, x in enumerate(v):
                if not isinstance(x, str):
                    self.fail(f"{path}.{key}[{i}]" if path else f"{key}[{i}]",
                              "expected a string")
            return v
        if typ is dict and isinstance(v, dict):
            return v
        if typ not in (list, dict, "strs") and isinstance(v, typ) and not (
                typ is int and isinstance(v, bool)):
            return v
        shown = repr(v)
        shown = shown if len(shown) <= 60 else shown[:60] + "..."
        self.fail(f"{path}.{key}" if path else key, f"unexpected value {shown}")
        return default


#: how deeply a lock's tables and arrays may nest (the format itself needs 5)
_MAX_DEPTH = 16
_NAME_RE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?\Z")
_TARGET_RE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._+-]*[A-Za-z0-9])?\Z")  # h100-sxm+a100
_CC_RE = re.compile(r"^[0-9]{1,2}\.[0-9]\Z")
_SHA256_RE = re.compile(r"^[0-9a-f]{64}\Z")


def _check_tree(value: Any, path: str, origin: str, depth: int = 0) -> None:
    """Every string in the document, wherever it is (fields added later included): no
    control characters or newlines; and no nesting deeper than :data:`_MAX_DEPTH`."""
    if depth > _MAX_DEPTH:
        raise InputError(f"{origin}: {path or 'document'}: nested too deeply")
    if isinstance(value, str):
        bad = first_control(value)
        if bad is not None:
            raise InputError(f"{origin}: {path}: control character {bad} in a string")
    elif isinstance(value, dict):
        for k, v in value.items():
            sub = escape_controls(f"{path}.{k}" if path else str(k))
            _check_tree(k, sub, origin, depth + 1)
            _check_tree(v, sub, origin, depth + 1)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _check_tree(v, f"{path}[{i}]", origin, depth + 1)


def _check_values(lock: Lock, origin: str) -> None:
    """What exporters render verbatim: package names, versions, specifiers, hashes."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import InvalidVersion, Version

    def fail(path: str, msg: str) -> None:
        raise InputError(f"{origin}: {path}: {msg}")

    def version(path: str, text: str) -> None:
        try:
            Version(text)
        except InvalidVersion:
            fail(path, f"{_short(text)} is not a version")

    for i, t in enumerate(lock.targets):
        p = f"target[{i}]"
        if not _TARGET_RE.match(t.name):
            fail(f"{p}.name", f"{_short(t.name)} is not a target name (letters, digits, "
                              f"'.', '_', '+', '-')")
        for j, cc in enumerate(t.compute_capabilities):
            if not _CC_RE.match(cc):
                fail(f"{p}.compute-capabilities[{j}]", f"{_short(cc)} is not a compute "
                                                       f"capability like '9.0'")
        if t.torch is not None:
            from envlock.kernels import parse_target

            for j, a in enumerate(t.torch.arch_list or ()):
                try:
                    parse_target(a)
                except ValueError:
                    fail(f"{p}.torch.arch-list[{j}]", f"{_short(a)} is not a GPU target")
            version(f"{p}.torch.version", t.torch.version)
            version(f"{p}.torch.installed-version", t.torch.installed_version)
        for j, pk in enumerate(t.packages):
            pp = f"{p}.package[{j}]"
            if not _NAME_RE.match(pk.name):
                fail(f"{pp}.name", f"{_short(pk.name)} is not a package name")
            if pk.version:
                version(f"{pp}.version", pk.version)
            elif not pk.specifier:
                fail(f"{pp}.version", "empty, and no specifier")
            if pk.specifier:
                try:
                    SpecifierSet(pk.specifier)
                except InvalidSpecifier:
                    fail(f"{pp}.specifier", f"{_short(pk.specifier)} is not a specifier")
            for k, f in enumerate(pk.files):
                fp = f"{pp}.files[{k}]"
                if f.sha256 is not None and not _SHA256_RE.match(f.sha256):
                    fail(f"{fp}.sha256", f"{_short(f.sha256)} is not 64 hex digits")
                if not f.name or "/" in f.name or "\\" in f.name or f.name in (".", ".."):
                    fail(f"{fp}.name", f"{_short(f.name)} is not a file name")
                if any(c.isspace() for c in f.url):
                    fail(f"{fp}.url", f"{_short(f.url)} holds white space")
            if pk.index is not None and any(c.isspace() for c in pk.index):
                fail(f"{pp}.index", f"{_short(pk.index)} holds white space")


def _short(text: str, limit: int = 60) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "...")


def parse_lock(text: str, origin: str = "envlock.lock") -> Lock:
    """A :class:`Lock` from TOML text, validated: a malformed lock is an
    :class:`InputError` (exit 2) naming the field's path, never an internal error."""
    try:
        data = _toml.loads(text)
    except _toml.TOMLDecodeError as exc:
        raise InputError(f"{origin} is not valid TOML: {_one_line(str(exc))}") from None
    except RecursionError:
        raise InputError(f"{origin}: nested too deeply to be a lock") from None
    _check_tree(data, "", origin)
    lock = _parse_lock(data, origin)
    _check_values(lock, origin)
    return lock


def _one_line(text: str) -> str:
    return escape_controls(text.splitlines()[0] if text else text)


def _parse_lock(data: Mapping[str, Any], origin: str) -> Lock:
    r = _R(origin)
    version = data.get("version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise InputError(f"{origin}: not an envlock lock (no integer 'version')")
    if version > LOCK_VERSION:
        raise InputError(f"{origin}: lock format {version} comes from a newer envlock; this "
                         f"envlock reads format {LOCK_VERSION} (upgrade envlock)")
    targets: List[LockTarget] = []
    for i, t in enumerate(r.get(data, "target", list, "", required=False, default=[])):
        p = f"target[{i}]"
        if not isinstance(t, dict):
            r.fail(p, "expected a table")
        torch: Optional[TorchChoice] = None
        if "torch" in t:
            tc = r.get(t, "torch", dict, p)
            pp = f"{p}.torch"
            torch = TorchChoice(
                version=r.get(tc, "version", str, pp),
                variant=r.get(tc, "variant", str, pp),
                cuda=r.get(tc, "cuda", str, pp, required=False),
                index=r.get(tc, "index", str, pp),
                installed_version=r.get(tc, "installed-version", str, pp),
                arch_list=_tuple(r.get(tc, "arch-list", "strs", pp, required=False)),
                ptx=_tuple(r.get(tc, "ptx", "strs", pp, required=False)),
                on_pypi=r.get(tc, "on-pypi", bool, pp, required=False, default=False),
            )
        packages: List[LockedPackage] = []
        for j, pk in enumerate(r.get(t, "package", list, p, required=False, default=[])):
            pp = f"{p}.package[{j}]"
            files = []
            for k, f in enumerate(r.get(pk, "files", list, pp, required=False, default=[])):
                fp = f"{pp}.files[{k}]"
                files.append(LockedFile(name=r.get(f, "name", str, fp),
                                        url=r.get(f, "url", str, fp),
                                        sha256=r.get(f, "sha256", str, fp, required=False)))
            packages.append(LockedPackage(
                name=r.get(pk, "name", str, pp), version=r.get(pk, "version", str, pp),
                index=r.get(pk, "index", str, pp, required=False), files=tuple(files),
                direct=r.get(pk, "direct", bool, pp, required=False, default=False),
                specifier=r.get(pk, "specifier", str, pp, required=False)))
        advisories = []
        for j, a in enumerate(r.get(t, "advisory", list, p, required=False, default=[])):
            ap = f"{p}.advisory[{j}]"
            advisories.append(AppliedAdvisory(
                id=r.get(a, "id", str, ap), action=r.get(a, "action", str, ap),
                summary=r.get(a, "summary", str, ap, required=False, default=""),
                override=_tuple(r.get(a, "override", "strs", ap, required=False)) or (),
                unknown=_tuple(r.get(a, "unknown", "strs", ap, required=False)) or ()))
        targets.append(LockTarget(
            name=r.get(t, "name", str, p),
            gpus=tuple(r.get(t, "gpus", "strs", p, required=False, default=[])),
            gpu_models=tuple(r.get(t, "gpu-models", "strs", p, required=False, default=[])),
            compute_capabilities=tuple(r.get(t, "compute-capabilities", "strs", p,
                                             required=False, default=[])),
            python=r.get(t, "python", str, p),
            platform=r.get(t, "platform", str, p),
            glibc=r.get(t, "glibc", str, p, required=False, default=""),
            driver=r.get(t, "driver", str, p, required=False),
            driver_min=r.get(t, "driver-min", str, p, required=False),
            driver_min_reasons=tuple(r.get(t, "driver-min-reasons", "strs", p, required=False,
                                           default=[])),
            torch=torch,
            libraries={k: str(v) for k, v in r.get(t, "libraries", dict, p, required=False,
                                                   default={}).items()},
            advisories=tuple(advisories),
            packages=tuple(packages),
            closure=r.get(t, "closure", str, p, required=False, default="full"),
            decision=tuple(r.get(t, "decision", "strs", p, required=False, default=[])),
            env={k: str(v) for k, v in r.get(t, "env", dict, p, required=False,
                                             default={}).items()},
            machines=r.get(t, "machines", str, p, required=False, default="one"),
            family=r.get(t, "family", str, p, required=False),
        ))
    return Lock(
        version=version,
        envlock_version=r.get(data, "envlock-version", str, "", required=False, default="?"),
        matrix_version=r.get(data, "matrix-version", str, "", required=False, default="?"),
        inputs_hash=r.get(data, "inputs-hash", str, "", required=False, default=""),
        inputs=dict(r.get(data, "inputs", dict, "", required=False, default={})),
        command=r.get(data, "command", str, "", required=False, default=""),
        targets=tuple(targets),
    )


def _tuple(v: Any) -> Optional[Tuple[str, ...]]:
    return None if v is None else tuple(str(x) for x in v)


def load_lock(path: Any) -> Lock:
    text = read_user_text(path, "lock file",
                          hint=f"create one with 'envlock resolve --gpu <GPU> -o {path}'")
    return parse_lock(text, origin=str(path))
