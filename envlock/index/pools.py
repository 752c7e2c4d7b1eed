"""Connections for the index client: urllib3 pools that share one TLS context, the proxy
the environment names, per-host credentials, and redirects followed one hop at a time.

This is what pip gets from requests, kept to what an index client needs. requests cost a
cold resolve about 65 ms of imports (charset_normalizer among them) and a millisecond of
Python per request (it reread the proxy variables and ``~/.netrc`` on every call), and
four more distributions in every image that installs envlock. The rules are requests':

* verification against one CA bundle (pip's ``cert``, else ``REQUESTS_CA_BUNDLE`` /
  ``CURL_CA_BUNDLE``, else certifi's), loaded once; a trusted host is not verified;
* ``HTTP_PROXY`` / ``HTTPS_PROXY`` / ``ALL_PROXY`` with ``NO_PROXY`` (names, domain
  suffixes, ``host:port``, CIDR ranges, ``*``), credentials in the proxy URL;
* credentials from the index URL for its origin (scheme, host and port, as pip keys
  them), else from ``~/.netrc`` (``$NETRC``);
* on a redirect to another origin the credentials are dropped (the new host's own netrc
  entry, if any, is used instead; never netrc's ``default``); at most
  :data:`MAX_REDIRECTS` hops.

Imported on first network use only (it imports urllib3).
"""

from __future__ import annotations

import base64
import ipaddress
import netrc
import os
import ssl
import threading
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Set, Tuple
from urllib.parse import unquote, urljoin, urlsplit

import urllib3
from urllib3 import exceptions as _exc

from envlock.index.deadline import POOL_CLASSES
from envlock.index.http import origin

__all__ = ["Pools", "Reply", "RETRYABLE", "TooManyRedirects", "RefusedRedirect",
           "MAX_REDIRECTS", "CaBundleError", "shared_context", "prepare"]

#: as requests
MAX_REDIRECTS = 30
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_DEFAULT_PORTS = {"http": 80, "https": 443}

#: failures worth another attempt: timeouts, refused or reset connections, a body cut
#: short, a TLS or proxy failure (a refused certificate is told apart before a retry)
RETRYABLE: Tuple[type, ...] = (_exc.TimeoutError, _exc.ProtocolError, _exc.SSLError,
                               _exc.ProxyError, _exc.NewConnectionError, _exc.ClosedPoolError,
                               _exc.MaxRetryError, ConnectionError)


#: connections kept open per host: as many as the index client's workers can use at once
#: (its most, on a slow network: envlock.index.client.MOST_WORKERS)
CONNECTIONS = 16


class TooManyRedirects(Exception):
    """More than :data:`MAX_REDIRECTS` redirects (requests' words, which users know)."""


class RefusedRedirect(Exception):
    """A redirect to anything but http(s) (``file:``, ``ftp:``): never followed."""


@dataclass
class Reply:
    """An answer whose body is still to be read (:meth:`chunks`); :meth:`close` always."""

    url: str
    status: int
    #: case-insensitive (urllib3's HTTPHeaderDict)
    headers: Mapping[str, str]
    _raw: Any
    #: answered on a connection an earlier request opened (no connect or TLS handshake in
    #: its wait: about one round trip; see Transport.slow_network)
    reused: bool = False

    def chunks(self, size: int) -> Iterator[bytes]:
        """The body, decoded (gzip, deflate), ``size`` bytes at a time."""
        return self._raw.stream(size, decode_content=True)

    def close(self) -> None:
        """Back to the pool; a connection whose body was not read to the end (a refused
        page, an error) is closed first, never reused half-read."""
        if not self._raw.isclosed():
            self._raw.close()
        self._raw.release_conn()


