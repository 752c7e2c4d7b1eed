"""Issue 18 items 7 and 9: bad command-line input and hostile files end in one line and
exit 2, never exit 70, a hang, or silence."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from envlock.matrix.patterns import pattern_problem
from tests.security.cli_run import assert_contract, run_cli
from tests.security.documents import LOCK, SNAPSHOT


@pytest.mark.parametrize("argv,message", [
    (["snapshot", "--gpu", "H20:999999999"], "the GPU count must be a number from 1 to 1024"),
    (["snapshot", "--gpu", "H20:0"], "the GPU count must be a number from 1 to 1024"),
    (["snapshot", "--gpu", "H20:٨"], "the GPU count must be a number from 1 to 1024"),
    (["resolve", "--gpu", "H100 SXM", "--glibc", "abc", "--offline", "--dry-run"],
     "--glibc 'abc': give a glibc version like 2.28"),
    (["resolve", "--gpu", "H100 SXM", "--python", "3.11\n", "--offline", "--dry-run"],
     "--python '3.11\\n': give a CPython version like 3.11"),
    (["resolve", "--gpu", "H100 SXM", "--driver", "٥٣٥.١٠٤", "--offline", "--dry-run"],
     "is not an NVIDIA driver version"),
    (["doctor", "--snapshot", str(SNAPSHOT), "--smoke", "--timeout", "inf"],
     "expected seconds, more than 0 and at most 86400"),
    (["doctor", "--snapshot", str(SNAPSHOT), "--smoke", "--timeout", "nan"],
     "expected seconds"),
])
def test_bad_values_are_one_line_exit_2(argv: list, message: str) -> None:
    start = time.monotonic()
    r = run_cli(argv)
    assert time.monotonic() - start < 60  # would hang before (H20:999999999)
    assert r.code == 2, r.stderr
    assert_contract(r, argv)
    assert message in r.stderr and len(r.stderr.splitlines()) == 1, r.stderr


def test_no_command_prints_usage_and_exits_2() -> None:
    r = run_cli([])
    assert r.code == 2
    assert r.stderr.startswith("usage: envlock")
    assert r.stderr.splitlines()[-1].startswith("envlock: error: a command is required")


def test_a_bad_requirement_is_one_line(tmp_path: Path) -> None:
    req = tmp_path / "r.txt"
    req.write_text("numpy>=>1\n")
    r = run_cli(["resolve", "--gpu", "H100 SXM", "--offline", "--dry-run", "-r", str(req)])
    assert r.code == 2
    assert len(r.stderr.splitlines()) == 1, r.stderr
    assert r.stderr.startswith(f"envlock: error: {req}:1: invalid requirement 'numpy>=>1': ")


def test_thousands_of_nested_requirement_files(tmp_path: Path) -> None:
    for i in range(3000):
        (tmp_path / f"r{i}.txt").write_text(f"-r r{i + 1}.txt\n")
    (tmp_path / "r3000.txt").write_text("numpy\n")
    r = run_cli(["resolve", "--gpu", "H100 SXM", "--offline", "--dry-run", "-r",
                 str(tmp_path / "r0.txt")])
    assert r.code == 2
    assert "'-r' files nest more than 32 deep" in r.stderr
    assert len(r.stderr.splitlines()) == 1


def test_a_requirement_file_cycle_ends(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("-r b.txt\nnumpy\n")
    (tmp_path / "b.txt").write_text("-r a.txt\n")
    r = run_cli(["resolve", "--gpu", "H100 SXM", "--offline", "--dry-run", "-r",
                 str(tmp_path / "a.txt")])
    assert r.code == 0, r.stderr


@pytest.mark.parametrize("field,value", [
    (("torch", "arch_list"), ["sm_xx", "sm_", "compute_zz"]),
    (("gpus", 0, "compute_capability"), "sm_xx"),
    (("driver", "version"), "٥٥٠.٥٤.١٥"),
    (("driver", "cuda"), "12.x"),
])
def test_odd_snapshot_values_never_crash(tmp_path: Path, field: tuple, value: object) -> None:
    doc = json.loads(SNAPSHOT.read_text())
    if field[0] == "torch" and doc.get("torch") is None:
        doc["torch"] = {"version": "2.5.1+cu121", "cuda": "12.1", "arch_list": []}
    node = doc
    for k in field[:-1]:
        node = node[k]
    node[field[-1]] = value
    path = tmp_path / "s.json"
    path.write_text(json.dumps(doc))
    for argv in (["verify", "--lock", str(LOCK), "--target", "h100-sxm", "--snapshot",
                  str(path)], ["doctor", "--snapshot", str(path)],
                 ["resolve", "--from-snapshot", str(path), "--offline", "--dry-run"]):
        assert_contract(run_cli(argv), argv)


def test_deeply_nested_snapshot_is_an_input_error(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text('{"schema": "envlock.snapshot/1", "host": ' + "[" * 100000 + "]" * 100000
                    + "}")
    r = run_cli(["doctor", "--snapshot", str(path)])
    assert r.code == 2 and len(r.stderr.splitlines()) == 1, r.stderr


def test_debug_keeps_the_internal_error_code() -> None:
    """An internal error under --debug is still exit 70 (not 1), now with a traceback.

    No input reaches an internal error any more, so a subcommand's ``run`` is made to
    raise through argparse (the standard library), never by patching envlock."""
    import io

    from envlock.cli import Output

    out = Output(io.StringIO(), io.StringIO())
    code = _run_raising(["--debug", "matrix", "gpu", "H100"], out)
    assert code == 70
    err = out.stderr.getvalue()
    assert "Traceback" in err and "_Boom: kaput" in err
    assert err.splitlines()[-1].startswith("envlock: internal error: _Boom: kaput")


class _Boom(Exception):
    pass


def _raise(args: object, out: object) -> int:
    raise _Boom("kaput")


def _run_raising(argv: list, out: object) -> int:
    """``main(argv)`` with the parsed namespace's ``run`` replaced by one that raises."""
    import argparse

    from envlock import cli

    original = argparse.ArgumentParser.parse_args

    def parse_args(self: argparse.ArgumentParser, *a: object, **k: object) -> object:
        ns = original(self, *a, **k)  # type: ignore[arg-type]
        if getattr(ns, "command", None):
            ns.run = _raise
        return ns

    argparse.ArgumentParser.parse_args = parse_args  # type: ignore[method-assign,assignment]
    try:
        return cli.main(argv, out)  # type: ignore[arg-type]
    finally:
        argparse.ArgumentParser.parse_args = original  # type: ignore[method-assign]


