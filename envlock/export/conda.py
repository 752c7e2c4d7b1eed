"""``--format conda``: an ``environment.yml`` with the target's Python and pip, and every
locked package in the ``pip:`` section.

conda writes the ``pip:`` items into a requirements file and runs pip on it, so each item
is a requirements-file line: index options, then ``name==version --hash=...``. Mapping
packages to conda-forge (so that, say, numpy comes from conda) is a later step; until then
conda provides only the interpreter and pip.
"""

from __future__ import annotations

import json
import re
from typing import List

from envlock.export.common import (
    ExportRequest,
    Exporter,
    gpu_core_warning,
    header_lines,
    override_warning,
    pin,
)
from envlock.export.requirements import index_option_lines

__all__ = ["CondaExporter", "EXPORTER", "yaml_scalar"]

_PLAIN = re.compile(r"^[A-Za-z0-9_.+=<>!~*,/-][A-Za-z0-9_.+=<>!~*,/:@%-]*"
                    r"( [A-Za-z0-9_.+=<>!~*,/:@%-]+)*$")


#: a plain scalar starts with a letter (or "--" and a letter): never a number, ".inf", a
#: tag ("!"), an alias ("*") or a sequence entry ("- ")
_PLAIN_START = re.compile(r"^(--)?[A-Za-z]")


def yaml_scalar(text: str) -> str:
    """``text`` as a YAML scalar: plain when that is unambiguous, else double-quoted.

    >>> yaml_scalar("numpy==2.1.3")
    'numpy==2.1.3'
    >>> yaml_scalar("a: b")
    '"a: b"'
    >>> yaml_scalar("--index-url https://h/simple:")  # plain, a trailing ':' makes a mapping
    '"--index-url https://h/simple:"'
    >>> print(yaml_scalar("x: \U0001f600\uffff"))
    "x: \U0001f600\\uffff"
    """
    if _PLAIN.match(text) and _PLAIN_START.match(text) and ": " not in text and \
            " #" not in text and not text.endswith(":") and \
            text.lower() not in ("yes", "no", "true", "false", "null", "on", "off", "~"):
        return text
    # ensure_ascii would write a character beyond U+FFFF as a JSON surrogate pair, which a
    # YAML reader decodes to two lone surrogates: keep the text as it is and escape only
    # what YAML does not allow in a document
    return _NOT_YAML.sub(lambda m: f"\\u{ord(m.group(0)):04x}",
                         json.dumps(text, ensure_ascii=False))


#: characters outside YAML's printable set (they must be written as escapes)
_NOT_YAML = re.compile("[^\t\n\r\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd"
                       "\U00010000-\U0010ffff]")


class CondaExporter(Exporter):
    name = "conda"
    summary = "conda environment.yml: python + pip, the lock in the pip: section"

    def filename(self, target: str) -> str:
        return f"environment-{target}.yml"

    def warnings(self, request: ExportRequest) -> List[str]:
        t = request.target
        return gpu_core_warning(t) + override_warning(
            t, "conda runs pip without --no-deps, so pip will report a conflict; install "
               "with --format requirements (pip --no-deps) instead.")

    def render(self, request: ExportRequest) -> str:
        t = request.target
        fname = self.output_name(request)
        python = t.python.rstrip("t")
        body = [
            "Create the environment with:",
            f"  conda env create -f {fname}",
            "conda supplies only Python and pip; every locked package comes from pip, with "
            "the index options and hashes of the lock. Mapping packages to conda-forge "
            "builds is a later step of envlock.",
        ]
        if t.python.endswith("t"):
            body.append(f"Python {t.python} is the free-threaded build: add "
                        f"python-freethreading to the conda dependencies.")
        lines = header_lines(request, "conda environment file", body, self.warnings(request))
        items = index_option_lines(request)
        for p in sorted(t.packages, key=lambda p: p.name):
            items.append(" ".join([pin(p)] + [f"--hash=sha256:{h}" for h in p.hashes]))
        lines += [
            "",
            f"name: {yaml_scalar('envlock-' + t.name)}",
            "channels:",
            "  - conda-forge",
            "  - nodefaults",
            "dependencies:",
            f"  - python={python}",
            "  - pip",
            "  - pip:",
        ]
        lines += [f"      - {yaml_scalar(i)}" for i in items]
        return "\n".join(lines) + "\n"


EXPORTER = CondaExporter()
