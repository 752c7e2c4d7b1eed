"""PEP 825 in the pylock export (issue 34): a locked variant wheel brings the index's
variants.json inline as ``[packages.variants-json]``, in the shape PEP 825 fixes."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Optional, Tuple

import jsonschema
import pytest

from envlock import _toml
from envlock.lock.io import load_lock, write_lock
from envlock.wheelvariants import variant_label
from exportkit import export_text
from support.index_server import IndexServer, make_wheel
from support.torch_world import populate

DATA = Path(__file__).resolve().parents[1] / "data"
SCHEMA = json.loads((DATA / "pep825" / "variant-schema-0.1.1.json").read_text())
PLAT = "cp311-cp311-manylinux_2_28_x86_64"
VARIANTS = {
    "$schema": "https://variants-schema.wheelnext.dev/peps/825/v0.1.1.json",
    "default-priorities": {"namespace": ["nvidia"]},
    "variants": {
        "cu126": {"nvidia": {"cuda_version_lower_bound": ["12.6"],
                             "sm_arch": ["50_real", "60_real", "70_real", "75_real",
                                         "80_real", "86_real", "90_real"]}},
        "cu129": {"nvidia": {"cuda_version_lower_bound": ["12.9"],
                             "sm_arch": ["75_real", "80_real", "86_real", "90_real",
                                         "100_real", "120_real", "120_virtual"]}},
    },
}


def _variant_wheel(directory: Path, label: str) -> Path:
    """A real wheel with ``dist-info/variant.json``, named with its variant label."""
    one = dict(VARIANTS, variants={label: VARIANTS["variants"][label]})
    plain = make_wheel(directory / label, "vkern", "1.0", tag=PLAT,
                       files={"vkern-1.0.dist-info/variant.json": json.dumps(one).encode()})
    return plain.rename(directory / plain.name.replace(".whl", f"-{label}.whl"))


def _variant_world(server: IndexServer, directory: Path, variants_json: bytes,
                   labels: Tuple[str, ...] = ("cu126", "cu129")) -> None:
    """The torch 2.5.1 world whose PyPI also serves vkern 1.0 as two variant wheels
    (cu126, cu129), a non-variant wheel, and the variants.json linked next to them."""
    populate(server, directory)
    pypi = server.indexes["pypi"]
    vdir = directory / "vkern"
    vdir.mkdir()
    for label in labels:
        wheel = _variant_wheel(vdir, label.lower())
        pypi.add(wheel.rename(vdir / wheel.name.replace(label.lower(), label)))
    pypi.add(make_wheel(vdir / "plain", "vkern", "1.0", tag=PLAT))
    vj = vdir / "vkern-1.0-variants.json"
    vj.write_bytes(variants_json)
    pypi.add(vj)


def _resolve(tmp_path: Path, driver: str, variants_json: Optional[bytes] = None,
             gpu: str = "H100 SXM",
             labels: Tuple[str, ...] = ("cu126", "cu129")) -> Tuple[Path, "object"]:
    """``envlock resolve --gpu GPU --driver DRIVER vkern`` against the loopback world."""
    from support.cli import run_cli

    body = json.dumps(VARIANTS).encode() if variants_json is None else variants_json
    with IndexServer() as srv:
        _variant_world(srv, tmp_path / "world", body, labels)
        out = tmp_path / "envlock.lock"
        r = run_cli("resolve", "--torch", "==2.5.1", "--python", "3.11",
                    "--index-url", srv.url("pypi"),
                    "--pytorch-index-url", f"{srv.base}/whl", "--gpu", gpu,
                    "--driver", driver, "vkern", "-o", str(out))
    return out, r


@pytest.fixture
def variant_lock(tmp_path: Path) -> Path:
    """A lock resolved from a loopback index whose H100 target (driver 580: CUDA 13.0)
    holds vkern's cu129 variant wheel, its hash and the index's variants.json."""
    out, r = _resolve(tmp_path, "580.65.06")
    assert r.code == 0, r.err
    return out


def test_resolve_locks_the_variant_that_fits(variant_lock: Path) -> None:
    t = load_lock(variant_lock).targets[0]
    pkg = t.package("vkern")
    assert [f.name for f in pkg.files] == [
        "vkern-1.0-cp311-cp311-manylinux_2_28_x86_64-cu129.whl"]
    assert variant_label(pkg.files[0].name) == "cu129"
    assert pkg.files[0].sha256 and len(pkg.files[0].sha256) == 64
    assert json.loads(pkg.variants_json) == VARIANTS
    line = next(d for d in t.decision if d.startswith("vkern 1.0"))
    assert "variant cu129" in line and "12.9" in line and "9.0" in line


def test_resolve_locks_the_plain_wheel_when_no_variant_fits(tmp_path: Path) -> None:
    """Driver 550 supports CUDA 12.4: neither variant's lower bound (12.6, 12.9) is met."""
    out, r = _resolve(tmp_path, "550.54.15")
    assert r.code == 0, r.err
    t = load_lock(out).targets[0]
    pkg = t.package("vkern")
    assert [f.name for f in pkg.files] == ["vkern-1.0-cp311-cp311-manylinux_2_28_x86_64.whl"]
    assert pkg.variants_json is None
    line = next(d for d in t.decision if d.startswith("vkern 1.0"))
    assert "non-variant" in line and "needs CUDA 12.9" in line and "needs CUDA 12.6" in line
    text = export_text(out, "pylock", t.name)
    assert all("variants-json" not in p for p in _toml.loads(text)["packages"])


