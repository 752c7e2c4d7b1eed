"""Read and check ``companions.toml``: which torchvision, torchaudio and triton go with
each torch.

Kept apart from :mod:`envlock.matrix.load` (one concept per module). Every torch release
in ``torch-pypi.toml`` must have exactly one ``[[pair]]`` row, and a row must name every
companion release whose wheel requires that torch exactly (the harvested facts), so the
curated pairing can only add what the wheels do not say (torchaudio 2.11.0 names no torch),
never contradict them. The triton pairing is the torch wheel's own triton requirement, and
must equal it: the wheel states it only where its marker holds (x86_64 until 2.10.0, only
some Pythons), and the pairing carries it to the targets where the wheel is silent.
"""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Protocol, Tuple

from packaging.requirements import InvalidRequirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name

from envlock.matrix.load_common import requirement
from envlock.matrix.model import PLATFORMS, Companions, Provenance, TorchRelease
from envlock.matrix.rows import Problems, Row
from envlock.platforms import marker_environment
from envlock.versions import is_version

__all__ = ["load_companions", "FILE"]

FILE = "companions.toml"


class _Ctx(Protocol):
    problems: Problems

    def provenance(self, row: Row, key: str = "source") -> Provenance: ...


def load_companions(raw: Mapping[str, Dict[str, Any]], ctx: _Ctx,
                    torch_releases: Mapping[str, TorchRelease]) -> Dict[str, Companions]:
    data = raw.get(FILE, {})
    for k in data:
        if k not in ("pair", "source"):
            ctx.problems.add(FILE, k, "unknown top-level key (expected [[pair]])")
    items = data.get("pair", [])
    if not isinstance(items, list):
        ctx.problems.add(FILE, "pair", "expected an array of tables")
        items = []
    out: Dict[str, Companions] = {}
    for i, item in enumerate(items):
        row = Row(FILE, f"pair[{i}]", item, ctx.problems)
        torch = row.text("torch", check=is_version, what="a version")
        vision = row.str_list("torchvision", required=True, check=is_version,
                              what="a version") or ()
        audio = row.str_list("torchaudio", required=True, check=is_version,
                             what="a version") or ()
        triton = row.opt_text("triton", check=_is_specifier, what="a PEP 440 specifier")
        triton_platforms = row.str_list("triton_platforms", check=PLATFORMS.__contains__,
                                        what="a platform key") or ()
        pair = Companions(torch=torch, torchvision=vision, torchaudio=audio,
                          provenance=ctx.provenance(row), triton=triton,
                          triton_platforms=triton_platforms)
        row.finish()
        if not torch:
            continue
        if torch in out:
            row.problem("torch", f"torch {torch} is paired twice")
        rel = torch_releases.get(torch)
        if rel is None:
            row.problem("torch", f"torch {torch} is not a release in torch-pypi.toml")
        else:
            for key, harvested, curated in (("torchvision", rel.torchvision, vision),
                                            ("torchaudio", rel.torchaudio, audio)):
                missing = [v for v in harvested if v not in curated]
                if missing:
                    row.problem(key, f"{', '.join(missing)} require torch=={torch} (their "
                                     f"wheels say so) but are not paired with it")
            _check_triton(row, rel, triton, triton_platforms)
        out[torch] = pair
    for version in torch_releases:
        if version not in out:
            ctx.problems.add(FILE, "pair", f"torch {version} has no [[pair]] row")
    return out


def _is_specifier(text: str) -> bool:
    try:
        return bool(SpecifierSet(text))
    except InvalidSpecifier:
        return False


def wheel_triton(rel: TorchRelease) -> Tuple[Optional[str], Tuple[str, ...]]:
    """The triton specifier the release's PyPI wheels require, and the platforms whose
    wheel requires it for at least one of its Pythons (its marker evaluated there)."""
    spec: Optional[str] = None
    platforms = []
    for plat in PLATFORMS:
        build = rel.builds.get(plat)
        if build is None:
            continue
        for text in build.requires:
            try:
                req = requirement(text)
            except InvalidRequirement:
                continue
            if canonicalize_name(req.name) != "triton":
                continue
            if spec is None or plat == "linux_x86_64":
                spec = str(req.specifier)
            if req.marker is None or any(
                    req.marker.evaluate(dict(marker_environment(py, plat), extra=""))
                    for py in build.pythons):
                platforms.append(plat)
    return spec, tuple(platforms)


def _check_triton(row: Row, rel: TorchRelease, triton: Optional[str],
                  platforms: Tuple[str, ...]) -> None:
    """The curated triton pairing must restate the wheels' own requirement."""
    spec, where = wheel_triton(rel)
    if spec is None:
        if triton is not None:
            row.problem("triton", f"torch {rel.version}'s wheels require no triton, but "
                                  f"triton {triton} is paired with it")
        return
    if triton is None:
        row.problem("triton", f"torch {rel.version}'s wheels require triton{spec}; "
                              f"pair it (triton = \"{spec}\")")
    elif _is_specifier(triton) and SpecifierSet(triton) != SpecifierSet(spec):
        row.problem("triton", f"paired triton{triton}, but torch {rel.version}'s wheels "
                              f"require triton{spec}")
    if set(platforms) != set(where):
        row.problem("triton_platforms",
                    f"the wheels require triton on {', '.join(where) or 'no platform'}, "
                    f"not {', '.join(platforms) or 'none'}")
