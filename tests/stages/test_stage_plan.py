"""The plan stage alone, with plain inputs: the chunk budget and the emptied-sitemap judgement."""

from __future__ import annotations

import pytest

from sync.core.planning import emptied_sitemap_errors, within_budget
from sync.edges.state import PageState

A, B = "https://a.test/sitemap.xml", "https://b.test/sitemap.xml"


def pages(*chunks: int) -> list[PageState]:
    return [PageState(url=f"https://a.test/p{i}", chunk_count=n) for i, n in enumerate(chunks)]


@pytest.mark.parametrize(
    "chunks, budget, urls, left, over",
    [
        ((), 10, [], 10, 0),
        ((3, 3), 10, [0, 1], 4, 0),
        ((3, 8, 2), 6, [0, 2], 1, 1),  # a page too large is passed over, smaller ones after it fit
        ((0, 0), 1, [0], 0, 1),  # a page with no recorded chunk still costs one
        ((5,), 5, [0], 0, 0),
    ],
)
def test_within_budget(chunks, budget, urls, left, over):
    got, budget_left, passed_over = within_budget(pages(*chunks), budget)
    assert got == [f"https://a.test/p{i}" for i in urls]
    assert (budget_left, passed_over) == (left, over)


BEFORE = {"https://a.test/x": None, "https://b.test/y": None}


@pytest.mark.parametrize(
    "sitemaps, complete, entries, before, refused, where, says",
    [
        ((), True, {}, BEFORE, [], None, None),  # no sitemap: --url only
        ((A,), False, {}, BEFORE, [], None, None),  # a failed read is an error already
        ((A,), True, {}, {}, [], None, None),  # nothing tracked: nothing to lose
        ((A,), True, {}, BEFORE, [], A, "sitemap(s) listed no URLs"),
        ((A, B), True, {"https://a.test/x": None}, BEFORE, [], "b.test", "no URLs of this site any more; nothing"),
        ((A, B), True, {"https://a.test/x": None}, BEFORE, ["https://c.test/y"], "b.test", "--allow-host c.test"),
        ((A, B), True, {"https://a.test/x": None, "https://b.test/z": None}, BEFORE, [], None, None),
        ((A,), True, {"https://a.test/x": None}, BEFORE, [], None, None),  # b.test is no configured site
    ],
)
def test_emptied_sitemap_errors(sitemaps, complete, entries, before, refused, where, says):
    errors = emptied_sitemap_errors(sitemaps, complete, entries, before, refused)
    if where is None:
        assert errors == []
    else:
        assert len(errors) == 1 and errors[0][0] == where and says in errors[0][1]
