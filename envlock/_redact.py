"""Keeping secrets out of what envlock writes and prints.

Two tools, both pure text functions: :func:`strip_userinfo` removes ``user:pass@`` from
every URL inside a piece of text (a command line, an error message), and
:func:`looks_secret` says whether a value *itself* looks like a credential, whatever the
name it was found under. Both err on the cautious side: a false positive costs a redacted
value in a report, a false negative leaks a credential into a file people share.
"""

from __future__ import annotations

import re

__all__ = ["REDACTED", "strip_userinfo", "mask_userinfo", "mask_query_secrets", "looks_secret",
           "secret_name"]

REDACTED = "<redacted>"

# scheme://userinfo@ : userinfo runs up to the *last* '@' before any '/', '?', '#' or space
# (as urlsplit reads it), so a password holding '@' is removed whole
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/?#\s]*@")
# vendor token shapes (GitHub, Hugging Face, Slack, AWS, OpenAI-style, GitLab, JWT, PEM)
_TOKEN_SHAPES = re.compile(
    r"(ghp_|gho_|ghs_|ghu_|github_pat_|hf_[A-Za-z0-9]{8}|xox[abprs]-|AKIA[0-9A-Z]{12}|"
    r"ASIA[0-9A-Z]{12}|sk-[A-Za-z0-9]{8}|glpat-|eyJ[A-Za-z0-9_-]{8,}\.|-----BEGIN)")
_URL = re.compile(r"(?i)\b[a-z][a-z0-9+.-]*://[^\s'\"<>]+")
# a query parameter (after ? & or ;) whose name holds a credential word: its value
_QUERY_SECRET = re.compile(
    r"(?i)((?:^|[&;])[a-z0-9_.-]*(?:token|key|secret|passw|pwd|sig|auth|credential|"
    r"session|cookie|signature)[a-z0-9_.-]*=)(?!<redacted>)[^&;#\s]+")
_WORD = re.compile(r"[A-Za-z0-9+/=_.~-]{32,}")
_UUIDISH = re.compile(r"^(GPU-|MIG-)?[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}$", re.I)
# words that mark a variable as credential-bearing, anywhere in its name
_SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASS", "PWD", "CRED", "AUTH", "COOKIE", "SESSION",
                 "PRIVATE", "LICENSE", "SIGNATURE", "ACCESS", "CERT", "SALT", "JWT", "BEARER",
                 "SIGNING", "APIKEY", "LOGIN", "USER")


def strip_userinfo(text: str) -> str:
    """``text`` with the ``user:pass@`` part of every URL in it removed, and the value of
    every query parameter that names a credential (``?token=``, ``&sig=``,
    ``X-Amz-Signature=``) replaced by ``<redacted>``.

    >>> strip_userinfo("pip --index-url https://u:pw@host/simple x")
    'pip --index-url https://host/simple x'
    >>> strip_userinfo("https://host/simple/?token=abc&page=2")
    'https://host/simple/?token=<redacted>&page=2'
    """
    if "@" in text:
        text = _USERINFO.sub(r"\1", text)
    return mask_query_secrets(text)


def mask_userinfo(text: str) -> str:
    """``text`` with every URL's ``user:pass`` replaced by ``<redacted>`` (shows that a
    credential was there without showing it), and query secrets as
    :func:`mask_query_secrets` has them."""
    if "@" in text:
        text = _USERINFO.sub(r"\1" + REDACTED + "@", text)
    return mask_query_secrets(text)


def mask_query_secrets(text: str) -> str:
    """The value of each query parameter whose name says it is a credential, in every
    URL in ``text``, replaced by ``<redacted>`` (pre-signed S3 and Azure SAS URLs, a
    mirror's ``?token=``).

    >>> mask_query_secrets("HF_ENDPOINT=https://h/api?x=1&access_token=s3cr3t#f")
    'HF_ENDPOINT=https://h/api?x=1&access_token=<redacted>#f'
    """
    if "?" not in text or "://" not in text:
        return text
    return _URL.sub(_mask_url, text)


def _mask_url(m: "re.Match[str]") -> str:
    url = m.group(0)
    if "?" not in url:
        return url
    head, _, rest = url.partition("?")
    return head + "?" + _QUERY_SECRET.sub(lambda q: q.group(1) + REDACTED, rest)


def secret_name(name: str) -> bool:
    """True when a variable's name says it holds a credential (``NV_LICENSE_KEY``)."""
    upper = name.upper()
    return any(w in upper for w in _SECRET_WORDS)


def looks_secret(value: str) -> bool:
    """True when ``value`` holds a URL credential or has the shape of a token or key.

    A long unbroken mixed-case alphanumeric word counts (an API key); GPU UUIDs, paths
    and plain numbers do not.
    """
    if _USERINFO.search(value) or _TOKEN_SHAPES.search(value):
        return True
    for word in _WORD.findall(value):
        if _UUIDISH.match(word) or "/" in word:
            continue
        if (any(c.isupper() for c in word) and any(c.islower() for c in word)
                and any(c.isdigit() for c in word)):
            return True
    return False
