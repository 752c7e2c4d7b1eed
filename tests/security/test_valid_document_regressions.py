"""Issue 18: the defects that the valid-document properties
(:mod:`tests.security.test_valid_properties`) found, one regression test each.

* an index URL holding a quote made an exported requirements file unreadable to pip, and
  ``${NAME}`` in it would have been expanded by pip from the installing environment;
* the conda export wrote characters beyond U+FFFF as JSON surrogate pairs, which a YAML
  reader turns into two lone surrogates, and wrote a pip item ending in ``:`` plain, which
  YAML reads as a mapping;
* a lock whose ``driver-min`` is not a version, and a snapshot whose ``torch.cuda`` is not
  a CUDA version, ended ``verify`` in an internal error (exit 70);
* ``verify`` and ``doctor`` printed control characters from a snapshot raw (``\\x9b`` is
  a terminal's CSI).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict

import pytest

from envlock._text import CONTROL
from tests.security import toml_text
from tests.security.cli_run import assert_contract, run_cli
from tests.security.documents import LOCK, SNAPSHOT, tomllib


def _lock_with(tmp_path: Path, **target_fields: Any) -> Path:
    doc = tomllib.loads(LOCK.read_text())
    for t in doc["target"]:
        t.update(target_fields)
    path = tmp_path / "odd.lock"
    path.write_text(toml_text.dumps(doc), encoding="utf-8")
    return path


def _index_everywhere(tmp_path: Path, index: str) -> Path:
    doc = tomllib.loads(LOCK.read_text())
    for t in doc["target"]:
        for p in t["package"]:
            p["index"] = index
        t["torch"]["index"] = index
    path = tmp_path / "odd.lock"
    path.write_text(toml_text.dumps(doc), encoding="utf-8")
    return path


def test_pip_reads_back_an_index_url_with_quotes_and_a_dollar(tmp_path: Path) -> None:
    pytest.importorskip("pip")
    from pip._internal.network.session import PipSession
    from pip._internal.req.req_file import RequirementsFileParser, get_line_parser

    index = "https://mirror.example/a'b\"c/${HOME}/simple?x=1&y=`id`"
    lock = _index_everywhere(tmp_path, index)
    out = tmp_path / "req.txt"
    argv = ["export", "--lock", str(lock), "--format", "requirements", "--target", "h20",
            "-o", str(out)]
    r = run_cli(argv)
    assert r.code == 0, r.stderr
    parser = RequirementsFileParser(PipSession(), get_line_parser(None))
    urls = [line.opts.index_url for line in parser._parse_file(str(out), constraint=False)
            if not line.is_requirement and line.opts.index_url]
    # one index, read back whole; "${" reaches pip as "%24{", so no variable is expanded
    assert urls == ["https://mirror.example/a'b\"c/%24{HOME}/simple?x=1&y=`id`"]


def test_conda_export_keeps_characters_beyond_the_basic_plane(tmp_path: Path) -> None:
    yaml = pytest.importorskip("yaml")
    index = "https://mirror.example/\U0001f600/simple:\uffff"
    lock = _index_everywhere(tmp_path, index)
    r = run_cli(["export", "--lock", str(lock), "--format", "conda", "--target", "h20"])
    assert r.code == 0, r.stderr
    items = yaml.safe_load(r.stdout)["dependencies"][-1]["pip"]
    assert items[0] == f"--index-url '{index}'"


def test_a_driver_floor_that_is_not_a_version_is_an_input_error(tmp_path: Path) -> None:
    lock = _lock_with(tmp_path, **{"driver-min": "'%:FROM"})
    argv = ["verify", "--lock", str(lock), "--target", "h100-sxm", "--snapshot",
            str(SNAPSHOT)]
    r = run_cli(argv)
    assert_contract(r, argv)
    assert r.code == 2
    assert r.stderr.startswith(f"envlock: error: {lock}: target[0].driver-min: \"'%:FROM\" is not "
                               f"a version"), r.stderr


@pytest.mark.parametrize("field,value,why", [
    ("python", "3.11 AS x", "is not a Python version like '3.11'"),
    ("platform", "linux_x86_64 --privileged", "is not one of "),
    ("glibc", "2.28;id", "is not a glibc version like '2.28'"),
    ("env", {"A B": "1"}, "is not an environment variable name"),
    ("env", {"X=Y": "1"}, "is not an environment variable name"),
])
def test_target_fields_a_dockerfile_renders_must_be_well_formed(
        tmp_path: Path, field: str, value: Any, why: str) -> None:
    """The Python version, platform, glibc and env names reach the Dockerfile's FROM, ARG
    and ENV lines and conda's ``python=`` line as they are: found by reading the
    exporters after the valid-document properties, which never generated them."""
    lock = _lock_with(tmp_path, **{field: value})
    out = tmp_path / "ctx"
    argv = ["export", "--lock", str(lock), "--format", "dockerfile", "--target", "h20",
            "-o", str(out)]
    r = run_cli(argv)
    assert_contract(r, argv)
    assert r.code == 2
    assert r.stderr.startswith(f"envlock: error: {lock}: target[0].{field}: "), r.stderr
    assert why in r.stderr.splitlines()[0]
    assert not out.exists()


def _snapshot_with(tmp_path: Path, change: Dict[str, Any]) -> Path:
    doc = json.loads(SNAPSHOT.read_text())
    for key, value in change.items():
        doc[key] = value if not isinstance(value, dict) else {**doc[key], **value}
    path = tmp_path / "odd.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def test_a_torch_cuda_that_is_not_a_cuda_version_is_an_input_error(tmp_path: Path) -> None:
    snap = _snapshot_with(tmp_path, {"torch": {"cuda": "D,x\u00f6"}})
    for argv in (["verify", "--lock", str(LOCK), "--target", "h100-sxm", "--snapshot",
                  str(snap)], ["doctor", "--snapshot", str(snap)]):
        r = run_cli(argv)
        assert_contract(r, argv)
        assert r.code == 2
        assert "torch.cuda: 'D,xö' is not a CUDA version like '12.4'" in r.stderr


@pytest.mark.parametrize("cmd", ["verify", "doctor"])
def test_control_characters_from_a_snapshot_are_printed_escaped(tmp_path: Path,
                                                                cmd: str) -> None:
    doc = json.loads(SNAPSHOT.read_text())
    doc["packages"]["torch"] = "2.5.1\x9b2J\x1b[H"
    doc["packages"]["evil\x1b]0;title\x07"] = "1.0"
    doc["torch"]["version"] = "2.5.1\x9b2J"
    snap = tmp_path / "odd.json"
    snap.write_text(json.dumps(doc), encoding="utf-8")
    argv = (["verify", "--lock", str(LOCK), "--target", "h100-sxm", "--snapshot", str(snap),
             "-v"] if cmd == "verify" else ["doctor", "--snapshot", str(snap), "-v"])
    r = run_cli(argv)
    assert_contract(r, argv)
    assert r.code in (0, 1)
    raw = {c for c in CONTROL.findall(r.stdout + r.stderr) if c not in "\n\t"}
    assert not raw, raw
    if cmd == "verify":  # the drift is still reported, written visibly
        assert "2.5.1\\x9b2J" in r.stdout


@pytest.mark.parametrize("index", ["https://mirror.example/simple:", "https://h/12:30",
                                   "https://h/!tag", "https://h/*alias"])
def test_conda_export_items_stay_strings(tmp_path: Path, index: str) -> None:
    """A plain YAML item ending in ':' was read back as a mapping, not a pip line."""
    yaml = pytest.importorskip("yaml")
    lock = _index_everywhere(tmp_path, index)
    r = run_cli(["export", "--lock", str(lock), "--format", "conda", "--target", "h20"])
    assert r.code == 0, r.stderr
    items = yaml.safe_load(r.stdout)["dependencies"][-1]["pip"]
    assert all(isinstance(i, str) for i in items), items
    assert items[0].split(" ")[-1].strip("'") == index


def test_doctors_ruled_out_and_smoke_lines_are_printed_escaped() -> None:
    """The lines ``doctor`` prints after its findings quote a snapshot's facts (the advisories
    a log pointed at that the facts rule out) and the output of a smoke check on this
    machine: neither may drive the terminal. Found reading the renderers after the
    valid-document properties (which cover the findings themselves)."""
    from envlock.checks.doctor import DoctorResult
    from envlock.checks.logs import RuledOut
    from envlock.checks.smoke import SmokeResult
    from envlock.cli.render import doctor_lines

    result = DoctorResult(
        findings=(),
        smoke=(SmokeResult("matmul", "error", detail="CUDA error\x1b]0;owned\x07\x9b2J"),),
        ruled_out=(RuledOut("h20-cublas121-sigfpe", ("driver.error=bad\x1b[2J",), ()),))
    lines = doctor_lines(result, verbose=True)
    assert len(lines) == 2
    assert not any(CONTROL.search(line) for line in lines), lines
    assert "driver.error=bad\\x1b[2J" in lines[0]
    assert "CUDA error\\x1b]0;owned\\x07\\x9b2J" in lines[1]
    # without --verbose the ruled-out advisories are only counted
    assert doctor_lines(result, verbose=False)[0].startswith("the log points at 1 advisory")
