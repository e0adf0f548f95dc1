"""Which URLs a pass may fetch: the configured sites only, http(s) only, and no private
addresses reached from a public site (no SSRF through a hostile sitemap or redirect).

A site is a host and a port, as for the audit: `docs.example.com` (its scheme's default
port, 80 or 443) and `docs.example.com:8443` are two sites, so a sitemap cannot lead the
pass to another service of its host (a metrics endpoint, an admin app).

Pure apart from name resolution, which is injected (`resolve(host) -> list of IPs`).
"""

from __future__ import annotations

import ipaddress
import re
import socket
from functools import lru_cache
from dataclasses import dataclass, field
from typing import Callable, Iterable
from urllib.parse import urlsplit

__all__ = [
    "Scope",
    "system_resolve",
    "is_private_address",
    "origin_key",
    "site_key",
    "refused_by_host",
    "allow_host_flags",
    "all_out_of_scope",
    "some_out_of_scope",
]

_DEFAULT_PORTS = {"http": 80, "https": 443}

# scheme "://" netloc, where urlsplit would find them: the scheme's characters, then the
# netloc up to the first / ? or # (or the end). No control character or space up to there:
# urlsplit strips or deletes those, and the prefix would no longer be what it reads.
_ORIGIN = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^/?#\x00-\x20\x7f]*(?=[/?#]|\Z)")


def system_resolve(host: str) -> list[str]:
    """The host's addresses as the OS resolver gives them ([] when it does not resolve)."""
    try:
        return sorted({str(info[4][0]) for info in socket.getaddrinfo(host, None)})  # an IP address string
    except (socket.gaierror, UnicodeError, OSError):
        return []


def origin_key(url: str) -> str | None:
    """The `scheme://netloc` prefix that alone decides `urlsplit(url)`'s scheme and hostname,
    or None for a URL without one (no `//` authority, or a control character or space in it)."""
    m = _ORIGIN.match(url)
    return m.group() if m else None


def url_host(url: str) -> tuple[str, str]:
    """`url`'s netloc (lower-cased) and hostname (or ""), as `urlsplit` gives them; ("", "")
    for a URL urlsplit refuses.

    Both depend only on the `origin_key` prefix, so they are worked out once per origin:
    the fetcher and the engine ask for every page's host several times a pass, and on
    20,000 distinct URLs each `urlsplit` is a miss of its own cache."""
    key = origin_key(url)
    return _split_host(url) if key is None else _origin_host(key)


@lru_cache(maxsize=4096)
def _origin_host(origin: str) -> tuple[str, str]:
    return _split_host(origin)


def _split_host(url: str) -> tuple[str, str]:
    try:
        split = urlsplit(url)
        return split.netloc.lower(), split.hostname or ""
    except ValueError:
        return "", ""


def site_key(scheme: str, host: str, port: int | None) -> str:
    """A site as `Scope.hosts` holds it: the host (lower-case; an IPv6 literal bare), with
    `:port` only for a port that is not the scheme's default (bracketed for IPv6)."""
    host = host.lower()
    if port is None or port == _DEFAULT_PORTS.get(scheme.lower()):
        return host
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _site_host(site: str) -> str:
    """The host of a `site_key`."""
    if site.startswith("["):
        return site[1 : site.index("]")]
    host, colon, port = site.rpartition(":")
    return host if colon and port.isdigit() and ":" not in host else site


def _site_of(value: str) -> str | None:
    """An --allow-host value as the site `check` compares: `docs.example.com`,
    `docs.example.com:8443`, `[::1]:8080`, `fd00::5` or a URL (`https://docs.example.com/`)
    name their host and port. Without a scheme, 80 and 443 are the default ports."""
    value = value.strip()
    try:
        ipaddress.ip_address(value.strip("[]"))  # an IP literal, bracketed or not: as written,
        return value.strip("[]").lower()  # like the hostname urlsplit gives for it
    except ValueError:
        pass
    try:
        parts = urlsplit(value if "://" in value else "//" + value)
        host, port = parts.hostname, parts.port
    except ValueError:
        return None
    if not host:
        return None
    if not parts.scheme and port in (80, 443):
        port = None
    return site_key(parts.scheme, host, port)


