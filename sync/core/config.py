"""The configuration file and the `PAGESYNC_*` environment, merged into a command's option values.

Pure: the caller reads the TOML file and the environment and says which options exist
(derived from the command line itself, so a new option is a new key with no change here).
Precedence, highest first: flags, the file, the environment; the command line applies the
flags on top of what `merge` returns. A key is a long option with dashes as underscores
(`--qdrant-url` -> `qdrant_url`); `[[site]]` tables hold the per-site keys (`SITE_KEYS`).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from datetime import date, datetime, time
from typing import Any, Iterable, Mapping

from ..errors import ConfigError
from .scope import _site_of as site_of  # the site (host[:port]) of a URL or an --allow-host value
from .site_rules import SiteRules, SiteRuleSet, parse_header

__all__ = [
    "LIST",
    "FLAG",
    "VALUE",
    "Option",
    "SiteConfig",
    "FileConfig",
    "SITE_KEYS",
    "SITE_TABLE",
    "SOURCE_KEYS",
    "Sources",
    "sources",
    "site_rules_of",
    "RULE_KEYS",
    "rule_options",
    "rule_set",
    "ENV_PREFIX",
    "ENV_ALIASES",
    "LINE_LISTS",
    "env_names",
    "parse_file",
    "parse_env",
    "merge",
    "nearest_hint",
]

LIST, FLAG, VALUE = "list", "flag", "value"  # repeatable option, on/off flag, one value

ENV_PREFIX = "PAGESYNC_"
# Names older than the file, still read (below PAGESYNC_<KEY> when both are set).
ENV_ALIASES: dict[str, tuple[str, ...]] = {"qdrant_url": ("QDRANT_URL",), "api_key": ("QDRANT_API_KEY",)}
# Lists whose items may hold spaces: one item per line in the environment (others split on whitespace).
LINE_LISTS = frozenset({"header"})
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off", "")

SITE_TABLE = "site"
# The per-site keys of a [[site]] table and their kinds.
SITE_KEYS: dict[str, str] = {
    "sitemap": LIST,
    "crawl": LIST,
    "url": LIST,
    "allow_host": LIST,
    "include": LIST,
    "exclude": LIST,
    "select": VALUE,
    "header": LIST,
}
# The keys that say where a site's pages come from: a [[site]] needs one.
SOURCE_KEYS = ("sitemap", "crawl", "url")
# The top-level keys of the site rules (run's --include, --exclude, --no-default-excludes,
# --select, --header), with their kinds: the commands that repair or rebuild pages (audit
# --fix, reindex) read them from the file and the environment as run does.
RULE_KEYS: dict[str, str] = {
    "include": LIST,
    "exclude": LIST,
    "no_default_excludes": FLAG,
    "select": VALUE,
    "header": LIST,
}


@dataclass(frozen=True)
class Option:
    """One option a command takes: its file key, its parameter name, its kind."""

    key: str  # the long option, dashes as underscores: "qdrant_url"
    name: str  # the command's parameter name: "as_json" for --json
    kind: str  # LIST, FLAG or VALUE


@dataclass(frozen=True)
class SiteConfig:
    """One `[[site]]` table: where its pages come from and the rules for them."""

    sitemap: list[str] = field(default_factory=list)
    crawl: list[str] = field(default_factory=list)
    url: list[str] = field(default_factory=list)
    allow_host: list[str] = field(default_factory=list)
    include: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)
    select: str | None = None
    header: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class FileConfig:
    """A parsed configuration file: its top-level keys (checked, normalised) and its sites."""

    values: dict[str, Any] = field(default_factory=dict)
    sites: list[SiteConfig] = field(default_factory=list)


def nearest_hint(key: str, known: Iterable[str]) -> str:
    """` (did you mean 'x'?)` for the nearest known key, or nothing when none is near."""
    near = difflib.get_close_matches(key, sorted(known), n=1)
    return f" (did you mean {near[0]!r}?)" if near else ""


def _unknown(key: str, known: Iterable[str], where: str) -> ConfigError:
    return ConfigError(f"{where}: unknown key {key!r}{nearest_hint(key, known)}")


_TOML_TYPES = (
    (bool, "a boolean"),
    (str, "a string"),
    (int, "an integer"),
    (float, "a float"),
    (list, "an array"),
    (dict, "a table"),
)


def _shape(value: Any) -> str:
    """What kind of TOML value `value` is ("an array holding an integer"), never the value
    itself: a wrongly typed `api_key` or `header` holds a secret all the same."""
    kind = next((name for t, name in _TOML_TYPES if isinstance(value, t)), "a date or time")
    if isinstance(value, list):
        odd = next((i for i in value if not isinstance(i, str)), None)
        return f"{kind} holding {_shape(odd)}" if odd is not None else kind
    return kind


def _coerce(key: str, kind: str, value: Any, where: str) -> Any:
    """A file value as the option takes it: a list of strings (a lone string is a list of
    one), a boolean, or one scalar (a TOML date or time as ISO 8601 text). A wrong one is
    named by its kind, not shown (`_shape`)."""
    if kind == LIST:
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
            raise ConfigError(f"{where}: {key} must be a string or a list of strings, not {_shape(value)}")
        return list(items)
    if kind == FLAG:
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: {key} must be true or false, not {_shape(value)}")
        return value
    if isinstance(value, (datetime, date, time)):
        return value.isoformat()
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ConfigError(f"{where}: {key} must be one value (a string or a number), not {_shape(value)}")
    return value


def _site(table: Any, where: str) -> SiteConfig:
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: must be a table ([[{SITE_TABLE}]]), not {_shape(table)}")
    values = {}
    for key, value in table.items():
        if key not in SITE_KEYS:
            raise _unknown(key, SITE_KEYS, where)
        values[key] = _coerce(key, SITE_KEYS[key], value, where)
    if not any(values.get(k) for k in SOURCE_KEYS):
        raise ConfigError(f"{where}: a site needs sitemap, crawl or url")
    return SiteConfig(**values)


def parse_file(doc: Mapping[str, Any], known: Mapping[str, str], source: str) -> FileConfig:
    """Check a TOML document against the known top-level keys (key -> kind, every command's
    options) and the site keys; `ConfigError` naming `source`, the key and the nearest
    known key for anything unknown or of the wrong type."""
    values: dict[str, Any] = {}
    sites: list[SiteConfig] = []
    for key, value in doc.items():
        if key == SITE_TABLE:
            tables = value if isinstance(value, list) else [value]
            sites += [_site(t, f"{source}: [[{SITE_TABLE}]] #{i + 1}") for i, t in enumerate(tables)]
        elif key in known:
            values[key] = _coerce(key, known[key], value, source)
        else:
            raise _unknown(key, [*known, SITE_TABLE], source)
    return FileConfig(values, sites)


def env_names(key: str) -> tuple[str, ...]:
    """The environment variables an option is read from, first found wins."""
    return (ENV_PREFIX + key.upper(), *ENV_ALIASES.get(key, ()))


def _env_value(key: str, kind: str, raw: str, var: str) -> Any:
    if kind == LIST:
        return [s.strip() for s in raw.splitlines() if s.strip()] if key in LINE_LISTS else raw.split()
    if kind == FLAG:
        text = raw.strip().lower()
        if text not in _TRUE + _FALSE:
            raise ConfigError(f"{var}={raw!r}: expected 1/true/yes/on or 0/false/no/off")
        return text in _TRUE
    return raw


def parse_env(env: Mapping[str, str], options: Iterable[Option]) -> dict[str, tuple[Any, str]]:
    """The options the environment sets: key -> (value, the variable it came from)."""
    out: dict[str, tuple[Any, str]] = {}
    for opt in options:
        for var in env_names(opt.key):
            if var in env:
                out[opt.key] = (_env_value(opt.key, opt.kind, env[var], var), var)
                break
    return out


def merge(
    file: FileConfig, env: Mapping[str, tuple[Any, str]], options: Iterable[Option], source: str
) -> dict[str, tuple[Any, str]]:
    """The values of one command's options below its flags: key -> (value, where it came
    from). The file wins over the environment key by key; a file with `[[site]]` tables
    says where pages come from, so the environment's sitemap/url/crawl are dropped then.
    Keys of the file that this command does not take are left out (a run-only key in the
    file `status` reads)."""
    keys = {o.key for o in options}
    out = {k: v for k, v in env.items() if k in keys and not (file.sites and k in SOURCE_KEYS)}
    out.update({k: (v, f"{source}: {k}") for k, v in file.values.items() if k in keys})
    return out


@dataclass(frozen=True)
class Sources:
    """Where a pass's pages come from: the options' values joined with every site's."""

    sitemaps: list[str]
    urls: list[str]
    crawl: list[str]
    allow_hosts: list[str]


