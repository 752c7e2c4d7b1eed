"""Read and check ``companions.toml``: which torchvision and torchaudio go with each torch.

Kept apart from :mod:`envlock.matrix.load` (one concept per module). Every torch release
in ``torch-pypi.toml`` must have exactly one ``[[pair]]`` row, and a row must name every
companion release whose wheel requires that torch exactly (the harvested facts), so the
curated pairing can only add what the wheels do not say (torchaudio 2.11.0 names no torch),
never contradict them.
"""

from __future__ import annotations

from typing import Any, Dict, Mapping, Protocol

from envlock.matrix.model import Companions, Provenance, TorchRelease
from envlock.matrix.rows import Problems, Row
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
        pair = Companions(torch=torch, torchvision=vision, torchaudio=audio,
                          provenance=ctx.provenance(row))
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
        out[torch] = pair
    for version in torch_releases:
        if version not in out:
            ctx.problems.add(FILE, "pair", f"torch {version} has no [[pair]] row")
    return out