@pytest.mark.parametrize("pattern", [r"(a+)+$", r"(\w*\s?)*x", r"(?:x|y+)*z", r"((ab)*c?)+$",
                                     r"(a{1,9})+b"])
def test_nested_quantifiers_are_refused(pattern: str) -> None:
    assert pattern_problem(pattern) is not None


def test_every_shipped_symptom_pattern_is_safe_and_fast_on_adversarial_lines() -> None:
    from envlock.matrix import get_matrix

    m = get_matrix()
    lines = ["a" * 4096, " " * 4096, "0" * 4096, "_" * 4096, "CUDA error: " + "x " * 2000,
             "NCCL WARN " + "a" * 4000 + "!", "\t" * 4096, "-" * 4096]
    for adv in m.advisories.values():
        for pat in adv.symptoms:
            assert pattern_problem(pat) is None, (adv.id, pat)
            rx = re.compile(pat, re.IGNORECASE)
            for line in lines:
                rx.search(line)  # a backtracking pattern would not finish in this test


def test_doctor_on_adversarial_log_lines_finishes(tmp_path: Path) -> None:
    log = tmp_path / "crash.log"
    log.write_text("\n".join(["a" * 200000, " " * 200000, "CUBLAS_STATUS_" + "x" * 300000,
                              "exitcode: -8" + " " * 100000]))
    r = run_cli(["doctor", "--snapshot", str(SNAPSHOT), "--log", str(log)])
    assert r.code in (0, 1), r.stderr


def test_matrix_validation_reports_a_backtracking_symptom_pattern() -> None:
    """The hook in the matrix loader: a nested-quantifier pattern is a matrix problem."""
    from envlock.matrix.files import data_files
    from envlock.matrix.load import build_matrix, read_raw
    from envlock.matrix.rows import Problems

    files = dict(data_files())
    text = files["advisories.toml"].decode()
    first = text.index("symptoms = [") + len("symptoms = [")
    files["advisories.toml"] = (text[:first] + '"(a+)+$", ' + text[first:]).encode()
    problems = Problems()
    build_matrix(read_raw(files, problems), problems)
    assert any("nested quantifiers" in p for p in problems.items), problems.items[:3]
