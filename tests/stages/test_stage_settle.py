"""The settle stage alone, with plain inputs: the mass-deletion guard's judgement."""

from __future__ import annotations

import pytest

from sync.stages.settle import guard_refusal

OUT = [f"https://old.test/p{i}" for i in range(6)]


@pytest.mark.parametrize(
    "n, tracked, kw, says",
    [
        (4, 10, {}, None),  # under the minimum
        (5, 100, {}, None),  # within the share
        (20, 100, {}, None),  # at the share exactly: allowed
        (5, 10, {"allow_mass_delete": True}, None),
        (5, 10, {"mass_delete_min": 6}, None),
        (5, 10, {}, "would purge 5 of 10 tracked pages (more than 20%); nothing was purged"),
        (6, 10, {"emptied": 2}, "would purge 4 and empty 2 of 10"),
        (6, 10, {"emptied": 6}, "would empty 6 of 10"),
        (6, 10, {"scoped": OUT}, "because they are out of scope now"),
        (6, 10, {"scoped": OUT[:2]}, "(2 of them only left the scope: --allow-host old.test keeps those)"),
        (3, 4, {"mass_delete_min": 1, "max_delete_share": 0.5}, "more than 50%"),
    ],
)
def test_guard_refusal(n, tracked, kw, says):
    got = guard_refusal(n, tracked, **kw)
    if says is None:
        assert got is None
    else:
        assert got is not None and says in got and got.startswith("mass-deletion guard: ")


def test_guard_refusal_for_pages_out_of_scope_advises_the_scope_only():
    got = guard_refusal(6, 10, scoped=OUT)
    assert "--allow-host old.test" in got and "--allow-mass-delete" not in got
