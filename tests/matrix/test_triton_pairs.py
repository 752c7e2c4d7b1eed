"""companions.toml pairs each torch release with the triton its wheels require.

The pairing restates the harvested Requires-Dist of the PyPI wheels (``torch-pypi.toml``);
validation rejects a pairing that differs from it, so the curated rows cannot drift from
the regenerated facts.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from envlock.errors import MatrixError
from envlock.matrix.load import load_matrix
from envlock.matrix.load_companions import wheel_triton
from support.edit import edit_once


def test_every_release_with_a_triton_dependency_is_paired_with_it() -> None:
    m = load_matrix()
    for version, rel in m.torch_releases.items():
        spec, where = wheel_triton(rel)
        pair = m.companions[version]
        assert pair.triton == spec, version
        assert set(pair.triton_platforms) == set(where), version


@pytest.mark.parametrize("torch, triton, platforms", [
    ("1.13.1", None, ()),                                  # no triton dependency at all
    ("2.0.0", "==2.0.0", ("linux_x86_64",)),
    ("2.5.1", "==3.1.0", ("linux_x86_64",)),               # aarch64 wheel's marker is x86_64
    ("2.10.0", "==3.6.0", ("linux_x86_64",)),
    ("2.11.0", "==3.6.0", ("linux_x86_64", "linux_aarch64")),  # marker: Linux, any machine
    ("2.14.1", "~=3.8.0", ("linux_x86_64", "linux_aarch64")),  # compatible release, not ==
])
def test_known_pairs(torch: str, triton: str, platforms: tuple) -> None:
    pair = load_matrix().companions[torch]
    assert pair.triton == triton
    assert set(pair.triton_platforms) == set(platforms)


def test_a_pairing_that_contradicts_the_wheel_is_rejected(copy: Path) -> None:
    edit_once(copy / "companions.toml", 'triton = "==3.1.0"', 'triton = "==3.2.0"')
    with pytest.raises(MatrixError) as exc:
        load_matrix(copy)
    text = "\n".join(exc.value.problems)
    assert "companions.toml: pair[" in text
    assert "paired triton==3.2.0, but torch 2.5.0's wheels require triton==3.1.0" in text


def test_a_missing_triton_pairing_is_rejected(copy: Path) -> None:
    edit_once(copy / "companions.toml",
          'triton = "==3.6.0"\ntriton_platforms = ["linux_x86_64", "linux_aarch64"]\n', '')
    with pytest.raises(MatrixError) as exc:
        load_matrix(copy)
    assert any("torch 2.11.0's wheels require triton==3.6.0" in p
               for p in exc.value.problems)


def test_wrong_platforms_and_a_bad_specifier_are_rejected(copy: Path) -> None:
    edit_once(copy / "companions.toml", 'triton = "==2.0.0"\ntriton_platforms = ["linux_x86_64"]',
          'triton = "==2.0.0"\ntriton_platforms = ["linux_x86_64", "linux_aarch64"]')
    edit_once(copy / "companions.toml", 'triton = "==3.5.1"', 'triton = "3.5.1"')
    with pytest.raises(MatrixError) as exc:
        load_matrix(copy)
    text = "\n".join(exc.value.problems)
    assert "triton_platforms: the wheels require triton on linux_x86_64, not" in text
    assert "PEP 440 specifier" in text