class Pools:
    """urllib3 pool managers by proxy and by verification, made on first use and shared
    by the client's threads."""

    def __init__(self, *, cafile: Optional[str], client_cert: Optional[str],
                 is_trusted: Callable[[Any], bool], auth: Mapping[Tuple[str, str, Optional[int]], Tuple[str, str]],
                 user_agent: str, env: Optional[Mapping[str, str]] = None) -> None:
        self._cafile = cafile
        self._client_cert = client_cert
        self._is_trusted = is_trusted
        self._auth = dict(auth)
        self._headers = {"User-Agent": user_agent, "Accept-Encoding": "gzip, deflate"}
        environ = os.environ if env is None else env
        self._proxies = _proxies_from(environ)
        self._no_proxy = _no_proxy_from(environ)
        self._netrc_file = environ.get("NETRC") or os.path.expanduser("~/.netrc")
        self._netrc: Optional[Dict[str, Tuple[str, str]]] = None
        self._managers: Dict[Tuple[Optional[str], bool], Any] = {}
        self._contexts: Dict[bool, ssl.SSLContext] = {}
        self._lock = threading.Lock()
        #: connections that have answered before, by id (see Reply.reused)
        self._connections: Set[int] = set()

    # -- one request -------------------------------------------------------------------
    def get(self, url: str, headers: Mapping[str, str], timeout: float) -> Reply:
        """GET ``url``, following redirects; the final answer with its URL."""
        hops = 0
        previous: Optional[Any] = None
        auth_header: Optional[str] = None
        while True:
            parts = urlsplit(url)
            if previous is None:
                auth_header = self._authorization(parts, from_url=True)
            elif _other_origin(previous, parts):
                # a host the redirect names: its own netrc entry only, never the URL's
                # credentials nor netrc's ``default`` (that would go to any host an index
                # or a compromised mirror chose)
                auth_header = self._authorization(parts, from_url=False)
            sent = {**self._headers, **headers}
            if auth_header:
                sent["Authorization"] = auth_header
            manager = self._manager(parts)
            # never the URL's credentials on the wire: a proxy gets the whole URL
            raw = manager.urlopen("GET", _without_userinfo(parts), headers=sent,
                                  redirect=False, retries=False,
                                  preload_content=False, decode_content=True,
                                  timeout=urllib3.Timeout(connect=timeout, read=timeout))
            location = raw.headers.get("Location") if raw.status in _REDIRECTS else None
            if not location:
                return Reply(url, raw.status, raw.headers, raw,
                             reused=hops == 0 and self._seen(raw))
            raw.drain_conn()
            raw.release_conn()
            hops += 1
            if hops > MAX_REDIRECTS:
                raise TooManyRedirects(f"Exceeded {MAX_REDIRECTS} redirects.")
            previous, url = parts, urljoin(url, location)
            scheme = urlsplit(url).scheme.lower()
            if scheme not in ("http", "https"):
                raise RefusedRedirect(f"redirected to a {scheme or 'relative'}: URL; only "
                                      f"http(s) redirects are followed")

    def _seen(self, raw: Any) -> bool:
        """Whether the answer came on a connection that answered before (an id reused by
        a new connection only makes a wait with a handshake count as a round trip: a
        longer one, never a shorter one)."""
        key = id(getattr(raw, "connection", None) or raw)
        with self._lock:
            if key in self._connections:
                return True
            if len(self._connections) > 4096:
                self._connections.clear()
            self._connections.add(key)
            return False

    def clear(self) -> None:
        with self._lock:
            for manager in self._managers.values():
                manager.clear()
            self._managers.clear()

    # -- credentials -------------------------------------------------------------------
    def _authorization(self, parts: Any, *, from_url: bool) -> Optional[str]:
        host = parts.hostname or ""
        # URL credentials belong to the URL's origin (scheme, host, port), as pip keys
        # them: not to another port of the host, nor in clear text to its http:// side
        pair = self._auth.get(origin(parts)) if from_url else None
        if pair is None:
            pair = self._netrc_entry(host, default=from_url)
        if pair is None:
            return None
        token = base64.b64encode(f"{pair[0]}:{pair[1]}".encode("latin-1", "replace"))
        return "Basic " + token.decode("ascii")

    def _netrc_entry(self, host: str, *, default: bool = True) -> Optional[Tuple[str, str]]:
        with self._lock:
            if self._netrc is None:
                self._netrc = _read_netrc(self._netrc_file)
            return self._netrc.get(host) or (self._netrc.get("") if default else None)

    # -- pools ---------------------------------------------------------------------------
    def _manager(self, parts: Any) -> Any:
        verify = not self._is_trusted(parts)
        proxy = self._proxy_for(parts)
        key = (proxy, verify)
        with self._lock:
            manager = self._managers.get(key)
            if manager is None:
                manager = self._managers[key] = self._make(proxy, verify)
            return manager

    def _make(self, proxy: Optional[str], verify: bool) -> Any:
        tls: Dict[str, Any] = {"ssl_context": self._context(verify)}
        if not verify:
            tls.update(cert_reqs="CERT_NONE", assert_hostname=False)
        if proxy is None:
            manager = urllib3.PoolManager(num_pools=8, maxsize=CONNECTIONS, **tls)
        else:
            bare, proxy_auth = _split_proxy(proxy)
            manager = urllib3.ProxyManager(
                bare, num_pools=8, maxsize=CONNECTIONS,
                proxy_headers=urllib3.make_headers(proxy_basic_auth=proxy_auth)
                if proxy_auth else None, **tls)
        manager.pool_classes_by_scheme = dict(POOL_CLASSES)
        return manager

    def _context(self, verify: bool) -> ssl.SSLContext:
        """One TLS context per kind, the CA bundle read once: urllib3 otherwise builds a
        context and rereads the bundle for every new connection (50-90 ms of CPU each,
        measured), most of a cold resolve's CPU once. Shared by every client of the
        process (:func:`shared_context`), so one made ahead (:func:`prepare`) is used."""
        ctx = self._contexts.get(verify)
        if ctx is None:
            ctx = self._contexts[verify] = shared_context(self._cafile, self._client_cert,
                                                          verify)
        return ctx

    def _proxy_for(self, parts: Any) -> Optional[str]:
        host = parts.hostname or ""
        if not self._proxies or _bypassed(host, _port_of(parts), self._no_proxy):
            return None
        scheme = parts.scheme.lower()
        return (self._proxies.get(f"{scheme}://{host}") or self._proxies.get(scheme)
                or self._proxies.get("all"))