def is_private_address(ip: str) -> bool:
    """Loopback, private, link-local, reserved, multicast or unspecified: not the public web."""
    try:
        addr = ipaddress.ip_address(ip.split("%", 1)[0])
    except ValueError:
        return True
    return not addr.is_global


@dataclass
class Scope:
    """Allowed sites (from --sitemap/--url/--allow-host; `site_key`s: host, and port when
    not the default) and the private-address rule.

    When every configured host is public, any URL whose host resolves to a private
    address is refused; a site that itself lives on a private network (or 127.0.0.1)
    may reach private addresses, but still only on its own hosts.

    `plain_sites` are the sites named only by `http://` URLs (and, in a run naming no https
    URL at all, the --allow-host sites given without a scheme): the scheme is part of a
    site, so a site named by an `https://` URL is an https site, and its secrets (--header)
    are never sent over plain http to it (`plain_http_ok`), whatever its sitemap lists.
    """

    hosts: set[str]
    resolve: Callable[[str], list[str]] = system_resolve
    plain_sites: set[str] = field(default_factory=set)
    _private_ok: bool | None = field(default=None, init=False)
    _cache: dict[str, list[str]] = field(default_factory=dict, init=False)
    _verdicts: dict[str, str | None] = field(default_factory=dict, init=False)  # origin_key -> check()

    @classmethod
    def from_urls(
        cls, urls: Iterable[str], allow_hosts: Iterable[str] = (), resolve: Callable[[str], list[str]] = system_resolve
    ) -> "Scope":
        allow_hosts = list(allow_hosts)
        hosts = {h for h in map(_site_of, allow_hosts) if h}
        schemes: dict[str, set[str]] = {}  # site -> the schemes it was named with
        named = [(u, True) for u in urls] + [(a.strip(), False) for a in allow_hosts if "://" in a]
        for u, configured in named:
            try:
                parts = urlsplit(u)
                host, port = parts.hostname, parts.port
            except ValueError:
                continue
            if host:
                site = site_key(parts.scheme, host, port)
                schemes.setdefault(site, set()).add(parts.scheme.lower())
                if configured:
                    hosts.add(site)
        plain = {site for site, used in schemes.items() if used == {"http"}}
        if not any("https" in used for used in schemes.values()):
            # A run over http alone: an --allow-host named without a scheme is one of its http sites.
            plain |= {h for h in hosts if h not in schemes}
        return cls(hosts=hosts, resolve=resolve, plain_sites=plain)

    def plain_http_ok(self, url: str) -> bool:
        """True when `url` may carry its site's secrets: an https URL, or an http one of a
        site named only over http (`plain_sites`)."""
        try:
            parts = urlsplit(url)
            if parts.scheme.lower() == "https":
                return True
            return (
                parts.scheme.lower() == "http"
                and site_key(parts.scheme, parts.hostname or "", parts.port) in self.plain_sites
            )
        except ValueError:
            return False

    def _addresses(self, host: str) -> list[str]:
        if host not in self._cache:
            try:
                ipaddress.ip_address(host)
                self._cache[host] = [host]
            except ValueError:
                self._cache[host] = self.resolve(host)
        return self._cache[host]

    def private_allowed(self) -> bool:
        """True when some configured host is itself on a private address."""
        if self._private_ok is None:
            self._private_ok = any(
                any(is_private_address(ip) for ip in self._addresses(h))
                for h in {_site_host(site) for site in self.hosts}
            )
        return self._private_ok

    def check(self, url: str) -> str | None:
        """None when the URL may be fetched, else the reason it may not.

        The answer depends only on the URL's scheme, host and port, so it is worked out once per
        `origin_key` (a 20,000-URL sitemap of one site costs one urlsplit, not 20,000).
        """
        key = origin_key(url)
        if key is None:
            return self._check(url)
        try:
            return self._verdicts[key]
        except KeyError:
            verdict = self._verdicts[key] = self._check(key)
            return verdict

    def _check(self, url: str) -> str | None:
        try:
            parts = urlsplit(url)
            host = (parts.hostname or "").lower()
            port = parts.port
        except ValueError:
            return "malformed URL"
        if parts.scheme.lower() not in ("http", "https"):
            return f"scheme {parts.scheme or '(none)'} not allowed"
        site = site_key(parts.scheme, host, port)
        if site not in self.hosts:
            return f"host {site or '(none)'} is not one of the configured sites (use --allow-host)"
        if not self.private_allowed():
            addrs = self._addresses(host)
            if any(is_private_address(ip) for ip in addrs):
                return f"host {host} resolves to a private address"
        return None


