"""The configuration file and environment, merged below the flags (sync.core.config)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from hypothesis import given, strategies as st

from sync.core.config import (
    FLAG,
    LIST,
    VALUE,
    FileConfig,
    Option,
    SiteConfig,
    SITE_KEYS,
    env_names,
    merge,
    nearest_hint,
    parse_env,
    parse_file,
)
from sync.errors import ConfigError

KNOWN = {
    "collection": VALUE,
    "qdrant_url": VALUE,
    "sitemap": LIST,
    "url": LIST,
    "allow_host": LIST,
    "full": FLAG,
    "workers": VALUE,
    "header": LIST,
    "now": VALUE,
}
OPTIONS = [Option(k, "as_json" if k == "json" else k, kind) for k, kind in KNOWN.items()]


def test_site_config_holds_every_site_key():
    assert set(SiteConfig.__dataclass_fields__) == set(SITE_KEYS)


@pytest.mark.parametrize(
    "doc, values",
    [
        ({"collection": "docs"}, {"collection": "docs"}),
        ({"sitemap": "https://a/s.xml"}, {"sitemap": ["https://a/s.xml"]}),  # a lone string is a list of one
        ({"sitemap": ["https://a/1.xml", "https://a/2.xml"]}, {"sitemap": ["https://a/1.xml", "https://a/2.xml"]}),
        ({"full": True, "workers": 4}, {"full": True, "workers": 4}),
        ({"now": datetime(2026, 1, 1, tzinfo=timezone.utc)}, {"now": "2026-01-01T00:00:00+00:00"}),  # TOML datetime
    ],
)
def test_parse_file_values(doc, values):
    assert parse_file(doc, KNOWN, "p.toml").values == values


@pytest.mark.parametrize(
    "doc, message",
    [
        ({"colection": "x"}, "p.toml: unknown key 'colection' (did you mean 'collection'?)"),
        ({"zzz": 1}, "p.toml: unknown key 'zzz'"),
        ({"sites": [{}]}, "unknown key 'sites' (did you mean 'site'?)"),
        ({"full": "yes"}, "p.toml: full must be true or false"),
        ({"sitemap": [1]}, "p.toml: sitemap must be a string or a list of strings"),
        ({"workers": [1]}, "p.toml: workers must be one value"),
        ({"collection": True}, "p.toml: collection must be one value"),
        (
            {"site": [{"sitemap": "https://a/s.xml", "exlude": ["*/x"]}]},
            "p.toml: [[site]] #1: unknown key 'exlude' (did you mean 'exclude'?)",
        ),
        (
            {"site": [{"sitemap": "https://a/s.xml"}, {"include": ["*"]}]},
            "p.toml: [[site]] #2: a site needs sitemap, crawl or url",
        ),
        ({"site": [{"url": "https://a/", "select": ["main"]}]}, "select must be one value"),
        ({"site": ["https://a/"]}, "[[site]] #1: must be a table"),
    ],
)
def test_parse_file_errors(doc, message):
    with pytest.raises(ConfigError) as exc:
        parse_file(doc, KNOWN, "p.toml")
    assert message in str(exc.value)
    if "unknown" in message and "did you mean" not in message:
        assert "did you mean" not in str(exc.value)


def test_sites_keep_every_per_site_key():
    doc = {
        "site": [
            {
                "sitemap": "https://a/s.xml",
                "allow_host": ["cdn.a"],
                "include": ["*/docs/*"],
                "exclude": ["*/genindex.html"],
                "select": "main article",
                "header": ["Authorization: env:TOKEN"],
            },
            {"crawl": ["https://b/"], "url": "https://b/extra"},
        ]
    }
    cfg = parse_file(doc, KNOWN, "p.toml")
    assert cfg.sites == [
        SiteConfig(
            sitemap=["https://a/s.xml"],
            allow_host=["cdn.a"],
            include=["*/docs/*"],
            exclude=["*/genindex.html"],
            select="main article",
            header=["Authorization: env:TOKEN"],
        ),
        SiteConfig(crawl=["https://b/"], url=["https://b/extra"]),
    ]
    assert cfg.values == {}


@pytest.mark.parametrize(
    "env, expected",
    [
        ({"PAGESYNC_COLLECTION": "docs"}, {"collection": ("docs", "PAGESYNC_COLLECTION")}),
        (
            {"PAGESYNC_SITEMAP": "https://a/1.xml  https://a/2.xml"},
            {"sitemap": (["https://a/1.xml", "https://a/2.xml"], "PAGESYNC_SITEMAP")},
        ),
        ({"PAGESYNC_HEADER": "A: one two\nB: three"}, {"header": (["A: one two", "B: three"], "PAGESYNC_HEADER")}),
        ({"PAGESYNC_FULL": "yes"}, {"full": (True, "PAGESYNC_FULL")}),
        ({"PAGESYNC_FULL": "0"}, {"full": (False, "PAGESYNC_FULL")}),
        ({"QDRANT_URL": "http://q:6333"}, {"qdrant_url": ("http://q:6333", "QDRANT_URL")}),
        (
            {"QDRANT_URL": "http://old", "PAGESYNC_QDRANT_URL": "http://new"},
            {"qdrant_url": ("http://new", "PAGESYNC_QDRANT_URL")},
        ),
        ({"PAGESYNC_STORE_WAIT": "3", "HOME": "/root"}, {}),  # not an option: left to whoever reads it
    ],
)
def test_parse_env(env, expected):
    assert parse_env(env, OPTIONS) == expected


def test_env_flag_that_is_no_boolean_is_named():
    with pytest.raises(ConfigError, match="PAGESYNC_FULL='maybe'"):
        parse_env({"PAGESYNC_FULL": "maybe"}, OPTIONS)


def test_env_names():
    assert env_names("qdrant_path") == ("PAGESYNC_QDRANT_PATH",)
    assert env_names("state") == ("PAGESYNC_STATE",)
    assert env_names("api_key") == ("PAGESYNC_API_KEY", "QDRANT_API_KEY")


def test_merge_leaves_out_keys_the_command_does_not_take():
    file = FileConfig({"collection": "docs", "workers": 4})
    status_options = [Option("collection", "collection", VALUE)]
    assert merge(file, {}, status_options, "p.toml") == {"collection": ("docs", "p.toml: collection")}


def test_sites_in_the_file_replace_the_environments_sources():
    file = FileConfig({}, [SiteConfig(sitemap=["https://a/s.xml"])])
    env = {"sitemap": (["https://env/s.xml"], "PAGESYNC_SITEMAP"), "collection": ("e", "PAGESYNC_COLLECTION")}
    assert merge(file, env, OPTIONS, "p.toml") == {"collection": ("e", "PAGESYNC_COLLECTION")}


def test_nearest_hint():
    assert nearest_hint("qdrant-url", ["qdrant_url", "qdrant_path"]) == " (did you mean 'qdrant_url'?)"
    assert nearest_hint("zzzz", ["collection"]) == ""


keys = st.sampled_from(["collection", "workers", "now", "qdrant_url"])
layer = st.dictionaries(keys, st.text(alphabet="abc", min_size=1, max_size=3), max_size=4)


@given(file=layer, env=layer)
def test_the_file_wins_over_the_environment_key_by_key(file, env):
    env_in = {k: (v, "PAGESYNC_" + k.upper()) for k, v in env.items()}
    merged = merge(FileConfig(dict(file)), env_in, OPTIONS, "p.toml")
    assert set(merged) == set(file) | set(env)
    for k, (value, where) in merged.items():
        if k in file:
            assert (value, where) == (file[k], f"p.toml: {k}")
        else:
            assert (value, where) == (env[k], "PAGESYNC_" + k.upper())


# -- [[site]] tables into the pass ---------------------------------------------------------------
from sync.core.config import site_rules_of, sources  # noqa: E402
from sync.core.site_rules import SiteRules  # noqa: E402


def test_sources_join_the_options_and_every_site_in_order_once():
    sites = [
        SiteConfig(sitemap=["https://a/s.xml"], allow_host=["cdn.a"]),
        SiteConfig(crawl=["https://b/"], url=["https://b/x", "https://a/extra"]),
    ]
    got = sources(sitemap=["https://a/s.xml", "https://c/s.xml"], url=[], crawl=[], allow_host=[], sites=sites)
    assert got.sitemaps == ["https://a/s.xml", "https://c/s.xml"]
    assert got.urls == ["https://b/x", "https://a/extra"] and got.crawl == ["https://b/"]
    assert got.allow_hosts == ["cdn.a"]


def test_site_rules_are_keyed_by_every_site_a_table_names():
    sites = [
        SiteConfig(
            sitemap=["https://docs.a.com/sitemap.xml"],
            allow_host=["cdn.a.com"],
            exclude=["*/genindex.html"],
            select="div.body",
            header=["X-Token: env:TOKEN"],
        ),
        SiteConfig(crawl=["http://b.org:8080/start"], include=["*/guide/*"]),
        SiteConfig(url=["https://plain.example/"]),  # no rules of its own: not listed
        SiteConfig(url=["https://docs.a.com/extra"], exclude=["*/old/*"], select="main"),  # adds up with the first
    ]
    got = dict(site_rules_of(sites, {"TOKEN": "t0k"}))
    assert set(got) == {"docs.a.com", "cdn.a.com", "b.org:8080"}
    assert got["cdn.a.com"] == SiteRules(exclude=("*/genindex.html",), select="div.body", headers=(("X-Token", "t0k"),))
    assert got["docs.a.com"] == SiteRules(
        exclude=("*/genindex.html", "*/old/*"), select="main", headers=(("X-Token", "t0k"),)
    )
    assert got["b.org:8080"] == SiteRules(include=("*/guide/*",))


def test_a_site_header_from_an_unset_variable_is_a_config_error():
    with pytest.raises(ConfigError, match="environment variable TOKEN is not set"):
        site_rules_of([SiteConfig(url=["https://a/"], header=["X-Token: env:TOKEN"])], {})


def test_rule_set_takes_the_rule_keys_and_each_sites_own():
    from sync.core.config import RULE_KEYS, rule_set

    assert set(RULE_KEYS) == {"include", "exclude", "no_default_excludes", "select", "header"}
    got = rule_set(
        {"select": "main", "header": ["X-Token: env:TOKEN"], "exclude": ["*/old/*"], "no_default_excludes": True},
        [SiteConfig(sitemap=["https://a.example/sitemap.xml"], select="div.doc")],
        {"TOKEN": "t0k"},
    )
    assert got.base == SiteRules(
        exclude=("*/old/*",), select="main", headers=(("X-Token", "t0k"),), default_excludes=False
    )
    assert got.rules_for("https://a.example/p").select == "div.doc"
    assert got.rules_for("https://b.example/p").select == "main"
    assert rule_set({}, [], {}).base == SiteRules()  # no keys: the defaults


@pytest.mark.parametrize(
    "doc, shape",
    [
        ({"header": ["Authorization: Bearer s3cretvalue", 5]}, "not an array holding an integer"),
        ({"qdrant_url": ["https://u:s3cretvalue@q/"]}, "not an array"),
        ({"full": "s3cretvalue"}, "not a string"),
        ({"site": [{"url": "https://a/", "header": {"Authorization": "s3cretvalue"}}]}, "not a table"),
        ({"site": ["s3cretvalue"]}, "not a string"),
    ],
)
def test_a_value_of_the_wrong_type_is_named_by_its_kind_never_shown(doc, shape):
    """A mistyped api_key or header still holds a secret: the message says what kind of value it is."""
    with pytest.raises(ConfigError) as exc:
        parse_file(doc, KNOWN, "p.toml")
    assert shape in str(exc.value) and "s3cretvalue" not in str(exc.value)