# -- helpers ---------------------------------------------------------------------------

#: TLS contexts by (CA bundle, client certificate, each with its identity on disk; verify)
_CONTEXTS: Dict[Tuple[Any, ...], ssl.SSLContext] = {}
_CONTEXTS_LOCK = threading.Lock()


class CaBundleError(Exception):
    """The CA bundle (or the client certificate) configured cannot be used: missing, or
    not PEM certificates. pip and requests refuse such a setting rather than fall back to
    another trust store; the transport reports it as the user's input (one line)."""


def shared_context(cafile: Optional[str], client_cert: Optional[str],
                   verify: bool) -> ssl.SSLContext:
    """The process's TLS context for these settings, made on first use. Keyed by the CA
    bundle's identity on disk as well as its name: a bundle rewritten in place is read
    again. Made under a lock: a thread asking while another makes it waits for that one
    (reading certifi's bundle is ~25 ms of CPU). :class:`CaBundleError` when ``cafile``
    (given: not certifi's) or ``client_cert`` cannot be used; a failure is not kept."""
    named = cafile
    if verify:
        cafile = cafile or _certifi_bundle()
    key = (cafile if verify else None, _identity(cafile) if verify else None, client_cert,
           _identity(client_cert), verify)
    with _CONTEXTS_LOCK:
        ctx = _CONTEXTS.get(key)
        if ctx is None:
            if verify and named and not os.path.exists(named):
                # (it used to be dropped without a word: the system's trust store was used
                # instead of the one the user named)
                raise CaBundleError(f"the CA bundle {named} does not exist")
            try:
                if verify:
                    ctx = ssl.create_default_context(
                        cafile=cafile if cafile and os.path.isfile(cafile) else None,
                        capath=cafile if cafile and os.path.isdir(cafile) else None)
                else:
                    ctx = ssl.create_default_context()
                    ctx.check_hostname = False
                    ctx.verify_mode = ssl.CERT_NONE
            except (ssl.SSLError, OSError) as exc:
                raise CaBundleError(f"the CA bundle {cafile} cannot be used "
                                    f"({_reason(exc)})") from None
            if client_cert:
                try:
                    ctx.load_cert_chain(client_cert)
                except (ssl.SSLError, OSError) as exc:
                    raise CaBundleError(f"the client certificate {client_cert} cannot be "
                                        f"used ({_reason(exc)})") from None
            _CONTEXTS[key] = ctx
        return ctx


def _reason(exc: BaseException) -> str:
    """``[X509: NO_CERTIFICATE_OR_CRL_FOUND] no certificate or crl found (_ssl.c:4154)``
    -> ``no certificate or crl found``: what OpenSSL or the OS says, without the codes."""
    text = getattr(exc, "strerror", None) or str(exc)
    if text.startswith("[") and "] " in text:
        text = text.split("] ", 1)[1]
    return text.split(" (_ssl.c:")[0].strip() or type(exc).__name__


