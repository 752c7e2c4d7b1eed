"""Reaching the chosen build: PyTorch-layout mirrors, fallback to an equivalent build, and
the way out when no index can serve one.

Many clusters cannot reach download.pytorch.org, or reach it slowly, and use a mirror with
the PyTorch index's layout (``<base>/cu121/torch/``). envlock finds such a mirror in
``ENVLOCK_PYTORCH_INDEX_URL`` (``--pytorch-index-url``) or, failing that, among pip's
configured indexes (an index URL ending in a variant directory such as ``/cu121``).

When the chosen build's index cannot serve its torch (unreachable, or a mirror without
that variant), an *equivalent* build is one of the same torch release whose CUDA line
qualifies for the target by the same rules (:func:`envlock.resolve.hardware.choose_variant`
restricted to that release, without the builds of indexes that failed).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence

from envlock.errors import IndexError_, OfflineError
from envlock.index.config import IndexConfig, redact
from envlock.matrix.model import TorchVariant

if TYPE_CHECKING:
    from envlock.index.client import IndexClient

__all__ = ["PYTORCH_DEFAULT", "mirror_from_config", "torch_unavailable", "way_out", "brief"]

PYTORCH_DEFAULT = "https://download.pytorch.org/whl"
#: the last path segment of a PyTorch-layout variant index: cu121, cpu, rocm6.2, xpu
_VARIANT_DIR = re.compile(r"^(cu\d{2,3}|cpu|rocm\d+(\.\d+)*|xpu)$")


def mirror_from_config(config: IndexConfig) -> Optional[str]:
    """The base of a PyTorch-layout mirror pip is configured with, if any.

    ``http://mirror/pytorch-wheels/cu121`` as an index (or extra index) means that
    ``http://mirror/pytorch-wheels`` holds the PyTorch index's variant directories. The
    PyTorch index itself is not a mirror.
    """
    for url in config.indexes:
        clean = url.rstrip("/")
        head, _, last = clean.rpartition("/")
        if head.endswith("/simple"):
            continue
        if _VARIANT_DIR.match(last) and head.rstrip("/") != PYTORCH_DEFAULT:
            return head
    return None


def torch_unavailable(client: "IndexClient", index: str, variant: TorchVariant) -> Optional[str]:
    """Why ``index`` cannot serve this build's torch, or None when it can."""
    try:
        page = client.page(index, "torch")
    except OfflineError:
        raise
    except IndexError_ as exc:
        if "deadline" in exc.message:
            raise  # a slow index: its own error says which deadline to raise
        return brief(exc.message)
    if page is None:
        return f"{redact(index)} has no torch project"
    want = variant.version_string
    for d in page.dists:
        if d.parsed is not None and str(d.version) == want:
            return None
    return f"{redact(index)} has no torch {want}"


_CAUSES = (("refused", "connection refused"), ("NewConnectionError", "connection failed"),
           ("NameResolution", "host name not resolved"),
           ("Name or service not known", "host name not resolved"),
           ("timed out", "timed out"), ("Timeout", "timed out"), ("SSL", "TLS error"),
           ("deadline", "deadline passed"))


def brief(message: str) -> str:
    """``cannot reach URL (<a long urllib3 repr>, after 1 attempt)`` -> ``cannot reach URL
    (connection refused)``: one line a user can read; other messages unchanged."""
    if not message.startswith("cannot reach ") or " (" not in message:
        return message
    head, _, rest = message.partition(" (")
    cause = next((c for key, c in _CAUSES if key in rest), None)
    return f"{head} ({cause})" if cause else head


def way_out(variant: TorchVariant, alternatives: Sequence[TorchVariant] = (),
            command: str = "") -> str:
    """The ways out of an index failure, as exact as the matrix allows. With the user's
    ``command`` (``envlock resolve --gpu ... --cuda 12.1``), each way out that is an option
    is that command with the option changed, so the user's other options (their --cuda,
    --torch, requirements) stay as they were."""
    parts = []
    if not variant.on_pypi:
        parts.append(f"point ENVLOCK_PYTORCH_INDEX_URL (or --pytorch-index-url) at a mirror "
                     f"with the PyTorch index's layout (http://mirror/pytorch-wheels or "
                     f"file:///srv/pytorch-wheels, with {variant.tag}/torch/ under it)")
    else:
        parts.append("point PIP_INDEX_URL (or --index-url) at a reachable PyPI mirror")
    full = _argv(command)
    others = [a for a in alternatives if a.cuda and a.cuda != variant.cuda]
    if others:
        a = others[0]
        where = "PyPI" if a.on_pypi else "the PyTorch index"
        pin = "" if a.release == variant.release else f"--torch =={a.release} "
        text = f"{pin}--cuda {a.cuda} selects torch {a.version_string} from {where}"
        if full:
            change = {"--cuda": a.cuda, **({"--torch": f"=={a.release}"} if pin else {})}
            text += f": {_with(full, change)}"
        parts.append(text)
    else:
        parts.append("--cuda X.Y selects a build of another CUDA line")
    offline = ("--offline locks from the cache, or the matrix's GPU core when nothing is "
               "cached")
    if full:
        offline += f": {_with(full, {'--offline': None})}"
    parts.append(offline)
    return "; ".join(parts)


def _argv(command: str) -> List[str]:
    """The words of a recorded command, or [] when it names no options (the API's
    default "envlock resolve") or does not split."""
    import shlex

    try:
        words = shlex.split(command or "")
    except ValueError:
        return []
    return words if len(words) > 2 and words[:2] == ["envlock", "resolve"] else []


def _with(argv: Sequence[str], change: Dict[str, Optional[str]]) -> str:
    """``argv`` with each option in ``change`` set to its value (None: a flag), replacing
    the user's own value of it, as a shell command."""
    import shlex

    out: List[str] = []
    skip = False
    for a in argv:
        if skip:
            skip = False
            continue
        name = a.split("=", 1)[0]
        if name in change:
            skip = "=" not in a and change[name] is not None
            continue
        out.append(a)
    for opt, value in change.items():
        out += [opt] if value is None else [opt, value]
    return " ".join(shlex.quote(w) for w in out)