@pytest.mark.parametrize("body", [b"{not json", b'{"variants": {}}', b"[1, 2]",
                                  json.dumps(dict(VARIANTS, variants={
                                      "cu129": {"nvidia": {"sm_arch": ["90_real"],
                                                           "cuda_version_lower_bound":
                                                           ["twelve"]}}})).encode()])
def test_a_malformed_variants_json_is_a_warning_and_the_plain_wheel_is_locked(
        tmp_path: Path, body: bytes) -> None:
    out, r = _resolve(tmp_path, "580.65.06", variants_json=body)
    assert r.code == 0, r.err
    t = load_lock(out).targets[0]
    assert [f.name for f in t.package("vkern").files] == [
        "vkern-1.0-cp311-cp311-manylinux_2_28_x86_64.whl"]
    line = next(d for d in t.decision if d.startswith("vkern 1.0"))
    assert "non-variant" in line


def test_variant_wheel_brings_variants_json_in_pep825_shape(variant_lock: Path) -> None:
    t = load_lock(variant_lock).targets[0]  # the lock round-trips the variants.json
    assert json.loads(t.package("vkern").variants_json) == VARIANTS
    text = export_text(variant_lock, "pylock", t.name)
    doc = _toml.loads(text)
    pkg = next(p for p in doc["packages"] if p["name"] == "vkern")
    vj = pkg["variants-json"]
    jsonschema.validate(vj, SCHEMA)
    assert vj["$schema"] == VARIANTS["$schema"]
    # only the label of the locked wheel is kept
    assert list(vj["variants"]) == ["cu129"]
    assert "90_real" in vj["variants"]["cu129"]["nvidia"]["sm_arch"]
    # the other packages carry none and stay valid PEP 751 (packaging's validator does
    # not know PEP 825's longer wheel file names yet, so the variant package is left out)
    assert all("variants-json" not in p for p in doc["packages"] if p["name"] != "vkern")
    pylock = pytest.importorskip("packaging.pylock")
    rest = dict(doc, packages=[p for p in doc["packages"] if p["name"] != "vkern"])
    pylock.Pylock.from_dict(rest).validate()


def test_variant_wheel_without_its_variants_json_is_a_warning(variant_lock: Path,
                                                              tmp_path: Path) -> None:
    lock = load_lock(variant_lock)
    t = lock.targets[0]
    pkgs = tuple(dataclasses.replace(p, variants_json=None) if p.name == "vkern" else p
                 for p in t.packages)
    path = tmp_path / "bare.lock"
    write_lock(dataclasses.replace(lock, targets=(dataclasses.replace(t, packages=pkgs),)),
               path)
    text = export_text(path, "pylock", t.name)
    assert "vkern: variant wheels without the index's variants.json" in text
    assert "variants-json" not in _toml.loads(text)["packages"][-1]


def test_a_lock_with_a_malformed_variants_json_is_refused(variant_lock: Path,
                                                          tmp_path: Path) -> None:
    from envlock.errors import InputError

    bad = variant_lock.read_text().replace('default-priorities', 'default-priority')
    p = tmp_path / "bad.lock"
    p.write_text(bad)
    with pytest.raises(InputError, match="not a PEP 825 variants.json"):
        load_lock(p)


def test_verify_accepts_the_pylock(variant_lock: Path, tmp_path: Path) -> None:
    """verify reads a pylock envlock exported (its [tool.envlock] names the target) and
    judges the environment as it does from the envlock lock itself."""
    from support.cli import run_cli

    t = load_lock(variant_lock).targets[0]
    pylock_path = tmp_path / f"pylock.{t.name}.toml"
    pylock_path.write_text(export_text(variant_lock, "pylock", t.name))
    back = load_lock(pylock_path)
    assert back.targets[0].name == t.name
    pruned = dict(VARIANTS, variants={"cu129": VARIANTS["variants"]["cu129"]})
    assert json.loads(back.targets[0].package("vkern").variants_json) == pruned
    assert {p.name: p.version for p in back.targets[0].packages} == \
        {p.name: p.version for p in t.packages}
    results = []
    for lock in (variant_lock, pylock_path):
        r = run_cli("verify", "--lock", str(lock), "--stage", "build", "--json")
        assert r.code in (0, 1), r.err
        results.append(sorted((f["id"], f.get("subject")) for f in json.loads(r.out)["findings"]))
    assert results[0] == results[1]


def test_a_pylock_without_envlock_facts_is_refused(tmp_path: Path) -> None:
    from envlock.errors import InputError

    p = tmp_path / "pylock.toml"
    p.write_text('lock-version = "1.0"\ncreated-by = "uv"\n[[packages]]\nname = "x"\n'
                 'version = "1"\n')
    with pytest.raises(InputError, match="without \\[tool.envlock\\]"):
        load_lock(p)


def test_a_wheel_with_a_malformed_label_is_not_a_candidate(tmp_path: Path) -> None:
    """``CU129`` is not a PEP 825 label (lower case only): that file name is no wheel an
    installer may use, so it is left out as any unusable file name is; the lock holds the
    plain wheel and no variants.json."""
    out, r = _resolve(tmp_path, "580.65.06", labels=("CU129",))
    assert r.code == 0, r.err
    pkg = load_lock(out).targets[0].package("vkern")
    assert [f.name for f in pkg.files] == ["vkern-1.0-cp311-cp311-manylinux_2_28_x86_64.whl"]
    assert pkg.variants_json is None