def refused_by_host(urls: Iterable[str]) -> dict[str, int]:
    """How many of `urls` (refused by the scope) each site (`site_key`: host, and port when
    not the default) holds, most first (ties by name)."""
    counts: dict[str, int] = {}
    for u in urls:
        netloc = _site_of(u) or "(no host)"
        counts[netloc] = counts.get(netloc, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def _hosts_text(counts: dict[str, int], configured: set[str], limit: int = 3) -> tuple[str, str]:
    """("5 on 127.0.0.1:8000, 2 on b.example and 1 more host", advice): the netlocs seen,
    and what would bring them in: --allow-host with their sites (host, and port when not
    the default: a scope is per host and port); for a configured host refused anyway, that it resolves to a private address."""
    shown = list(counts.items())[:limit]
    text = ", ".join(f"{n} on {netloc}" for netloc, n in shown)
    if len(counts) > limit:
        text += f" and {len(counts) - limit} more host" + ("s" if len(counts) - limit > 1 else "")
    hosts = [site for site, _ in shown if site not in configured]
    flags = allow_host_flags(hosts)
    if not flags:
        return text, "(they resolve to private addresses, which a public site's pass does not fetch)"
    return text, "add " + flags


def allow_host_flags(sites: Iterable[str], limit: int = 3) -> str:
    """ "--allow-host a --allow-host b:8080": the flags that bring these sites (host, and port
    when not the default: `refused_by_host`'s keys) into scope, `limit` at most."""
    hosts = [s for s in sites if s != "(no host)"][:limit]
    return " ".join(f"--allow-host {h}" for h in hosts)


def all_out_of_scope(refused: Iterable[str], configured: Iterable[str]) -> str:
    """The one line for a pass whose sitemaps list no URL in scope, only URLs (or child
    sitemaps) of other hosts: a configuration error, typically the site named by another
    name than its sitemap uses (localhost for 127.0.0.1, www. or not). Never a reason to
    purge, so it advises the scope, never --allow-mass-delete."""
    configured = set(configured)
    text, advice = _hosts_text(refused_by_host(refused), configured)
    return (
        f"every URL the sitemaps list is out of scope ({text}; this run's hosts: "
        f"{', '.join(sorted(configured)) or '(none)'}): if that is this site under another name, give "
        f"--sitemap by that name{' or' if advice.startswith('add') else ''} {advice}; no page was fetched or purged"
    )


def some_out_of_scope(refused: Iterable[str], configured: Iterable[str]) -> str:
    """The one warning line for a pass whose sitemaps list some URLs out of scope."""
    configured = set(configured)
    counts = refused_by_host(refused)
    text, advice = _hosts_text(counts, configured)
    n = sum(counts.values())
    return (
        f"warning: skipped {n} sitemap URL{'s' if n != 1 else ''} out of scope ({text}; this run's hosts: "
        f"{', '.join(sorted(configured)) or '(none)'}); "
        + (f"if they are this site's, {advice}" if advice.startswith("add") else advice.strip("()"))
    )
