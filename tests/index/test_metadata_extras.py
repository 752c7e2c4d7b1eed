"""Requires-Dist lines kept only by an ``extra == "x"`` marker are not parsed unless ``x``
is asked for (:meth:`Metadata.requirements_for`): the lines that then apply must be exactly
those that evaluating every line's marker with packaging would keep."""

from __future__ import annotations

from typing import Any, Dict, List

from hypothesis import given, settings
from hypothesis import strategies as st
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from envlock.index.metadata import extra_only, parse_metadata

ENV: Dict[str, str] = {
    "python_version": "3.11", "python_full_version": "3.11.0", "os_name": "posix",
    "sys_platform": "linux", "platform_machine": "x86_64", "platform_system": "Linux",
    "platform_release": "", "platform_version": "", "platform_python_implementation": "CPython",
    "implementation_name": "cpython", "implementation_version": "3.11.0",
}

lines = st.one_of(
    st.sampled_from([
        'a>=1; extra == "dev"', "b (>=1) ; extra=='Dev_X'", 'c; extra == "dev" and '
        'python_version < "3"', 'd @ https://x.example/d.whl ; extra == "dev"',
        'e; extra != "dev"', 'f[g]>=2,<3; extra == "torch"', 'h; extra == "a" or extra == "b"',
        'i', 'j; python_version >= "3"', 'k ; extra == "dev-x"', 'l; extra=="DEV"',
        'm;extra == "dev"', 'not a requirement; extra == "dev"', 'n; extra == "dev" ',
        "o; extra == 'a\"", 'p; (extra == "dev")', 'q; extra == "a.b"',
    ]),
    st.builds(lambda name, spec, extra: f"{name}{spec}; extra == \"{extra}\"",
              st.sampled_from(["r", "s_t", "U.v"]), st.sampled_from(["", ">=1", " (==2)"]),
              st.sampled_from(["dev", "Dev", "dev_x", "a", "b", "torch"])),
)
extras_sets = st.sets(st.sampled_from(["dev", "dev-x", "a", "b", "torch", "a-b"]), max_size=3)


def _applies(r: Requirement, extras: Any) -> bool:
    """The resolver's rule, straight from packaging: the base candidate takes lines whose
    marker holds with no extra; an extra takes lines whose marker holds and names extras."""
    for extra in (extras or ("",)):
        if r.marker is not None and not r.marker.evaluate(dict(ENV, extra=extra)):
            continue
        if extra and (r.marker is None or "extra" not in str(r.marker)):
            continue
        return True
    return False


def _meta(texts: List[str]) -> Any:
    body = "Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n"
    body += "".join(f"Requires-Dist: {t}\n" for t in texts)
    return parse_metadata(body.encode())


@settings(max_examples=300, deadline=None)
@given(st.lists(lines, max_size=8), extras_sets)
def test_skipping_unasked_extras_keeps_exactly_what_applies(texts: List[str],
                                                            extras: Any) -> None:
    meta = _meta(texts)
    canon = frozenset(canonicalize_name(e) for e in extras)
    everything = [r for r in meta.requirements() if _applies(r, extras)]
    fast = [r for r in meta.requirements_for(canon) if _applies(r, extras)]
    assert [str(r) for r in fast] == [str(r) for r in everything]


def test_only_a_bare_extra_marker_counts() -> None:
    assert extra_only('a>=1; extra == "Dev_X"') == "dev-x"
    assert extra_only("a ; extra=='dev'") == "dev"
    for text in ['a; extra == "dev" and python_version < "3"', 'a; extra != "dev"',
                 'a @ https://x.example/a.whl ; extra == "dev"', 'a; (extra == "dev")',
                 'a; extra == "a" or extra == "b"', "a", 'a; python_version < "3"']:
        assert extra_only(text) is None, text


def test_unparsed_lines_are_still_reported() -> None:
    meta = _meta(["good>=1", "bad line (", 'worse ( ; extra == "dev"'])
    assert meta.unparsed == ("bad line (", 'worse ( ; extra == "dev"')
    assert [str(r) for r in meta.requirements_for(frozenset({"dev"}))] == ["good>=1"]
