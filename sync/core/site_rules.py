"""Per-site rules: which pages are wanted, which element is content, which headers go along.

A pass has one `SiteRuleSet`: the global `SiteRules` (the command line's --include,
--exclude, --select, --header) and, optionally, rules of their own for some sites (a
config file's `[[site]]` tables), keyed by site (`scope.site_key`: host, and port when not
the default). `rules_for(url)` merges the two for a URL's site: globs and headers of both
(a site's header replaces a global one of the same name), the site's selector over the
global one, default excludes only when neither turned them off.

Globs are shell-style (`fnmatch`, case-sensitive) on the canonical URL; `*` crosses `/`, so
`*/genindex.html` matches that page in every directory. An exclude wins over an include.
Pure: no I/O; the environment a header value is read from is passed in.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Callable, Mapping
from urllib.parse import urlsplit

from ..errors import ConfigError
from .hashing import pipeline_fingerprint
from .scope import site_key

__all__ = [
    "SiteRules",
    "SiteRuleSet",
    "DEFAULT_EXCLUDES",
    "SEARCH_PAGES",
    "generator_search_page",
    "may_be_search_page",
    "url_wanted",
    "unwanted_reason",
    "parse_header",
    "extractor_variant",
    "page_fingerprint",
    "headers_in_scope",
]

# The non-content pages documentation generators write: index, search and 404 pages, and
# copies of the sources. Each was seen in a real build (Sphinx 8 html and dirhtml with
# viewcode and sphinx-sitemap, MkDocs 1.6 mkdocs and readthedocs themes) or, for
# Docusaurus, is a route its classic preset generates. Matched like --exclude globs.
DEFAULT_EXCLUDES: tuple[tuple[str, str], ...] = (
    # Sphinx: the general and module indexes, the search page (html builder; the dirhtml
    # builder's `search/` is told by its markup: `SEARCH_PAGES`), highlighted module sources
    # (viewcode) and the reST sources.
    ("*/genindex.html", "Sphinx"),
    ("*/genindex/", "Sphinx"),
    ("*/py-modindex.html", "Sphinx"),
    ("*/py-modindex/", "Sphinx"),
    ("*/search.html", "Sphinx, MkDocs"),
    ("*/_modules/*", "Sphinx"),
    ("*/_sources/*", "Sphinx"),
    # The 404 page (MkDocs always, Sphinx with sphinx-notfound-page, Docusaurus).
    ("*/404.html", "MkDocs, Sphinx, Docusaurus"),
    ("*/404/", "Sphinx, Docusaurus"),
    # Docusaurus: tag indexes, the blog's archive and its list pages.
    ("*/docs/tags", "Docusaurus"),
    ("*/docs/tags/*", "Docusaurus"),
    ("*/blog/tags", "Docusaurus"),
    ("*/blog/tags/*", "Docusaurus"),
    ("*/blog/archive", "Docusaurus"),
    ("*/blog/archive/", "Docusaurus"),
    ("*/blog/page/*", "Docusaurus"),
)

# A docs generator's search page at a URL a real page may have as well (`.../search/`, the
# Sphinx dirhtml builder's; `.../search`, Docusaurus'): told apart once fetched, by markup
# only the generator's search page carries (`generator_search_page`), never by the URL alone,
# so a page of the site named "search" (a command, an API endpoint) is indexed.
SEARCH_PAGES: tuple[tuple[bytes, str], ...] = (
    (b"_static/searchtools.js", "Sphinx"),  # the search script, which only the search page loads
    (b"search-page-wrapper", "Docusaurus"),  # the search page's layout class (theme-search-algolia)
)


def may_be_search_page(url: str) -> bool:
    """`url` is where a docs tool puts its search page: its last path segment is `search`.
    Such a page is read whole (no conditional GET): only its markup tells."""
    if "search" not in url:  # (asked of every page a pass visits: most are no search page)
        return False
    try:
        path = urlsplit(url).path
    except ValueError:
        return False
    return path.endswith(("/search", "/search/", "/search/index.html"))


def generator_search_page(url: str, body: bytes) -> str | None:
    """The docs tool whose own search page `url` is, judged by its `body` (`SEARCH_PAGES`), or
    None (`may_be_search_page` says where one may be)."""
    if not may_be_search_page(url):
        return None
    return next((tool for marker, tool in SEARCH_PAGES if marker in body), None)


# RFC 9110 field-name: a token.
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
# A header value pagesync sends: printable ASCII, spaces and tabs inside (tokens, base64, cookies).
_VALUE = re.compile(r"[\x21-\x7e](?:[\x20-\x7e\t]*[\x21-\x7e])?")


@dataclass(frozen=True)
class SiteRules:
    """The rules of one site, or the global ones. `headers` are (name, value) pairs with
    their values resolved (`parse_header`); they are left out of the repr, so a logged or
    printed config never shows a secret."""

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    select: str | None = None
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    default_excludes: bool = True

    def merged(self, site: "SiteRules") -> "SiteRules":
        """These (global) rules with a site's own on top."""
        names = {n.lower() for n, _ in site.headers}
        return SiteRules(
            include=(*self.include, *site.include),
            exclude=(*self.exclude, *site.exclude),
            select=site.select if site.select is not None else self.select,
            headers=(*((n, v) for n, v in self.headers if n.lower() not in names), *site.headers),
            default_excludes=self.default_excludes and site.default_excludes,
        )


