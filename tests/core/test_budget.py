"""The failure budget (`--max-failed-share`): when failed pages make a pass exit 1."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from sync.core.budget import failed_share, within_budget
from sync.core.report import Report


@pytest.mark.parametrize("failed, visited, share", [
    (0, 0, 0.0), (0, 10, 0.0), (1, 10, 0.1), (10, 10, 1.0), (3, 0, 1.0), (5, 4, 1.0),
])
def test_failed_share(failed, visited, share):
    assert failed_share(failed, visited) == pytest.approx(share)


@pytest.mark.parametrize("failed, visited, sitemap_errors, blocked, budget, ok", [
    (0, 10, 0, 0, 0.0, True),
    (1, 10, 0, 0, 0.0, False),  # the default: any failed page is exit 1
    (1, 10, 0, 0, 0.1, True),  # exactly the budget: within
    (2, 10, 0, 0, 0.1, False),  # more than the budget
    (1, 1000, 0, 0, 0.01, True),
    (0, 10, 1, 0, 1.0, False),  # a sitemap error is never within a budget
    (0, 10, 0, 3, 1.0, False),  # nor a purge the guard held back
    (4, 0, 0, 0, 0.5, False),
])
def test_within_budget(failed, visited, sitemap_errors, blocked, budget, ok):
    assert within_budget(pages_failed=failed, pages_visited=visited, sitemap_errors=sitemap_errors,
                         mass_delete_blocked=blocked, max_failed_share=budget) is ok


@given(failed=st.integers(0, 50), visited=st.integers(0, 50), budget=st.floats(0, 1))
def test_a_zero_budget_is_the_plain_rule_and_a_larger_one_never_fails_more(failed, visited, budget):
    r = Report(pages_failed=failed, pages_visited=visited)
    assert r.ok_within(0.0) is r.ok
    if r.ok_within(0.0):
        assert r.ok_within(budget)
    assert r.to_dict()["pages_failed_share"] == failed_share(failed, visited)
