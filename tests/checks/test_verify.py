"""``envlock verify``: the matrix of snapshot fixtures against a real lock."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from support.cli import run_cli, run_proc

DATA = Path(__file__).resolve().parents[1] / "data"
LOCK = str(DATA / "locks" / "h100-pypi.lock")
MULTI = str(DATA / "locks" / "cu121-h100-h20.lock")


def verify(snapshot: str, *args: str, lock: str = LOCK):
    r = run_cli("verify", "--lock", lock, "--snapshot", str(DATA / "snapshots" / f"{snapshot}.json"),
                "--json", *args)
    return r, (json.loads(r.out) if r.out.strip() else None)


def ids(data: dict) -> list:
    return sorted(f["id"] for f in data["findings"])


CASES = [
    # snapshot, stage, exit code, finding ids (exactly)
    ("h100-match", "runtime", 0, []),
    ("h100-match", "build", 0, []),
    ("h100-package-drift", "runtime", 1,
     ["cuda-major-mix", "package-unexpected", "package-version"]),  # one finding per cause
    ("h100-system-cublas", "runtime", 1, ["library-shadowed"]),  # one LD_LIBRARY_PATH entry
    ("h100-old-driver", "runtime", 1, ["driver-too-old"]),
    ("h100-old-driver", "build", 0, []),  # the build stage does not judge the driver
    ("h20-on-h100-lock", "runtime", 0, ["gpu-not-in-lock"]),
    ("build-container", "build", 0, []),
    # a snapshot taken without a hardware probe recorded no driver: not judged, not "none"
    ("build-container", "runtime", 0, []),
]


@pytest.mark.parametrize("snapshot,stage,code,expected", CASES)
def test_verify_matrix(snapshot: str, stage: str, code: int, expected: list) -> None:
    r, data = verify(snapshot, "--stage", stage)
    assert r.code == code, r.out
    assert ids(data) == expected
    assert data["ok"] is (code == 0) and data["target"] == "h100-sxm" and data["stage"] == stage


def test_runtime_checks_of_facts_a_snapshot_did_not_record_are_skipped_and_said() -> None:
    _, data = verify("build-container", "--stage", "runtime")
    skipped = {s["check"]: s["reason"] for s in data["skipped"]}
    assert skipped["driver"] == "the snapshot did not record the driver (none)"
    assert skipped["gpu-kernels"] == "the snapshot did not record the gpus (none)"


def test_findings_carry_the_exact_fix() -> None:
    _, data = verify("h100-package-drift")
    (f,) = [f for f in data["findings"] if f["id"] == "package-version"]
    assert f["severity"] == "error" and f["category"] == "packages"
    assert f["title"] == ("2 packages differ from the lock: nvidia-nccl-cu12 2.20.5 (lock 2.21.5), "
                          "torch 2.4.1 (lock 2.5.1)")
    assert f["items"] == [
        {"name": "nvidia-nccl-cu12", "installed": "2.20.5", "locked": "2.21.5"},
        {"name": "torch", "installed": "2.4.1", "locked": "2.5.1"}]
    # exactly those two, hash-pinned, from the user's lock
    assert f["fix"][0] == (f"envlock export --lock {LOCK} --format requirements --only "
                           f"nvidia-nccl-cu12,torch -o envlock-fix.txt && pip install --no-deps "
                           f"--require-hashes -r envlock-fix.txt")
    assert f["fix"][1] == (f"or reinstall the whole lock: envlock export --lock {LOCK} --format "
                           f"requirements -o envlock-fix.txt && pip install --no-deps "
                           f"--require-hashes -r envlock-fix.txt")


def test_fixes_use_the_checked_interpreter() -> None:
    _, data = verify("h100-package-drift", "--python", "/opt/venv/bin/python")
    (f,) = [f for f in data["findings"] if f["id"] == "package-unexpected"]
    assert f["fix"] == ["/opt/venv/bin/python -m pip uninstall -y nvidia-cudnn-cu11"]


def test_a_gpu_core_lock_never_calls_unlisted_packages_unexpected() -> None:
    core = str(DATA / "locks" / "gpu-core.lock")
    r, data = verify("h100-package-drift", lock=core)
    assert "package-unexpected" not in ids(data)
    assert not any("uninstall -y nvidia-cublas" in fx or "uninstall -y nvidia-nccl" in fx
                   for f in data["findings"] for fx in f["fix"])
    assert {"check": "packages-outside-lock", "reason": "the lock target holds only the "
            "gpu-core (resolved offline), so packages it does not list are not judged"} \
        in data["skipped"]
    # no hashes in such a lock: the fix pins versions and the locked index instead
    (f,) = [f for f in data["findings"] if f["id"] == "package-version"]
    assert f["fix"][0] == ("pip install --no-deps nvidia-nccl-cu12==2.21.5 torch==2.5.1 "
                           "--index-url https://pypi.org/simple")


def test_shadowing_names_both_copies_and_the_advisory() -> None:
    _, data = verify("h100-system-cublas")
    (f,) = [f for f in data["findings"] if f["id"] == "library-shadowed"]
    assert f["title"] == ("system libcublas, libcublasLt 12.1.3.1 load instead of the wheel's, "
                          "the lock has 12.4.5.8")
    assert [i["name"] for i in f["items"]] == ["libcublas", "libcublasLt"]
    assert f["fix"] == ["unset LD_LIBRARY_PATH or drop /usr/local/cuda-12.1/lib64 from it"]
    assert "/usr/local/cuda-12.1/lib64/libcublasLt.so.12 (12.1.3.1) loads before" in f["detail"]
    assert "system-cublas-shadows-wheel" in f["detail"]  # the advisory is folded in
    assert f["sources"]


def test_mixed_gpus_in_one_job() -> None:
    # a hazard, at the one severity every command gives it (checks/severity.py): it fails
    # the gate with --strict, and blocks training only when a log shows the crash (doctor)
    r, data = verify("mixed-h100-a100")
    assert r.code == 0
    (f,) = [f for f in data["findings"] if f["id"] == "gpu-mixed-capability"]
    assert f["severity"] == "warning"
    assert verify("mixed-h100-a100", "--strict")[0].code == 1


def test_visible_devices_narrow_the_job(tmp_path: Path) -> None:
    snap = json.loads((DATA / "snapshots" / "mixed-h100-a100.json").read_text())
    snap["env"]["CUDA_VISIBLE_DEVICES"] = "0,1,2,3"
    path = tmp_path / "s.json"
    path.write_text(json.dumps(snap))
    r = run_cli("verify", "--lock", LOCK, "--snapshot", str(path), "--json")
    assert r.code == 0 and json.loads(r.out)["findings"] == []


def test_gpu_without_kernels() -> None:
    r, data = verify("rtx5090-torch-without-sm120")
    assert r.code == 1
    f = next(f for f in data["findings"] if f["id"] == "gpu-no-kernels")
    assert f["title"] == "the installed torch has no kernels for NVIDIA GeForce RTX 5090 (sm_120)"
    assert "blackwell-torch-without-sm100-sm120" in f["detail"]


def test_a_cpu_build_of_torch_has_no_kernels_for_any_gpu(tmp_path: Path) -> None:
    snap = json.loads((DATA / "snapshots" / "h100-match.json").read_text())
    snap["packages"]["torch"] = "2.5.1+cpu"
    snap["torch"] = {"version": "2.5.1+cpu", "cuda": None, "cudnn": None, "nccl": None,
                     "arch_list": [], "source": "files"}
    path = tmp_path / "s.json"
    path.write_text(json.dumps(snap))
    data = json.loads(run_cli("verify", "--lock", LOCK, "--snapshot", str(path), "--json").out)
    # one cause, one finding: the torch version, the 8 GPUs and the CPU-torch advisory
    (f,) = data["findings"]
    assert f["id"] == "gpu-no-kernels"
    assert f["title"] == ("torch 2.5.1+cpu installed, the lock has 2.5.1+cu124; "
                          "8 GPUs without kernels")
    assert f["detail"].startswith("the installed torch is a CPU-only build")
    assert "cpu-only-torch-on-gpu-host" in f["detail"]
    assert f["fix"][0].startswith(f"envlock export --lock {LOCK} --format requirements "
                                  f"--only torch")


def test_locked_environment_variables(tmp_path: Path) -> None:
    snap = json.loads((DATA / "snapshots" / "h100-match.json").read_text())
    path = tmp_path / "s.json"
    path.write_text(json.dumps(snap))
    r = run_cli("verify", "--lock", MULTI, "--target", "h100-sxm", "--snapshot", str(path),
                "--json")
    data = json.loads(r.out)
    env = [f for f in data["findings"] if f["id"] == "env-mismatch"]
    assert env and env[0]["fix"] == ["export NCCL_DEBUG=WARN"]
    snap["env"]["NCCL_DEBUG"] = "WARN"
    path.write_text(json.dumps(snap))
    data = json.loads(run_cli("verify", "--lock", MULTI, "--target", "h100-sxm",
                              "--snapshot", str(path), "--json").out)
    assert not [f for f in data["findings"] if f["id"] == "env-mismatch"]


def test_target_is_chosen_by_gpu_or_must_be_named(tmp_path: Path) -> None:
    # the multi-target lock has h100-sxm and h20: an H20 box picks h20
    r = run_cli("verify", "--lock", MULTI, "--snapshot",
                str(DATA / "snapshots" / "h20-on-h100-lock.json"), "--json")
    assert json.loads(r.out)["target"] == "h20"
    r = run_cli("verify", "--lock", MULTI, "--snapshot",
                str(DATA / "snapshots" / "build-container.json"), "--stage", "build")
    assert r.code == 2 and "pass --target" in r.err
    r = run_cli("verify", "--lock", MULTI, "--target", "nope", "--snapshot",
                str(DATA / "snapshots" / "build-container.json"))
    assert r.code == 2 and "has no target 'nope' (it has: h100-sxm, h20)" in r.err


def test_build_stage_says_what_it_skipped() -> None:
    _, data = verify("build-container", "--stage", "build")
    skipped = {s["check"] for s in data["skipped"]}
    assert {"driver", "gpu-kernels", "gpu-mix", "gpu-target", "env"} <= skipped


def test_text_output_is_short(capsys: pytest.CaptureFixture[str]) -> None:
    r = run_cli("verify", "--lock", LOCK, "--snapshot",
                str(DATA / "snapshots" / "h100-old-driver.json"))
    assert r.code == 1
    lines = r.out.splitlines()
    assert lines[0] == f"h100-sxm lock ({LOCK}, runtime): 1 problem, 1 blocks training"
    assert any("fix: upgrade the NVIDIA driver to >= 525.60.13" in line for line in lines)
    assert len(lines) < 12


def test_junit_report(tmp_path: Path) -> None:
    out = tmp_path / "report.xml"
    r = run_cli("verify", "--lock", LOCK, "--snapshot",
                str(DATA / "snapshots" / "h100-package-drift.json"), "--junit", str(out))
    assert r.code == 1
    suite = ET.parse(out).getroot()
    assert suite.tag == "testsuite" and suite.get("name") == "envlock verify"
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert cases["packages"].find("failure") is not None
    assert cases["cuda-majors"].find("failure") is not None
    assert cases["libraries"].find("failure") is None
    assert cases["package-files"].find("skipped") is not None
    assert int(suite.get("failures")) == 2


def test_junit_dash_is_standard_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--junit -`` writes the XML to standard output, alone (the report goes to standard
    error), and no file named ``-``; with --json, which wants standard output too, it
    is refused (exit 2)."""
    monkeypatch.chdir(tmp_path)
    snap = str(DATA / "snapshots" / "h100-package-drift.json")
    r = run_proc("verify", "--lock", str(Path(LOCK).resolve()), "--snapshot", snap,
                 "--junit", "-")
    assert r.code == 1
    suite = ET.fromstring(r.out)
    assert suite.get("name") == "envlock verify" and int(suite.get("failures")) == 2
    assert "h100-sxm lock" in r.err
    assert not (tmp_path / "-").exists()
    r = run_cli("verify", "--lock", LOCK, "--snapshot", snap, "--junit", "-", "--json")
    assert r.code == 2 and "--junit a file name" in r.err
    assert not (tmp_path / "-").exists()