def _site_of(url: str) -> str:
    """The site of `url` as `scope.site_key` gives it ("" for a URL without a host)."""
    try:
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port
    except ValueError:
        return ""
    return site_key(parts.scheme, host, port) if host else ""


@dataclass(frozen=True)
class SiteRuleSet:
    """The global rules and those of particular sites (site_key -> rules)."""

    base: SiteRules = SiteRules()
    sites: tuple[tuple[str, SiteRules], ...] = ()

    def rules_for(self, url: str) -> SiteRules:
        """The rules that apply to `url`: the base ones, merged with its site's when it has some."""
        if not self.sites:
            return self.base
        own = dict(self.sites).get(_site_of(url))
        return self.base if own is None else self.base.merged(own)

    @property
    def selectors(self) -> tuple[str, ...]:
        """Every selector named anywhere (checked once, before a pass starts)."""
        found = [self.base.select, *(r.select for _, r in self.sites)]
        return tuple(s for s in found if s is not None)


def unwanted_reason(url: str, rules: SiteRules) -> str | None:
    """Why `url` is not wanted under `rules` (an exclude or a default exclude it matches,
    or no include it matches), or None when it is wanted."""
    for pattern in rules.exclude:
        if fnmatchcase(url, pattern):
            return f"excluded by --exclude {pattern}"
    if rules.default_excludes:
        for pattern, tool in DEFAULT_EXCLUDES:
            if fnmatchcase(url, pattern):
                return f"excluded by default ({tool}: {pattern}; --no-default-excludes keeps it)"
    if rules.include and not any(fnmatchcase(url, p) for p in rules.include):
        return "matches no --include"
    return None


def url_wanted(url: str, rules: SiteRules) -> bool:
    """True when `url` (canonical) may be fetched and indexed under `rules`."""
    return unwanted_reason(url, rules) is None


def parse_header(text: str, environ: Mapping[str, str]) -> tuple[str, str]:
    """`"Name: value"` as (name, value); a value `env:VAR` is `environ[VAR]`.

    `ConfigError` for a malformed header or a variable not set; its message names the
    header and the variable, never a value (a secret must not reach a log or a terminal)."""
    name, colon, value = text.partition(":")
    name, value = name.strip(), value.strip()
    if not colon or not _TOKEN.fullmatch(name):
        shown = name if _TOKEN.fullmatch(name) else "(the part before the colon)"
        raise ConfigError(f'--header {shown}: expected "Name: value" (a header name, a colon, its value)')
    if value.startswith("env:"):
        var = value[4:].strip()
        if not var:
            raise ConfigError(f"--header {name}: env: names no environment variable")
        if var not in environ:
            raise ConfigError(f"--header {name}: environment variable {var} is not set")
        value = environ[var].strip()
    if not value or not _VALUE.fullmatch(value):
        # Said without the value: an HTTP library refusing it would quote it in its error.
        raise ConfigError(
            f"--header {name}: the value is empty or holds a line break, a control character or a non-ASCII character"
        )
    return name, value


def extractor_variant(select: str | None) -> str:
    """What a selector adds to the extractor's id in the pipeline fingerprint: "" without
    one (today's pages keep their fingerprint), else the selector, so that a page extracted
    under another selector is read and extracted again (its unchanged texts keep their vectors)."""
    return "" if select is None else f"+select={select}"


def page_fingerprint(embedder_id: str, extractor_id: str, splitter_settings: str, select: str | None) -> str:
    """The pipeline fingerprint of a page extracted with `select` (its site's selector or
    None), chunked with `splitter_settings` and embedded by `embedder_id`: what a pass
    records for the page and compares with, and what a reindex leaves behind, so that a
    pass after it under the same rules reads nothing again."""
    return pipeline_fingerprint(embedder_id, f"{extractor_id}{extractor_variant(select)}/{splitter_settings}")


def headers_in_scope(
    rules: SiteRuleSet,
    url: str,
    scope_check: Callable[[str], str | None],
    plain_http_ok: Callable[[str], bool] = lambda url: False,
) -> dict[str, str]:
    """The --header fields a request to `url` carries: its site's (`rules_for`), and only
    when `url` is in scope (`scope_check(url)` is None: one of the sites being synced),
    never for a host a redirect leads off to; over plain http only when `plain_http_ok(url)`
    (`Scope.plain_http_ok`: a site named only over http), never to an https site's http URLs."""
    rules_ = rules.rules_for(url)
    if not rules_.headers or scope_check(url) is not None:
        return {}
    if not url[:6].lower().startswith("https:") and not plain_http_ok(url):
        return {}
    return dict(rules_.headers)
