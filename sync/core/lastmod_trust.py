"""How far a host's sitemap `lastmod` can be believed, and when an advance makes a page due.

`lastmod` serves as a change feed only once it has earned trust: the share of a host's
`lastmod` advances that a text-hash change confirmed (`lastmod_trust`); a trusted advance
makes the page due now (`lastmod_makes_due`). Ignoring `lastmod` altogether when every URL
carries the same stamp is the sitemap diff's job.
"""

from __future__ import annotations

__all__ = ["lastmod_trust", "LASTMOD_PRIOR", "host_lastmod_trust", "lastmod_makes_due"]


def lastmod_trust(
    confirmed: int,
    advances: int,
    *,
    prior_confirmed: float = 1.0,
    prior_advances: float = 2.0,
) -> float:
    """How far a host's sitemap `lastmod` can be believed, in [0, 1].

    The share of its `lastmod` advances that a text-hash change confirmed when the
    page was next visited, Beta-smoothed: (confirmed + prior_confirmed) /
    (advances + prior_advances). With the default prior (one confirmation in two
    advances) a host starts at 0.5, which `lastmod_makes_due` does not yet trust.
    """
    if not (0 <= confirmed <= advances):
        raise ValueError(f"need 0 <= confirmed <= advances, got {confirmed}, {advances}")
    if not (0 <= prior_confirmed <= prior_advances and prior_advances > 0):
        raise ValueError("need 0 <= prior_confirmed <= prior_advances and prior_advances > 0")
    return (confirmed + prior_confirmed) / (advances + prior_advances)


# A host's sitemap lastmod starts with the benefit of the doubt (as if 2 of 3 advances had
# been confirmed); a couple of advances that no text change confirms take it away.
LASTMOD_PRIOR = (2.0, 3.0)


def host_lastmod_trust(advances: int, confirmed: int) -> float:
    """A host's `lastmod_trust` from its recorded counts, under the engine's prior
    (`LASTMOD_PRIOR`): what a pass and `pagesync status` both go by."""
    return lastmod_trust(confirmed, advances, prior_confirmed=LASTMOD_PRIOR[0], prior_advances=LASTMOD_PRIOR[1])


def lastmod_makes_due(trust: float, threshold: float = 0.5) -> bool:
    """Whether a `lastmod` advance makes the page due now: trust strictly above
    `threshold`, so a host with no record yet (trust 0.5 by default) must first earn it
    through advances that its pages' scheduled visits confirmed."""
    return trust > threshold