def test_doctor_junit_dash_is_standard_output(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    snap = str(DATA / "snapshots" / "h100-old-driver.json")
    r = run_proc("doctor", "--snapshot", snap, "--junit", "-")
    suite = ET.fromstring(r.out)
    assert suite.get("name") == "envlock doctor"
    assert "doctor " in r.err
    assert not (tmp_path / "-").exists()
    r = run_cli("doctor", "--snapshot", snap, "--junit", "-", "--json")
    assert r.code == 2 and "--junit a file name" in r.err


def test_strict_fails_on_warnings() -> None:
    r, _ = verify("h20-on-h100-lock")
    assert r.code == 0
    r, _ = verify("h20-on-h100-lock", "--strict")
    assert r.code == 1


@pytest.mark.parametrize("content,message", [
    ("{not json", "is not valid JSON"),
    ('{"schema": "envlock.snapshot/2"}', "comes from a newer envlock"),
    ('{"schema": "something/1"}', "not an envlock snapshot"),
    ('{"schema": "envlock.snapshot/1", "gpus": [{"index": "zero"}]}', "gpus[0].index"),
    ('{"schema": "envlock.snapshot/1", "driver": {"version": "latest"}}',
     "driver.version: 'latest' is not an NVIDIA driver version"),
    ('{"schema": "envlock.snapshot/1", "gpus": [{"index": 0, "compute_capability": "9"}]}',
     "gpus[0].compute_capability"),
])
def test_bad_snapshots_are_one_line_errors(tmp_path: Path, content: str, message: str) -> None:
    p = tmp_path / "bad.json"
    p.write_text(content)
    r = run_cli("verify", "--lock", LOCK, "--snapshot", str(p))
    assert r.code == 2 and message in r.err and r.err.count("\n") == 1


@pytest.mark.parametrize("content,message", [
    ("version = [", "is not valid TOML"),
    ("version = 9\n", "lock format 9 comes from a newer envlock"),
    ("name = 1\n", "not an envlock lock"),
    ("version = 1\n[[target]]\nname = 3\n", "target[0].name: unexpected value 3"),
])
def test_bad_locks_are_one_line_errors(tmp_path: Path, content: str, message: str) -> None:
    p = tmp_path / "bad.lock"
    p.write_text(content)
    r = run_cli("verify", "--lock", str(p), "--snapshot",
                str(DATA / "snapshots" / "h100-match.json"))
    assert r.code == 2 and message in r.err, r.err


def test_record_hashes_are_checked_with_hashes(tmp_path: Path) -> None:
    """--hashes reads the RECORD of installed locked packages (here: a real venv tree)."""
    import shutil
    import zipfile

    from support.index_server import make_wheel

    site = tmp_path / "site"
    site.mkdir()
    whl = make_wheel(tmp_path / "w", "demo", "1.0")
    with zipfile.ZipFile(whl) as zf:
        zf.extractall(site)
    from envlock.checks.verify import verify as run_verify
    from envlock.lock.io import parse_lock
    from envlock.matrix import get_matrix
    from envlock.snapshot import Snapshot

    lock = parse_lock('version = 1\n[[target]]\nname = "cpu"\npython = "3.11"\n'
                      'platform = "linux_x86_64"\n[[target.package]]\nname = "demo"\n'
                      'version = "1.0"\n')
    snap = Snapshot(packages={"demo": "1.0"})
    ok = run_verify(lock, lock.targets[0], snap, get_matrix(), stage="build",
                    check_hashes=True, paths=[str(site)])
    assert [f.id for f in ok.findings] == []
    (site / "demo" / "__init__.py").write_text("tampered = True\n")
    bad = run_verify(lock, lock.targets[0], snap, get_matrix(), stage="build",
                     check_hashes=True, paths=[str(site)])
    assert [f.id for f in bad.findings] == ["package-files"]
    assert "demo/__init__.py" in bad.findings[0].detail
    shutil.rmtree(site)


def test_a_python_mismatch_is_one_finding_instead_of_the_package_noise(tmp_path: Path) -> None:
    snap = json.loads((DATA / "snapshots" / "h100-match.json").read_text())
    locked = snap["python"]["version"]
    snap["python"]["version"] = "3.9.18"
    snap["packages"] = {}  # a 3.9 environment has none of the lock's cp3X wheels
    path = tmp_path / "py39.json"
    path.write_text(json.dumps(snap))
    r = run_cli("verify", "--lock", LOCK, "--snapshot", str(path), "--json")
    data = json.loads(r.out)
    assert r.code == 1
    assert [f["id"] for f in data["findings"]] == ["python-mismatch"]
    f = data["findings"][0]
    assert "3.9" in f["title"] and locked.rsplit(".", 1)[0] in f["title"]
    text = run_cli("verify", "--lock", LOCK, "--snapshot", str(path))
    assert "python-mismatch" in text.out or "Python 3.9" in text.out
    assert "not installed" not in text.out


def test_a_lock_resolved_without_python_matches_the_interpreter(tmp_path: Path) -> None:
    import sys

    out = tmp_path / "l.lock"
    r = run_cli("resolve", "--gpu", "H100", "--offline", "-o", str(out))
    assert r.code == 0, r.err
    from envlock import _toml

    assert _toml.loads(out.read_text())["target"][0]["python"] == \
        f"{sys.version_info[0]}.{sys.version_info[1]}"
