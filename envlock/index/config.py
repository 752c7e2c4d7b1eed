"""pip-compatible index configuration.

Users sit behind mirrors and already configured pip for them, so envlock reads the same
settings pip does, with the same precedence (lowest first):

1. config files: global (``/etc/xdg/pip/pip.conf``, ``/etc/pip.conf``), user
   (``~/.pip/pip.conf``, ``~/.config/pip/pip.conf``), site (``<prefix>/pip.conf``);
   ``[global]`` then ``[install]`` sections. ``PIP_CONFIG_FILE`` names one more file,
   read last (``os.devnull`` disables all files, as in pip);
2. environment: ``PIP_INDEX_URL``, ``PIP_EXTRA_INDEX_URL`` (space separated),
   ``PIP_FIND_LINKS``, ``PIP_NO_INDEX``, ``PIP_CERT``, ``PIP_CLIENT_CERT``,
   ``PIP_TRUSTED_HOST``, ``PIP_TIMEOUT`` / ``PIP_DEFAULT_TIMEOUT``, ``PIP_RETRIES``;
3. command-line options.

Credentials in URLs and ``~/.netrc`` are honoured by the HTTP layer; they are never
written into a lock (see :func:`redact`).
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field, replace
from typing import Dict, List, Mapping, Optional, Tuple
from urllib.parse import urlsplit

__all__ = ["IndexConfig", "load_index_config", "redact", "check_url", "PYPI_SIMPLE", "config_files"]

PYPI_SIMPLE = "https://pypi.org/simple"


@dataclass(frozen=True)
class IndexConfig:
    index_url: str = PYPI_SIMPLE
    extra_index_urls: Tuple[str, ...] = ()
    find_links: Tuple[str, ...] = ()
    no_index: bool = False
    cert: Optional[str] = None
    client_cert: Optional[str] = None
    trusted_hosts: Tuple[str, ...] = ()
    timeout: float = 15.0
    retries: int = 3
    #: where each setting came from, for ``--verbose`` explanations
    origin: Mapping[str, str] = field(default_factory=dict, compare=False)

    @property
    def indexes(self) -> Tuple[str, ...]:
        """Configured indexes in priority order (first index wins for a package)."""
        if self.no_index:
            return ()
        return (self.index_url,) + tuple(u for u in self.extra_index_urls if u != self.index_url)

    def with_overrides(self, **kwargs: object) -> "IndexConfig":
        clean = {k: v for k, v in kwargs.items() if v is not None}
        return replace(self, **clean)  # type: ignore[arg-type]


def config_files(env: Mapping[str, str]) -> List[str]:
    """pip's configuration files, lowest precedence first."""
    if env.get("PIP_CONFIG_FILE") == os.devnull:
        return []
    home = os.path.expanduser("~")
    xdg_dirs = env.get("XDG_CONFIG_DIRS", "/etc/xdg").split(os.pathsep)
    files = [os.path.join(d, "pip", "pip.conf") for d in reversed(xdg_dirs) if d]
    files.append("/etc/pip.conf")
    files.append(os.path.join(home, ".pip", "pip.conf"))
    xdg_home = env.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    files.append(os.path.join(xdg_home, "pip", "pip.conf"))
    files.append(os.path.join(sys.prefix, "pip.conf"))
    if env.get("PIP_CONFIG_FILE"):
        files.append(env["PIP_CONFIG_FILE"])
    return files


def _split(value: str) -> Tuple[str, ...]:
    return tuple(v for v in value.replace("\n", " ").split() if v)


def _truthy(value: str) -> bool:
    return value.strip().lower() in ("1", "yes", "true", "on")


def load_index_config(env: Optional[Mapping[str, str]] = None, **cli: object) -> IndexConfig:
    """Merge files, environment and command-line values into one :class:`IndexConfig`."""
    env = os.environ if env is None else env
    values: Dict[str, str] = {}
    origin: Dict[str, str] = {}
    for path in config_files(env):
        import configparser  # only where a pip configuration file is read

        from envlock import replay

        replay.note_file(path)  # present or not: a replayed resolve checks it again
        parser = configparser.RawConfigParser()
        try:
            if not parser.read(path, encoding="utf-8"):
                continue
        except (configparser.Error, UnicodeDecodeError):
            continue
        for section in ("global", "install"):
            if parser.has_section(section):
                for key, value in parser.items(section):
                    values[key.replace("_", "-")] = value
                    origin[key.replace("_", "-")] = f"{path} [{section}]"
    for key in ("index-url", "extra-index-url", "find-links", "no-index", "cert",
                "client-cert", "trusted-host", "timeout", "default-timeout", "retries"):
        var = "PIP_" + key.upper().replace("-", "_")
        if var in env:
            values[key] = env[var]
            origin[key] = f"${var}"
    cfg = IndexConfig()
    out: Dict[str, object] = {}
    if "index-url" in values:
        out["index_url"] = values["index-url"].strip()
    if "extra-index-url" in values:
        out["extra_index_urls"] = _split(values["extra-index-url"])
    if "find-links" in values:
        out["find_links"] = _split(values["find-links"])
    if "no-index" in values:
        out["no_index"] = _truthy(values["no-index"])
    if "cert" in values:
        out["cert"] = values["cert"].strip()
    if "client-cert" in values:
        out["client_cert"] = values["client-cert"].strip()
    if "trusted-host" in values:
        out["trusted_hosts"] = _split(values["trusted-host"])
    for key in ("timeout", "default-timeout"):
        if key in values:
            try:
                out["timeout"] = float(values[key])
            except ValueError:
                pass
    if "retries" in values:
        try:
            out["retries"] = int(values["retries"])
        except ValueError:
            pass
    for opt, given in cli.items():
        if given is None:
            continue
        out[opt] = given
        origin[opt.replace("_", "-")] = "command line"
    return replace(cfg, origin=origin, **out)  # type: ignore[arg-type]


def redact(url: str) -> str:
    """Drop credentials from a URL before it is shown or written to a lock.

    Works on text that is not a valid URL too (a bad port, a broken IPv6 literal): the
    userinfo is whatever sits between ``//`` and the last ``@`` of the authority, and it is
    removed without asking urllib to understand the rest.
    """
    if "@" not in url:
        return url  # no userinfo possible (the common case, thousands of times per page)
    scheme_end = url.find("//")
    if scheme_end < 0:
        return url
    start = scheme_end + 2
    end = len(url)
    for sep in "/?#":
        i = url.find(sep, start)
        if i >= 0:
            end = min(end, i)
    at = url.rfind("@", start, end)
    if at < 0:
        return url
    return url[:start] + url[at + 1:]


#: a space or a control character (checked on every request: one C call, not a Python
#: step per character)
_SPACE_OR_CONTROL = re.compile(r"[\x00-\x20\x7f]")


def check_url(url: str) -> None:
    """Refuse an index URL that cannot be requested (bad port, broken IPv6 literal, no
    host), with a one-line input error instead of a crash deep in the HTTP stack."""
    from envlock.errors import InputError

    if url.startswith("file:"):
        return
    shown = redact(url)
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise InputError(f"index URL {shown!r} is not a valid URL ({exc})") from None
    if parts.scheme not in ("http", "https"):
        raise InputError(f"index URL {shown!r} must start with http://, https:// or file:")
    if not parts.hostname:
        raise InputError(f"index URL {shown!r} has no host")
    if port == 0:
        raise InputError(f"index URL {shown!r} has port 0")
    if _SPACE_OR_CONTROL.search(url):
        raise InputError(f"index URL {shown!r} contains spaces or control characters")
