"""Secrets out of every text pagesync prints or keeps: keys, passwords, URL userinfo.

A server, an HTTP library or a client library may echo a secret back in any encoding: as
is, URL-encoded, JSON-escaped (once, or twice for JSON inside a JSON string), Python-repr'd
(a `bytes` body in an exception), or as the base64 of `user:password` that HTTP Basic
authentication makes of a URL's userinfo. `secret_forms` lists them all and `redact`
replaces each with `***`; `without_userinfo` takes `user:password@` out of any URL in a
text, whatever the secret. Pure: no I/O.
"""

from __future__ import annotations

import base64
import json
import re
from typing import Iterable
from urllib.parse import quote, quote_plus, unquote, urlsplit, urlunsplit

__all__ = ["secret_forms", "redact", "without_userinfo", "url_secrets", "public_url", "MASK"]

MASK = "***"
# scheme "://" then a userinfo up to the last "@" before the path: `https://me:pw@host` -> `https://***@host`.
_USERINFO = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.\-]*://)[^/?#\s@]*(?:@[^/?#\s@]*)*@")
_SHORTEST = 4  # a shorter secret would mask ordinary words; it is masked only where it stands alone


def _escapes(text: str) -> set[str]:
    """`text` as JSON and Python escape it: JSON once and twice (ASCII-only or not), repr'd
    as a str and as UTF-8 bytes, and the repr of its JSON form (a bytes body printed)."""
    out = {text, repr(text)[1:-1], repr(text.encode("utf-8", "surrogatepass"))[2:-1]}
    for ascii_only in (True, False):
        once = json.dumps(text, ensure_ascii=ascii_only)[1:-1]
        out |= {
            once,
            json.dumps(once, ensure_ascii=ascii_only)[1:-1],
            repr(once)[1:-1],
            repr(once.encode("utf-8", "surrogatepass"))[2:-1],
        }
    return out


def secret_forms(secret: str) -> list[str]:
    """Every way `secret` may be echoed: as is, URL-encoded (`quote`, `quote_plus`, with or
    without `/` kept), base64 (standard and URL-safe, padded or not), each of those
    JSON-escaped or repr'd (`_escapes`). Longest first, so a form holding another is
    replaced whole."""
    raw = {secret, quote(secret, safe=""), quote(secret), quote_plus(secret)}
    data = secret.encode("utf-8", "surrogatepass")
    for b64 in (base64.b64encode(data), base64.urlsafe_b64encode(data)):
        text = b64.decode("ascii")
        raw |= {text, text.rstrip("=")}
    forms: set[str] = set()
    for form in raw:
        forms |= _escapes(form)
    return sorted((f for f in forms if f), key=len, reverse=True)


def redact(text: str, secrets: str | Iterable[str | None] | None) -> str:
    """`text` with every form of each secret (`secret_forms`) replaced by `***` (the
    percent-encoded ones matched in either case of their hex digits), and the userinfo of
    every URL in it (`without_userinfo`)."""
    if isinstance(secrets, str) or secrets is None:
        secrets = [secrets]
    forms: set[str] = set()
    for secret in secrets:
        if secret:
            forms |= set(secret_forms(secret))
    text = without_userinfo(text)
    if not forms:
        return text
    long_ = sorted((f for f in forms if len(f) >= _SHORTEST), key=len, reverse=True)
    short = sorted((f for f in forms if len(f) < _SHORTEST), key=len, reverse=True)
    if long_:
        text = re.sub("|".join(re.escape(f) for f in long_), MASK, text, flags=re.IGNORECASE)
    if short:  # a 1-3 character password: only where it is a word of its own
        text = re.sub(r"(?<![\w])(?:" + "|".join(re.escape(f) for f in short) + r")(?![\w])", MASK, text)
    return text


def without_userinfo(text: str) -> str:
    """`text` with `user:password@` of every `scheme://` URL in it replaced by `***@`."""
    return _USERINFO.sub(lambda m: m.group(1) + MASK + "@", text) if "@" in text else text


def url_secrets(url: str | None) -> list[str]:
    """What a URL's userinfo gives away, in every form a client derives from it: the
    password and `user:password`, as written and percent-decoded (what HTTP Basic
    authentication base64-encodes, which `secret_forms` covers). [] without userinfo."""
    if not url or "@" not in url:
        return []
    try:
        parts = urlsplit(url if "://" in url else "//" + url)
        user, password = parts.username, parts.password
    except ValueError:
        return []
    out: list[str] = []
    for u, p in ((user, password), (unquote(user or ""), unquote(password or "") if password else None)):
        if p:
            out += [p, f"{u or ''}:{p}"]
        elif u:
            out.append(u)  # a token given as the user name alone (https://TOKEN@host)
    return sorted(set(out), key=len, reverse=True)


def public_url(url: str) -> str:
    """`url` without its userinfo, for messages and keys that are kept (a cache file)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return without_userinfo(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path, parts.query, parts.fragment))
