"""A finding's severity, category and evidence are closed sets, refused where a finding is
made: a typo ("warn", "gpu_arch") would otherwise reach JSON, JUnit and exit codes
(``--strict`` counts warnings by name) without a word."""

from __future__ import annotations

import pytest

from envlock.checks.finding import CATEGORIES, EVIDENCE, SEVERITIES, Finding


@pytest.mark.parametrize("field, value", [("severity", "warn"), ("category", "gpu_arch"),
                                          ("evidence", "log")])
def test_a_value_outside_the_set_is_refused_where_the_finding_is_made(field: str,
                                                                      value: str) -> None:
    kwargs = {"id": "x", "severity": "error", "category": "driver", "title": "t",
              field: value}
    with pytest.raises(ValueError, match=f"{field} {value!r} is not one of"):
        Finding(**kwargs)  # type: ignore[arg-type]


def test_every_member_of_each_set_is_accepted() -> None:
    for s in SEVERITIES:
        for c in CATEGORIES:
            for e in (None, *EVIDENCE):
                assert Finding("x", s, c, "t", evidence=e).to_dict()["severity"] == s  # type: ignore[arg-type]
