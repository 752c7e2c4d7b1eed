"""A PEP 751 ``pylock.toml`` that envlock exported, read back as a one-target lock, so
``envlock verify --lock pylock.<target>.toml`` checks an environment installed from it.

The export writes the hardware facts PEP 751 has no words for under ``[tool.envlock]``
(target, GPUs, compute capabilities, Python, platform, driver floor, torch build,
libraries, env, advisories); the packages and their files come from ``[[packages]]``. A
package's ``[packages.variants-json]`` (PEP 825) is kept, checked for its shape. A pylock
without ``[tool.envlock]`` says nothing about hardware and is refused.
"""

from __future__ import annotations

from typing import Any, List, Mapping, Optional

from envlock.errors import InputError
from envlock.lock.model import (
    AppliedAdvisory,
    Lock,
    LockedFile,
    LockedPackage,
    LockTarget,
    TorchChoice,
)

__all__ = ["is_pylock", "lock_from_pylock"]


def is_pylock(data: Mapping[str, Any]) -> bool:
    return "lock-version" in data and "version" not in data


def _strs(value: Any, where: str, origin: str) -> tuple:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InputError(f"{origin}: {where}: expected a list of strings")
    return tuple(value)


def _str(d: Mapping[str, Any], key: str, where: str, origin: str,
         required: bool = False) -> Optional[str]:
    v = d.get(key)
    if v is None and not required:
        return None
    if not isinstance(v, str):
        raise InputError(f"{origin}: {where}.{key}: "
                         + ("missing" if v is None else "expected a string"))
    return v


def _file(f: Any, where: str, origin: str) -> LockedFile:
    if not isinstance(f, dict):
        raise InputError(f"{origin}: {where}: expected a table")
    url = _str(f, "url", where, origin, required=True) or ""
    name = _str(f, "name", where, origin) or url.rsplit("/", 1)[-1]
    hashes = f.get("hashes") if isinstance(f.get("hashes"), dict) else {}
    sha = hashes.get("sha256")
    return LockedFile(name=name, url=url, sha256=sha if isinstance(sha, str) else None)


def _variants_json(p: Mapping[str, Any], where: str, origin: str) -> Optional[str]:
    from envlock.wheelvariants import canonical, check_variants_json

    vj = p.get("variants-json")
    if vj is None:
        return None
    errs = check_variants_json(vj)
    if errs:
        raise InputError(f"{origin}: {where}.variants-json: not a PEP 825 variants.json: "
                         f"{errs[0]}")
    return canonical(vj)


def lock_from_pylock(data: Mapping[str, Any], origin: str) -> Lock:
    tool = data.get("tool")
    env_tool = tool.get("envlock") if isinstance(tool, dict) else None
    if not isinstance(env_tool, dict):
        raise InputError(f"{origin}: a pylock.toml without [tool.envlock]: it names no "
                         f"hardware target; verify against the envlock lock it came from, "
                         f"or export it with 'envlock export --format pylock'")
    w = "tool.envlock"
    packages: List[LockedPackage] = []
    raw = data.get("packages") or []
    if not isinstance(raw, list):
        raise InputError(f"{origin}: packages: expected an array of tables")
    for i, p in enumerate(raw):
        where = f"packages[{i}]"
        if not isinstance(p, dict):
            raise InputError(f"{origin}: {where}: expected a table")
        files = [_file(f, f"{where}.wheels[{j}]", origin)
                 for j, f in enumerate(p.get("wheels") or [])]
        if isinstance(p.get("sdist"), dict):
            files.append(_file(p["sdist"], f"{where}.sdist", origin))
        packages.append(LockedPackage(
            name=_str(p, "name", where, origin, required=True) or "",
            version=_str(p, "version", where, origin) or "",
            index=_str(p, "index", where, origin), files=tuple(files),
            variants_json=_variants_json(p, where, origin)))
    torch = None
    tc = env_tool.get("torch")
    if isinstance(tc, dict):
        torch = TorchChoice(
            version=_str(tc, "version", f"{w}.torch", origin, required=True) or "",
            variant=_str(tc, "variant", f"{w}.torch", origin, required=True) or "",
            cuda=_str(tc, "cuda", f"{w}.torch", origin),
            index=_str(tc, "index", f"{w}.torch", origin) or "",
            installed_version=_str(tc, "installed-version", f"{w}.torch", origin) or "",
            arch_list=_strs(tc.get("arch-list"), f"{w}.torch.arch-list", origin)
            if tc.get("arch-list") is not None else None)
    advisories = tuple(
        AppliedAdvisory(id=str(a.get("id", "")), action=str(a.get("action", "")), summary="",
                        override=_strs(a.get("override"), f"{w}.advisories", origin))
        for a in (env_tool.get("advisories") or []) if isinstance(a, dict))

    def table(key: str) -> Mapping[str, str]:
        v = env_tool.get(key) or {}
        if not isinstance(v, dict):
            raise InputError(f"{origin}: {w}.{key}: expected a table")
        return {str(k): str(x) for k, x in v.items()}

    target = LockTarget(
        name=_str(env_tool, "target", w, origin, required=True) or "",
        gpus=_strs(env_tool.get("gpus"), f"{w}.gpus", origin),
        gpu_models=_strs(env_tool.get("gpu-models"), f"{w}.gpu-models", origin),
        compute_capabilities=_strs(env_tool.get("compute-capabilities"),
                                   f"{w}.compute-capabilities", origin),
        python=_str(env_tool, "python", w, origin, required=True) or "",
        platform=_str(env_tool, "platform", w, origin, required=True) or "",
        glibc=_str(env_tool, "glibc", w, origin) or "",
        driver=None, driver_min=_str(env_tool, "driver-min", w, origin),
        driver_min_reasons=(), torch=torch, libraries=table("libraries"),
        advisories=advisories, packages=tuple(packages),
        closure=_str(env_tool, "closure", w, origin) or "full", env=table("env"))
    return Lock(envlock_version="?", matrix_version="?",
                inputs_hash=_str(env_tool, "lock-inputs-hash", w, origin) or "",
                inputs={}, command=f"(read from {origin})", targets=(target,))
