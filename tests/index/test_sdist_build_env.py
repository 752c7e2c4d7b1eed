"""Build environments on a real file system: hard links instead of copies, and errors of
the disk (not of the package) as one line with exit 7.

Found on PyPI: ``resolve --torch ==2.15.0 vllm`` for Python 3.12 backtracks through old
vLLM sdists, each of which needs its own torch to build. Every build copied its template
(torch and all) into its environment: /tmp filled up (40 GB left behind), and the copy's
failure came out as "internal error: Error: [('.../libtorch_cuda.so', ...), ...]" with the
list of every file, exit 70.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from support.index_server import make_sdist

from envlock.errors import BuildError
from envlock.index.sdist_build import BuildSettings, build_metadata, link_tree, os_reason


def _template(root: Path) -> Path:
    t = root / "template"
    (t / "pkg" / "sub").mkdir(parents=True)
    (t / "pkg" / "__init__.py").write_text("x = 1\n")
    (t / "pkg" / "sub" / "big.so").write_bytes(b"\0" * 4096)
    (t / "bin").mkdir()
    os.symlink("../pkg/__init__.py", t / "bin" / "alias")
    return t


def test_a_build_environment_links_the_template_instead_of_copying_it(tmp_path: Path) -> None:
    template = _template(tmp_path)
    env = tmp_path / "env" / "site-packages"
    env.mkdir(parents=True)
    link_tree(template, env)
    for rel in ("pkg/__init__.py", "pkg/sub/big.so"):
        assert os.stat(env / rel).st_ino == os.stat(template / rel).st_ino
    assert os.readlink(env / "bin" / "alias") == "../pkg/__init__.py"
    # its own tree: a file replaced or removed there stays in the template
    replacement = env / "pkg" / "new"
    replacement.write_text("y = 2\n")
    os.replace(replacement, env / "pkg" / "__init__.py")
    (env / "pkg" / "sub" / "big.so").unlink()
    assert (template / "pkg" / "__init__.py").read_text() == "x = 1\n"
    assert (template / "pkg" / "sub" / "big.so").stat().st_size == 4096


def test_across_file_systems_the_files_are_copied(tmp_path: Path) -> None:
    shm = Path("/dev/shm")
    if not shm.is_dir() or os.stat(shm).st_dev == os.stat(tmp_path).st_dev:
        pytest.skip("no second file system (/dev/shm) here")
    template = _template(tmp_path)
    with tempfile.TemporaryDirectory(dir=shm) as d:
        link_tree(template, Path(d))
        copied = Path(d) / "pkg" / "sub" / "big.so"
        assert copied.stat().st_size == 4096
        assert os.stat(copied).st_ino != os.stat(template / "pkg" / "sub" / "big.so").st_ino


def test_the_errors_copytree_gathers_read_as_one_line(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    for i in range(3):  # dangling links, followed: each one fails, copytree gathers them
        os.symlink(f"/nonexistent/{i}", src / f"gone{i}")
    with pytest.raises(shutil.Error) as info:
        shutil.copytree(src, tmp_path / "dst")
    line = os_reason(info.value)
    assert "\n" not in line and line.endswith("(and 2 more files)"), line
    assert "No such file or directory" in line and len(line) < 300


def test_a_disk_error_while_preparing_a_build_is_exit_7_in_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sdist = make_sdist(tmp_path, "needsbuild", "1.0", files={"setup.py": "raise SystemExit\n"},
                       pkg_info=None)
    not_a_dir = tmp_path / "a-file"
    not_a_dir.write_text("")
    # the temporary directory the build would use is not a directory: an OSError in the
    # middle of preparing the environment, as a full disk gives
    monkeypatch.setattr(tempfile, "tempdir", str(not_a_dir))
    with pytest.raises(BuildError) as info:
        build_metadata(sdist.read_bytes(), sdist.name, "needsbuild",
                       BuildSettings(index_url="http://127.0.0.1:9/simple"))
    assert info.value.exit_code == 7
    message = info.value.message
    assert message.startswith("needsbuild-1.0.tar.gz: its build environment could not be "
                              "prepared (") and "\n" not in message, message
    assert str(not_a_dir) in message
