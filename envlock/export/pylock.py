"""``--format pylock``: a PEP 751 ``pylock.<target>.toml`` for one target.

PEP 751 locks name files with their hashes, so installers (``uv pip sync``, ``pip
install -r`` once pip reads it) fetch exactly the locked files. The lock is per target, so
``environments`` names the target's platform and ``requires-python`` its Python; the
hardware facts that PEP 751 has no words for (GPUs, compute capabilities, driver floor,
torch build, advisories) go under ``[tool.envlock]``.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from envlock.export.common import (
    ExportRequest,
    Exporter,
    header_lines,
    overrides,
    require_hashes,
)
from envlock.lock.model import LockedFile, LockedPackage, LockTarget

__all__ = ["PylockExporter", "EXPORTER", "environment_marker"]

#: platform -> (sys_platform, platform_machine)
_PLATFORM_MARKERS = {
    "linux_x86_64": ("linux", "x86_64"),
    "linux_aarch64": ("linux", "aarch64"),
    "win_amd64": ("win32", "AMD64"),
    "macos_arm64": ("darwin", "arm64"),
    "macos_x86_64": ("darwin", "x86_64"),
}


def environment_marker(t: LockTarget) -> Optional[str]:
    """A PEP 508 marker for the target's platform, or None for an unknown platform."""
    pm = _PLATFORM_MARKERS.get(t.platform)
    if pm is None:
        return None
    return f"sys_platform == '{pm[0]}' and platform_machine == '{pm[1]}'"


def _requires_python(t: LockTarget) -> str:
    return f"=={t.python.rstrip('t')}.*"


def _artifact(f: LockedFile) -> Dict[str, Any]:
    import tomlkit

    it = tomlkit.inline_table()
    it["name"] = f.name
    it["url"] = f.url
    hashes = tomlkit.inline_table()
    hashes["sha256"] = f.sha256
    it["hashes"] = hashes
    return it


def _package(p: LockedPackage) -> Any:
    import tomlkit

    pt = tomlkit.table()
    pt["name"] = p.name
    pt["version"] = p.version
    if p.index:
        pt["index"] = p.index
    files = sorted((f for f in p.files if f.sha256), key=lambda f: f.name)
    sdists = [f for f in files if not f.name.endswith(".whl")]
    wheels = [f for f in files if f.name.endswith(".whl")]
    if sdists:
        pt["sdist"] = _artifact(sdists[0])
    if wheels:
        arr = tomlkit.array()
        for f in wheels:
            arr.append(_artifact(f))
        arr.multiline(True)
        pt["wheels"] = arr
    vj = _variants_json(p, wheels)
    if vj is not None:
        pt["variants-json"] = vj
    return pt


def _variants_json(p: LockedPackage, wheels: List[LockedFile]) -> Any:
    """PEP 825: a package whose locked wheels include variant wheels carries the index's
    variants.json inline, ``$schema`` kept, only the labels listed here."""
    import json

    import tomlkit

    from envlock.wheelvariants import prune_variants_json, variant_label

    labels = [lb for lb in (variant_label(f.name) for f in wheels) if lb]
    if not labels or not p.variants_json:
        return None
    doc = prune_variants_json(json.loads(p.variants_json), labels)
    table = tomlkit.table()
    table["$schema"] = doc["$schema"]
    dp = tomlkit.table()
    for k, v in doc["default-priorities"].items():
        dp[k] = v
    table["default-priorities"] = dp
    variants = tomlkit.table()
    for label, spaces in doc["variants"].items():
        it = tomlkit.inline_table()
        for ns, features in sorted(spaces.items()):
            inner = tomlkit.inline_table()
            for feat, values in sorted(features.items()):
                inner[feat] = list(values)
            it[ns] = inner
        variants[label] = it
    table["variants"] = variants
    return table


