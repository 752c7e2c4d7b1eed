"""Every ``--format`` choice maps to a loadable exporter (pip-audit's "every enum value is
mapped" test), and the registry is the single source of the choices."""

from __future__ import annotations

import argparse

import pytest

from envlock.cli import export_cmd
from envlock.export import FORMATS, get_exporter
from envlock.export.common import Exporter


def _format_choices() -> list:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    export_cmd.register(sub)
    action = next(a for a in sub.choices["export"]._actions if "--format" in a.option_strings)
    return list(action.choices)


def test_every_format_choice_is_mapped_to_its_exporter() -> None:
    choices = _format_choices()
    assert choices == list(FORMATS)
    assert set(choices) == {"requirements", "constraints", "pylock", "uv", "conda",
                            "dockerfile", "kubernetes"}
    for fmt in choices:
        exporter = get_exporter(fmt)
        assert isinstance(exporter, Exporter)
        assert exporter.name == fmt
        assert FORMATS[fmt] == f"envlock.export.{fmt}"


@pytest.mark.parametrize("fmt,needs", [("requirements", True), ("pylock", True),
                                       ("dockerfile", True), ("constraints", False),
                                       ("conda", False), ("uv", False)])
def test_which_formats_need_hashes(fmt: str, needs: bool) -> None:
    assert get_exporter(fmt).needs_hashes is needs


def test_unknown_format_is_a_usage_error() -> None:
    from envlock.errors import ExitCode, UsageError

    with pytest.raises(UsageError) as exc:
        get_exporter("poetry")
    assert exc.value.exit_code == ExitCode.USAGE
    assert str(exc.value) == ("unknown export format 'poetry' (formats: requirements, "
                              "constraints, pylock, uv, conda, dockerfile, kubernetes)")
