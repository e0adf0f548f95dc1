"""The pure core: the rules and data a pass decides with, and no I/O.

Canonical URLs and ids (`ids`), the page record (`page`), content hashing (`hashing`), sitemap
parsing and diff (`sitemaps`), revisit scheduling (a page's visit history in `history`, its
change rate in `change_rate`, the revisit policies in `policies`, the pass's pick of pages in
`visit_selection`, sitemap `lastmod` trust in `lastmod_trust`, bulk edits in `bulk_edits`,
deploy-aware scheduling in `deploys` over the change feeds of `feeds`, the halve-double rule
and clamps in `scheduler`), the change decision (`decision`), fetch scope (`scope`), the
per-site rules (`site_rules`: include/exclude, content selector, headers), robots.txt rules
(`robots`), a page's links and the crawl frontier (`links`), whose answer may replace a page's
kept links (`link_authority`) and when an unlinked page may leave (`unlinked`), the
one-model-per-collection rule (`model_change`), bounded decoding (`inflate`), the points check
(`points_check`), the run report (`report`), a point's `metadata` payload object (`payload`),
the failure budget (`budget`), freshness figures (`freshness`), secrets masked out of every
text (`secrets`), the watcher's decisions (`watching`: when to poll, run, back off and sleep),
Prometheus metric names and their naming rules (`metric_names`), counts in words (`plural`),
what a search query is (`query_kind`: a name or a question), guides ranked before API
references for a question, the agreed first hit and a name's hits as typed first (`ranking`),
and the configuration file and
`PAGESYNC_*` variables merged below the flags (`config`).

Each function takes its inputs, the clock included, as arguments. Modules here import
only each other and `sync.errors`; never `sync.edges`, `sync.stages` or a command.
"""