def variant_warnings(t: LockTarget) -> List[str]:
    """Variant wheels the lock holds without their variants.json."""
    from envlock.wheelvariants import variant_label

    bad = sorted(p.name for p in t.packages if not p.variants_json
                 and any(variant_label(f.name) for f in p.files))
    if not bad:
        return []
    return [f"WARNING: {', '.join(bad)}: variant wheels without the index's variants.json "
            f"in the lock; a variant-aware installer treats them as incompatible. Re-resolve "
            f"against the index that serves them."]


def _tool(request: ExportRequest) -> Any:
    import tomlkit

    t = request.target
    tool = tomlkit.table()
    tool["lock"] = request.lock_path
    tool["target"] = t.name
    tool["lock-inputs-hash"] = request.lock.inputs_hash
    tool["gpus"] = list(t.gpus)
    tool["gpu-models"] = list(t.gpu_models)
    tool["compute-capabilities"] = list(t.compute_capabilities)
    tool["python"] = t.python
    tool["platform"] = t.platform
    if t.glibc:
        tool["glibc"] = t.glibc
    if t.driver_min:
        tool["driver-min"] = t.driver_min
    tool["closure"] = t.closure
    if t.torch is not None:
        tc = tomlkit.inline_table()
        tc["version"] = t.torch.version
        tc["variant"] = t.torch.variant
        if t.torch.cuda:
            tc["cuda"] = t.torch.cuda
        tc["installed-version"] = t.torch.installed_version
        tc["index"] = t.torch.index
        if t.torch.arch_list is not None:
            tc["arch-list"] = list(t.torch.arch_list)
        tool["torch"] = tc
    libs = tomlkit.inline_table()
    for k in sorted(t.libraries):
        libs[k] = t.libraries[k]
    tool["libraries"] = libs
    if t.env:
        env = tomlkit.inline_table()
        for k in sorted(t.env):
            env[k] = t.env[k]
        tool["env"] = env
    advs = tomlkit.array()
    for a in sorted(t.advisories, key=lambda a: (a.id, a.action)):
        at = tomlkit.inline_table()
        at["id"] = a.id
        at["action"] = a.action
        if a.override:
            at["override"] = list(a.override)
        advs.append(at)
    if len(advs):
        advs.multiline(True)
    tool["advisories"] = advs
    return tool


class PylockExporter(Exporter):
    name = "pylock"
    summary = "PEP 751 pylock.<target>.toml (hashes; envlock facts in [tool.envlock])"
    needs_hashes = True

    def filename(self, target: str) -> str:
        return f"pylock.{target}.toml"

    def warnings(self, request: ExportRequest) -> List[str]:
        return variant_warnings(request.target)

    def render(self, request: ExportRequest) -> str:
        import tomlkit

        require_hashes(request, "pylock")
        t = request.target
        fname = self.output_name(request)
        body: List[str] = [
            "Install into a fresh virtual environment (the file name must stay "
            "pylock.toml or pylock.<name>.toml):",
            f"  uv pip sync {fname}",
            "Every package is listed with the exact files and hashes of the lock; nothing is "
            "resolved again, so advisory overrides (a newer cuBLAS than torch's own pin) "
            "stay as locked.",
        ]
        ov = overrides(t)
        if ov:
            body.append("Advisory overrides in this file: " + ", ".join(
                f"{req} ({aid})" for _, (aid, req) in sorted(ov.items())) + ".")
        doc = tomlkit.document()
        doc["lock-version"] = "1.0"
        marker = environment_marker(t)
        if marker:
            doc["environments"] = [marker]
        doc["requires-python"] = _requires_python(t)
        doc["created-by"] = "envlock"
        packages = tomlkit.aot()
        for p in sorted(t.packages, key=lambda p: p.name):
            packages.append(_package(p))
        doc["packages"] = packages
        tool = tomlkit.table(is_super_table=True)
        tool["envlock"] = _tool(request)
        doc["tool"] = tool
        header = header_lines(request, "PEP 751 lock file", body, self.warnings(request))
        return "\n".join(header) + "\n\n" + tomlkit.dumps(doc)


EXPORTER = PylockExporter()