def sources(
    *, sitemap: list[str], url: list[str], crawl: list[str], allow_host: list[str], sites: list[SiteConfig]
) -> Sources:
    """The options' sitemaps, pages, crawl starts and allowed hosts, then each site's, in
    order, each once."""

    def joined(own: list[str], key: str) -> list[str]:
        return list(dict.fromkeys([*own, *(v for site in sites for v in getattr(site, key))]))

    return Sources(
        joined(sitemap, "sitemap"), joined(url, "url"), joined(crawl, "crawl"), joined(allow_host, "allow_host")
    )


def site_rules_of(sites: list[SiteConfig], environ: Mapping[str, str]) -> tuple[tuple[str, SiteRules], ...]:
    """Each `[[site]]`'s own rules (include, exclude, select, header), keyed by every site
    (host, and port when not the default) its sitemap, url, crawl and allow_host name, as
    `SiteRuleSet.sites` takes them. Two tables naming one site: their rules add up (the
    later one's selector and same-named headers win). Header values `env:VAR` are read
    from `environ`."""
    out: dict[str, SiteRules] = {}
    for site in sites:
        if not (site.include or site.exclude or site.select is not None or site.header):
            continue
        rules = SiteRules(
            include=tuple(site.include),
            exclude=tuple(site.exclude),
            select=site.select,
            headers=tuple(parse_header(h, environ) for h in site.header),
        )
        for value in [*site.sitemap, *site.url, *site.crawl, *site.allow_host]:
            key = site_of(value)
            if key:
                out[key] = out[key].merged(rules) if key in out else rules
    return tuple(out.items())


def rule_options() -> list[Option]:
    """The site-rule keys as options (their parameter names are the keys), for `parse_env`
    and `merge` by a command that has no flags of its own for them."""
    return [Option(k, k, kind) for k, kind in RULE_KEYS.items()]


def rule_set(values: Mapping[str, Any], sites: list[SiteConfig], environ: Mapping[str, str]) -> SiteRuleSet:
    """The site rules of a pass, a repair or a reindex: the global ones from the rule keys'
    `values` (`RULE_KEYS`; a missing one at its default: no globs, the default excludes on,
    no selector, no header) and each `[[site]]` table's own (`site_rules_of`). Header values
    `env:VAR` are read from `environ` (`ConfigError` naming a variable not set)."""
    base = SiteRules(
        include=tuple(values.get("include") or ()),
        exclude=tuple(values.get("exclude") or ()),
        select=values.get("select"),
        headers=tuple(parse_header(h, environ) for h in values.get("header") or ()),
        default_excludes=not values.get("no_default_excludes", False),
    )
    return SiteRuleSet(base, sites=site_rules_of(sites, environ))
