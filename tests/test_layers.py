"""The shape of the package: data flows one way, and only the command line knows it exists.

Nothing outside ``envlock/cli/`` imports ``envlock.cli`` (``envlock/__main__.py`` is the
command line's entry point, ``python -m envlock``, and the one exception)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "envlock"


def _imports(path: Path):
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module
            yield from (f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", "") in (
                "import_module", "find_spec") and node.args and \
                isinstance(node.args[0], ast.Constant):
            yield str(node.args[0].value)


def test_nothing_outside_the_cli_imports_it() -> None:
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        if rel.parts[0] == "cli" or rel.as_posix() == "__main__.py":
            continue
        for name in _imports(path):
            if name == "envlock.cli" or name.startswith("envlock.cli."):
                offenders.append(f"{rel}: {name}")
    assert offenders == []


def test_library_layers_load_without_the_cli() -> None:
    code = ("import sys, envlock.render, envlock.exchange, envlock.fleet.report, "
            "envlock.fleet.protocol, envlock.training, envlock.training.guard; "
            "print(sorted(m for m in sys.modules if m.startswith('envlock.cli')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"
