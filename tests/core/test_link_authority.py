"""Which crawled answers may replace a page's kept links (`sync.core.link_authority`)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sync.core.link_authority import CrawlAnswer, held_reason, lost_links
from sync.core.links import PageLinks, read_links

URL = "https://h/docs/hub.html"
PREFIXES = ["https://h/docs/"]
OLD = PageLinks(tuple(f"https://h/docs/p{i}.html" for i in range(4)))
HUB = (
    "<html><body><p>"
    + "The hub of the guide's section, with every page of it. " * 5
    + "</p>"
    + "".join(f"<a href='p{i}.html'>p{i}</a>" for i in range(4))
    + "</body></html>"
).encode()


def html(body: bytes, final: str | None = None) -> CrawlAnswer:
    return CrawlAnswer(URL, "html", 200, "text/html", body, final, read_links(body, final or URL))


CASES = [
    ("maintenance stub", html(b"<html><body><p>We are down for maintenance.</p></body></html>"), "links nothing"),
    ("empty 200", html(b""), "links nothing"),
    (
        "js shell",
        html(b"<html><head><script src='a.js'></script></head><body><div id=root></div></body></html>"),
        "links nothing",
    ),
    (
        "noindex,nofollow",
        html(b"<html><head><meta name=robots content='noindex,nofollow'></head><body>x</body></html>"),
        "nofollow",
    ),
    ("cut short", html(HUB[: HUB.index(b"p2.html") - 9]), "cut short"),
    ("text/plain", CrawlAnswer(URL, "other", 200, "text/plain"), "not HTML"),
    ("too big", CrawlAnswer(URL, "skipped", 200), "skipped"),
    ("first 404", CrawlAnswer(URL, "gone", 404), "first time"),
    (
        "login redirect",
        html(b"<html><body><form></form><a href='/'>home</a></body></html>", "https://h/login"),
        "redirected out of the crawl",
    ),
    ("off-site base", html(HUB.replace(b"<body>", b"<head><base href='https://x.example/'></head><body>")), "off-site"),
    ("stub with one link", html(b"<html><body><p>Down for now.</p><a href='p0.html'>p0</a></body></html>"), "stub"),
]


@pytest.mark.parametrize("name,answer,why", CASES, ids=[c[0] for c in CASES])
def test_an_answer_that_is_no_evidence_keeps_the_links(name, answer, why):
    reason = held_reason(answer, OLD, PREFIXES)
    assert reason is not None and why in reason, reason


TAKEN = [
    ("the same hub", html(HUB)),
    ("a hub that dropped one link", html(HUB.replace(b"<a href='p3.html'>p3</a>", b""))),
    ("a second 404", CrawlAnswer(URL, "gone", 404, was_gone=True)),
    ("a redirect within the crawl", html(HUB, "https://h/docs/hub/index.html")),
]


@pytest.mark.parametrize("name,answer", TAKEN, ids=[c[0] for c in TAKEN])
def test_a_healthy_answer_replaces_the_links(name, answer):
    assert held_reason(answer, OLD, PREFIXES) is None


def test_a_page_with_no_kept_links_takes_any_answer():
    for _, answer, _ in CASES:
        assert held_reason(answer, None, PREFIXES) is None
        assert held_reason(answer, PageLinks(), PREFIXES) is None


@given(st.lists(st.integers(0, 9), unique=True), st.lists(st.integers(0, 9), unique=True))
def test_lost_links_are_the_old_ones_the_new_read_lacks(old, new):
    o = PageLinks(tuple(f"u{i}" for i in old))
    n = PageLinks(tuple(f"u{i}" for i in new))
    assert lost_links(o, n) == [f"u{i}" for i in old if i not in new]
    answer = CrawlAnswer(URL, "html", 200, "text/html", b"</html>", None, n)
    if not lost_links(o, n):
        assert held_reason(answer, o, PREFIXES) is None  # an answer that loses nothing is always taken