def _identity(path: Optional[str]) -> Optional[Tuple[int, int, int, int]]:
    try:
        st = os.stat(path) if path else None
    except OSError:
        return None
    return None if st is None else (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def prepare(cafile: Optional[str], client_cert: Optional[str]) -> None:
    """Do ahead what the first request does before it reaches the network: this module's
    imports (urllib3 among them: done by importing it), the verifying TLS context and
    the IDNA codec that name lookups use. See :func:`envlock.index.http.warm_up`."""
    shared_context(cafile, client_cert, True)
    "localhost".encode("idna")


def _certifi_bundle() -> Optional[str]:
    try:
        import certifi
    except ImportError:  # the system's default trust store, then
        return None
    return str(certifi.where())


def _port_of(parts: Any) -> Optional[int]:
    try:
        port = parts.port
    except ValueError:
        return None
    return port if port is not None else _DEFAULT_PORTS.get(parts.scheme.lower())


def _other_origin(old: Any, new: Any) -> bool:
    """requests' rule for dropping credentials on a redirect: another host, or another
    scheme or port, except http:80 to https:443 on the same host."""
    if (old.hostname or "") != (new.hostname or ""):
        return True
    a, b = old.scheme.lower(), new.scheme.lower()
    if a == "http" and b == "https" and _port_of(old) == 80 and _port_of(new) == 443:
        return False
    return a != b or _port_of(old) != _port_of(new)


def _read_netrc(path: str) -> Dict[str, Tuple[str, str]]:
    """host -> (login, password) from a netrc file; an unreadable or malformed file is no
    credentials at all, as requests has it ("" keys the ``default`` entry)."""
    try:
        parsed = netrc.netrc(path)
    except (OSError, netrc.NetrcParseError):
        return {}
    out: Dict[str, Tuple[str, str]] = {}
    for host, (login, account, password) in parsed.hosts.items():
        out["" if host == "default" else host] = (login or account or "", password or "")
    return out


def _proxies_from(environ: Mapping[str, str]) -> Dict[str, str]:
    """``scheme -> proxy URL`` from ``*_PROXY`` variables (lower case wins, as urllib)."""
    out: Dict[str, str] = {}
    for name, value in environ.items():
        if value and name.lower().endswith("_proxy") and name.lower() != "no_proxy":
            scheme = name[:-6].lower()
            if name.islower() or scheme not in out:
                out[scheme] = value
    if "REQUEST_METHOD" in environ:  # a CGI request sets HTTP_PROXY itself ("httpoxy")
        out.pop("http", None)
    return out


def _no_proxy_from(environ: Mapping[str, str]) -> List[str]:
    raw = environ.get("no_proxy") or environ.get("NO_PROXY") or ""
    return [e.strip() for e in raw.replace(" ", ",").split(",") if e.strip()]


def _bypassed(host: str, port: Optional[int], entries: List[str]) -> bool:
    """Whether ``NO_PROXY`` exempts the host: ``*``, a name or a domain suffix (``.corp``
    or ``corp``), ``host:port``, or a CIDR range for an IP address (requests' reading)."""
    host = host.lower().strip("[]")
    try:
        address: Optional[Any] = ipaddress.ip_address(host)
    except ValueError:
        address = None
    for entry in entries:
        entry = entry.lower()
        if entry == "*":
            return True
        if "/" in entry:
            if address is not None:
                try:
                    if address in ipaddress.ip_network(entry, strict=False):
                        return True
                except ValueError:
                    pass
            continue
        name, _, entry_port = entry.partition(":") if entry.count(":") == 1 else (entry, "", "")
        if entry_port and (not entry_port.isdigit() or int(entry_port) != port):
            continue
        name = name.lstrip(".")
        if host == name or host.endswith("." + name):
            return True
    return False


def _split_proxy(proxy: str) -> Tuple[str, Optional[str]]:
    """The proxy URL without its credentials, and ``user:password`` for the header."""
    parts = urlsplit(proxy if "://" in proxy else "http://" + proxy)
    if parts.username is None:
        return parts.geturl(), None
    netloc = parts.hostname or ""
    if ":" in netloc:
        netloc = f"[{netloc}]"
    if parts.port is not None:
        netloc += f":{parts.port}"
    bare = parts._replace(netloc=netloc).geturl()
    return bare, f"{unquote(parts.username)}:{unquote(parts.password or '')}"


def _without_userinfo(parts: Any) -> str:
    if "@" not in parts.netloc:
        return str(parts.geturl())
    return str(parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl())
