"""The property that defines the product.

For any sequence of site edits (edit, shrink, grow, delete, 410, add, drop from the
sitemap, nav-only churn, a page moved to another URL by 301, listed or not, or by a
404), after each incremental pass the collection equals a fresh full index of the site
as it is now (ids, payloads, texts and vectors: a vector reused from stored points must
be exactly the one embedding its text gives), the pass embedded exactly the embedded texts
(heading path and chunk) of its written pages that neither those pages nor the pages it
removed held before it (each once), and a pass over the unchanged site right after embeds and writes nothing.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings

from tests.property_helpers import SiteEdits

SiteEdits.TestCase.settings = settings(
    max_examples=15,
    stateful_step_count=8,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
TestSiteEdits = pytest.mark.slow(SiteEdits.TestCase)
