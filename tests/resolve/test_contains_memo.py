"""The closure's specifier checks answer exactly as packaging's ``contains`` does
(pre-releases admitted): the memoised check, for any specifier set and version, asked once
or many times, on sets joined with ``&`` (which share Specifier objects, the memo's unit);
and the filter of a candidate list, which keeps the list's order."""

from __future__ import annotations

from typing import Any, List

from hypothesis import given, settings
from hypothesis import strategies as st
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from envlock.resolve.closure import Cand, CandList, _contains, _inside

VERSIONS = ["0", "1.0", "1.0.0", "1.0rc1", "1.0.dev0", "1.0.post1", "1.0+local", "1.0.1",
            "1.1a1", "2.0", "2.0+cu121", "2!1.0", "2.4.0", "3.0.0b2", "10.0.0.post0.dev1"]
SPECS = ["", ">=1.0", "<2.0", "==1.0", "==1.*", "!=1.0", "~=1.0", ">1.0", "<=1.0", "===1.0",
         "==1.0+local", ">=1.0rc1", "<2.0.dev0", "!=2.*", "~=2.4.0", ">=1.0,<2.0", "==2!1.0",
         ">1.0.post1", "<1.0.0"]

spec_sets = st.lists(st.sampled_from(SPECS), min_size=1, max_size=3).map(
    lambda parts: SpecifierSet(",".join(p for p in parts if p)))


@settings(max_examples=400, deadline=None)
@given(st.lists(spec_sets, min_size=1, max_size=3), st.lists(st.sampled_from(VERSIONS),
                                                             min_size=1, max_size=5))
def test_memoised_contains_is_packagings_answer(sets: List[Any], versions: List[str]) -> None:
    parsed = [Version(v) for v in versions]
    joined = sets[0]
    for s in sets[1:]:
        joined = joined & s
    for spec in [*sets, joined]:
        for v in parsed * 2:  # the second time from the memo
            assert _contains(spec, v) == spec.contains(v, prereleases=True), (str(spec), v)


@settings(max_examples=400, deadline=None)
@given(st.lists(spec_sets, min_size=1, max_size=3),
       st.lists(st.sampled_from(VERSIONS), min_size=0, max_size=8, unique=True))
def test_the_candidate_filter_is_packagings_contains_in_list_order(
        sets: List[Any], versions: List[str]) -> None:
    cands = CandList(Cand("lib", Version(v), (), "") for v in versions)
    joined = sets[0]
    for s in sets[1:]:
        joined = joined & s
    for spec in [*sets, joined, SpecifierSet()]:
        for _ in range(2):  # the second time from the list's remembered versions
            got = list(_inside(spec, cands))
            want = [c for c in cands if spec.contains(c.version, prereleases=True)]
            assert [id(c) for c in got] == [id(c) for c in want], (str(spec), versions)
