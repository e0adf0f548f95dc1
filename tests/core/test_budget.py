"""The failure budget (`--max-failed-share`): when failed pages make a pass exit 1."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from sync.core.budget import failed_share, within_failure_budget
from sync.core.report import Report


@pytest.mark.parametrize(
    "failed, visited, share",
    [
        (0, 0, 0.0),
        (0, 10, 0.0),
        (1, 10, 0.1),
        (10, 10, 1.0),
        (3, 0, 1.0),
        (5, 4, 1.0),
    ],
)
def test_failed_share(failed, visited, share):
    assert failed_share(failed, visited) == pytest.approx(share)


@pytest.mark.parametrize(
    "failed, visited, budget, ok",
    [
        (0, 10, 0.0, True),
        (1, 10, 0.0, False),  # the default: any failed page is exit 1
        (1, 10, 0.1, True),  # exactly the budget: within
        (2, 10, 0.1, False),  # more than the budget
        (1, 1000, 0.01, True),
        (4, 0, 0.5, False),
    ],
)
def test_within_failure_budget(failed, visited, budget, ok):
    assert (
        within_failure_budget(pages_failed=failed, pages_visited=visited, otherwise_ok=True, max_failed_share=budget)
        is ok
    )


@pytest.mark.parametrize("other", [{"sitemap_errors": 1}, {"mass_delete_blocked": 3}, {"embed_budget_reached": True}])
def test_every_other_failure_of_a_pass_is_outside_any_budget(other):
    """A sitemap error, purges the guard held back, pages left by the token budget."""
    assert not Report(pages_failed=0, pages_visited=10, **other).ok_within(1.0)
    assert not Report(pages_failed=1, pages_visited=10, **other).ok_within(1.0)
    assert Report(pages_failed=1, pages_visited=10).ok_within(1.0)


@given(failed=st.integers(0, 50), visited=st.integers(0, 50), budget=st.floats(0, 1))
def test_a_zero_budget_is_the_plain_rule_and_a_larger_one_never_fails_more(failed, visited, budget):
    r = Report(pages_failed=failed, pages_visited=visited)
    assert r.ok_within(0.0) is r.ok
    if r.ok_within(0.0):
        assert r.ok_within(budget)
    assert r.to_dict()["pages_failed_share"] == failed_share(failed, visited)
