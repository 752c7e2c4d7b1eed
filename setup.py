"""setuptools hook: the wheel carries the validated matrix, prebuilt.

``build_py`` writes ``envlock/matrix/prebuilt-matrix.json`` (see
:func:`envlock.matrix.cache.encode_prebuilt`) from the data files it ships, so the first
envlock command after an install parses no TOML. Everything else is in pyproject.toml.
"""

import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildPyWithMatrix(build_py):
    def run(self) -> None:
        super().run()
        root = Path(__file__).resolve().parent
        sys.path.insert(0, str(root))
        try:
            from envlock.matrix.cache import PREBUILT, encode_prebuilt
            from envlock.matrix.files import data_files

            blob = encode_prebuilt(data_files(root / "compat-matrix"))
        finally:
            sys.path.remove(str(root))
        target = Path(self.build_lib) / "envlock" / "matrix" / PREBUILT
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(blob)


setup(cmdclass={"build_py": BuildPyWithMatrix})
