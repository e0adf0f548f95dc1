"""Site rules: which URLs are wanted, how global and per-site rules merge, header parsing."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from sync.core.site_rules import (
    DEFAULT_EXCLUDES,
    SiteRules,
    SiteRuleSet,
    extractor_variant,
    generator_search_page,
    parse_header,
    unwanted_reason,
    url_wanted,
)
from sync.errors import ConfigError

BASE = "https://docs.example.com/en/latest"


@pytest.mark.parametrize(
    "url, rules, wanted",
    [
        (f"{BASE}/guide.html", SiteRules(), True),
        (f"{BASE}/genindex.html", SiteRules(), False),
        (f"{BASE}/genindex.html", SiteRules(default_excludes=False), True),
        (f"{BASE}/api/search.html", SiteRules(), False),
        (f"{BASE}/search/", SiteRules(), True),  # a search page is told by its markup once fetched
        (f"{BASE}/py-modindex.html", SiteRules(), False),
        (f"{BASE}/_modules/json.html", SiteRules(), False),
        (f"{BASE}/_sources/index.rst.txt", SiteRules(), False),
        ("https://docs.example.com/404.html", SiteRules(), False),
        ("https://docs.example.com/docs/tags/api", SiteRules(), False),
        ("https://docs.example.com/blog/tags", SiteRules(), False),
        ("https://docs.example.com/commands/search/", SiteRules(), True),  # a page named "search"
        ("https://docs.example.com/docs/searching", SiteRules(), True),
        ("https://docs.example.com/research.html", SiteRules(), True),
        (f"{BASE}/changelog/1.0.html", SiteRules(exclude=("*/changelog/*",)), False),
        (f"{BASE}/guide.html", SiteRules(exclude=("*/changelog/*",)), True),
        (f"{BASE}/guide.html", SiteRules(include=(f"{BASE}/api/*",)), False),
        (f"{BASE}/api/x.html", SiteRules(include=(f"{BASE}/api/*",)), True),
        # an exclude wins over an include
        (f"{BASE}/api/x.html", SiteRules(include=("*/api/*",), exclude=("*/x.html",)), False),
        # a default exclude wins over an include as well
        (f"{BASE}/api/genindex.html", SiteRules(include=("*/api/*",)), False),
        # globs are case-sensitive, on the URL as given
        (f"{BASE}/Guide.html", SiteRules(exclude=("*/guide.html",)), True),
        (f"{BASE}/a.html?x=1", SiteRules(exclude=("*?x=*",)), False),
    ],
)
def test_url_wanted(url, rules, wanted):
    assert url_wanted(url, rules) is wanted
    assert (unwanted_reason(url, rules) is None) is wanted


def test_reasons_say_which_rule():
    assert unwanted_reason("https://a.example/x/b.html", SiteRules(exclude=("*/x/*",))) == "excluded by --exclude */x/*"
    assert unwanted_reason("https://a.example/b.html", SiteRules(include=("*/x/*",))) == "matches no --include"
    why = unwanted_reason("https://a.example/genindex.html", SiteRules())
    assert why.startswith("excluded by default (Sphinx") and "--no-default-excludes" in why


def test_every_default_exclude_names_its_generator():
    assert all(tool and pattern.startswith("*/") for pattern, tool in DEFAULT_EXCLUDES)


def test_rules_for_merges_a_site_over_the_base():
    base = SiteRules(exclude=("*/old/*",), headers=(("X-Token", "a"), ("X-Other", "o")), select="main")
    own = SiteRules(
        include=("*/docs/*",),
        exclude=("*/draft/*",),
        headers=(("x-token", "b"),),
        select="div.doc",
        default_excludes=False,
    )
    rs = SiteRuleSet(
        base,
        sites=(
            ("docs.example.com", own),
            ("b.example:8080", SiteRules(select="article")),
        ),
    )
    got = rs.rules_for("https://docs.example.com/docs/a.html")
    assert got.include == ("*/docs/*",) and got.exclude == ("*/old/*", "*/draft/*")
    assert got.select == "div.doc" and got.default_excludes is False
    assert dict(got.headers) == {"X-Other": "o", "x-token": "b"}  # a site's header replaces the same name
    assert rs.rules_for("https://other.example/a") == base
    assert rs.rules_for("http://b.example:8080/a").select == "article"
    assert rs.rules_for("http://b.example/a") == base  # another port is another site
    assert rs.rules_for("not a url") == base
    assert set(rs.selectors) == {"main", "div.doc", "article"}


def test_a_site_without_a_selector_keeps_the_global_one():
    rs = SiteRuleSet(SiteRules(select="main"), sites=(("a.example", SiteRules(exclude=("*x",))),))
    assert rs.rules_for("https://a.example/").select == "main"


def test_header_values_stay_out_of_the_repr():
    rules = SiteRules(headers=(("Authorization", "Bearer s3cret"),))
    assert "s3cret" not in repr(rules) and "s3cret" not in repr(SiteRuleSet(rules))


@pytest.mark.parametrize(
    "text, env, expected",
    [
        ("X-Token: abc", {}, ("X-Token", "abc")),
        ("Authorization:  Bearer abc def ", {}, ("Authorization", "Bearer abc def")),
        ("Authorization: env:DOCS_TOKEN", {"DOCS_TOKEN": "Bearer zz"}, ("Authorization", "Bearer zz")),
        ("X-A: a:b:c", {}, ("X-A", "a:b:c")),
    ],
)
def test_parse_header(text, env, expected):
    assert parse_header(text, env) == expected


@pytest.mark.parametrize(
    "text, env, message",
    [
        ("Authorization: env:DOCS_TOKEN", {}, "--header Authorization: environment variable DOCS_TOKEN is not set"),
        ("no colon here", {}, 'expected "Name: value"'),
        ("Bad Name: v", {}, 'expected "Name: value"'),
        ("X-A:", {}, "--header X-A: the value is empty"),
        ("X-A: env:", {}, "env: names no environment variable"),
        ("X-A: env:V", {"V": "a\r\nEvil: 1"}, "holds a line break"),
        ("X-A: env:V", {"V": "Bearer \x01x"}, "a control character"),
        ("X-A: env:V", {"V": "Bearer caf\u00e9"}, "a non-ASCII character"),
    ],
)
def test_parse_header_errors_never_show_a_value(text, env, message):
    with pytest.raises(ConfigError) as exc:
        parse_header(text, env)
    assert message in str(exc.value)
    for secret in ("a\r\nEvil", "Bearer"):
        assert secret not in str(exc.value)


def test_extractor_variant():
    assert extractor_variant(None) == ""
    assert extractor_variant("div.body") != extractor_variant("div.document") != ""


_SEG = st.text(alphabet="abcdefghij-_.", min_size=1, max_size=8)
_URLS = st.lists(_SEG, min_size=1, max_size=4).map(lambda parts: "https://h.example/" + "/".join(parts))


@given(
    _URLS,
    st.lists(_SEG.map(lambda s: f"*{s}*"), max_size=3),
    st.lists(_SEG.map(lambda s: f"*{s}*"), max_size=3),
    st.booleans(),
)
def test_rules_only_narrow(url, inc, exc, defaults):
    """Includes and excludes only take URLs away (a URL they want, no rules want too), an
    exclude of everything wants nothing, and turning the default excludes off only adds."""
    rules = SiteRules(include=tuple(inc), exclude=tuple(exc), default_excludes=defaults)
    wanted = url_wanted(url, rules)
    if wanted:
        assert url_wanted(url, SiteRules(default_excludes=defaults))
        assert url_wanted(url, SiteRules(include=tuple(inc), exclude=tuple(exc), default_excludes=False))
    assert not url_wanted(url, SiteRules(include=tuple(inc), exclude=(*exc, "*"), default_excludes=defaults))


@given(_URLS, st.lists(_SEG.map(lambda s: f"*{s}*"), max_size=3), st.lists(_SEG.map(lambda s: f"*{s}*"), max_size=3))
def test_merging_with_empty_rules_changes_nothing(url, inc, exc):
    rules = SiteRules(include=tuple(inc), exclude=tuple(exc))
    assert rules.merged(SiteRules()) == rules
    assert url_wanted(url, SiteRules().merged(rules)) == url_wanted(url, rules)


@given(st.text(max_size=40).map(lambda t: "zQ9" + t))
def test_an_env_header_value_is_sent_as_is_or_refused_without_being_shown(secret):
    try:
        name, value = parse_header("Authorization: env:TOKEN", {"TOKEN": secret})
    except ConfigError as exc:
        assert "zQ9" not in str(exc)
    else:
        assert (name, value) == ("Authorization", secret.strip())
        assert value.isascii() and value.isprintable()


def test_a_page_fingerprint_without_a_selector_is_the_pipeline_fingerprint_and_names_the_selector():
    from sync.core.hashing import pipeline_fingerprint
    from sync.core.site_rules import page_fingerprint

    assert page_fingerprint("m", "x1", "s", None) == pipeline_fingerprint("m", "x1/s")
    assert page_fingerprint("m", "x1", "s", "main") == pipeline_fingerprint("m", f"x1{extractor_variant('main')}/s")
    assert len({page_fingerprint("m", "x1", "s", css) for css in (None, "main", "div.doc")}) == 3


@pytest.mark.parametrize(
    "url, in_scope, expected",
    [
        ("https://a.example/p", True, {"Authorization": "A-own", "X-All": "1"}),
        ("https://b.example/p", True, {"Authorization": "global", "X-All": "1"}),
        ("https://b.example/p", False, {}),  # a host off the sites (a redirect's): nothing
    ],
)
def test_headers_go_to_in_scope_hosts_only_a_sites_own_over_the_global_ones(url, in_scope, expected):
    from sync.core.site_rules import headers_in_scope

    rules = SiteRuleSet(
        SiteRules(headers=(("Authorization", "global"), ("X-All", "1"))),
        sites=(("a.example", SiteRules(headers=(("authorization", "A-own"),))),),
    )
    got = headers_in_scope(rules, url, lambda u: None if in_scope else "out of scope")
    assert {k.lower(): v for k, v in got.items()} == {k.lower(): v for k, v in expected.items()}


SPHINX_SEARCH = b'<html><head><script src="../_static/searchtools.js"></script></head><body><div id="search-results"></div></body></html>'
DOCUSAURUS_SEARCH = (
    b'<html><body><div class="main-wrapper search-page-wrapper"><h1>Search the documentation</h1></div></body></html>'
)


@pytest.mark.parametrize(
    "url, body, tool",
    [
        ("https://click.example/search/", SPHINX_SEARCH, "Sphinx"),  # the dirhtml builder's
        ("https://click.example/en/latest/search/index.html", SPHINX_SEARCH, "Sphinx"),
        ("https://docs.example.com/search", DOCUSAURUS_SEARCH, "Docusaurus"),
        ("https://docs.example.com/search/", DOCUSAURUS_SEARCH, "Docusaurus"),  # trailingSlash: true
        # a page of the site named "search": no generator's markup
        ("https://docs.example.com/commands/search/", b"<html><body><h1>pagesync search</h1></body></html>", None),
        ("https://api.example.com/api/search", b"<html><body><p>GET /search?q=</p></body></html>", None),
        # the markup at another URL is no search page (a page about Sphinx may name the script)
        ("https://docs.example.com/guide/", SPHINX_SEARCH, None),
        ("https://docs.example.com/research/", SPHINX_SEARCH, None),
    ],
)
def test_a_generators_search_page_is_told_by_its_markup(url, body, tool):
    assert generator_search_page(url, body) == tool
