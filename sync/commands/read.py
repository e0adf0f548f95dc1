"""Reading a synced collection from an app: open it, search it by text, get chunks back.

`open_collection(path_or_url, collection)` opens the embedded store (a `--qdrant-path`
directory) or a collection on a Qdrant server (an http(s) URL, or a `client=` of your own,
e.g. qdrant-client's local mode); `Collection.search(text)` embeds the query with the
collection's own embedder (the one its points name in their `embedder` payload, as
`pagesync search` picks it) and returns `Hit`s: url, title, text, score, chunk id and index.
`mode` is `hybrid` (the default: dense and BM25 keyword results fused by reciprocal rank,
API reference pages weighed below guides, `sync.core.ranking`, then each page's best chunk
lifted by its next best, `page_ranked`; a query that names code, `sync.core.query_kind`,
ranked by BM25 alone, then lifted alike), `dense` (the embedding alone) or `keyword` (BM25
alone, no embedding).
`pagesync search` is this function; `sync.integrations` wraps it as LangChain and
LlamaIndex retrievers.

The embedded store is a Qdrant Edge shard, which one process opens at a time. A
`Collection` opens it for each search and closes it again (`keep_open=False`, the
default), so a pass that starts meanwhile waits only for one query; during a pass a
search is refused at once with one line (`StoreHeldError`, see `EdgeStore`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..errors import ConfigError
from ..edges.keywords import query_vector
from ..core.ranking import agreed_first, guides_first, verbatim_first
from ..core.query_kind import looks_like_identifier
from ..edges.store import BOTH_FIRST, RRF_K, SEARCH_MODES, Store, prefetch_size
from ..edges.client_store import ClientStore
from ..edges.edge_store import EdgeStore
from .checks import check_embedder_fits, choose_embedder, require_collection

__all__ = [
    "Hit",
    "Collection",
    "open_collection",
    "READ_LOCK_WAIT",
    "SEARCH_MODES",
    "check_mode",
    "page_ranked",
    "PAGE_WEIGHT",
]

log = logging.getLogger("pagesync")

READ_LOCK_WAIT = 10.0  # seconds a search waits for another reader's query (a pass is not waited for)
_METADATA = ("url", "title", "chunk_id", "chunk_index", "fetched_at")
# A page's best hybrid hit is scored by its fused score plus this share of the fused score of
# the page's next best chunk among the candidates: a page that answers in two sections outranks a
# page that matches in one. The next best chunk only, not a sum: a long page (an API reference, a
# changelog) matching a little in many chunks is not lifted over the page that answers. Only the
# best chunk is lifted, so the page's other chunks do not crowd the other pages out of the hits.
# A hit both searches rank first is not passed by a lifted page: dense and keyword agree on it
# (a pasted passage, an identifier that names one section).
PAGE_WEIGHT = 0.5


def page_ranked(
    found: Sequence[tuple[float, Mapping[str, Any]]],
    limit: int,
    weight: float = PAGE_WEIGHT,
    agreed: float = BOTH_FIRST,
) -> list[tuple[float, Mapping[str, Any]]]:
    """The `limit` best of `found` (score, payload; best first), each page's best chunk scored
    by its own score plus `weight` times that of the page's second best in `found`, every other
    chunk by its own; a first hit scored `agreed` (both searches rank it first) stays first."""
    best: dict[str, int] = {}  # url -> the position in `found` of its best chunk (the first of equals)
    second: dict[str, float] = {}
    for i, (score, payload) in enumerate(found):
        url = str(payload.get("url", ""))
        if url not in best or score > found[best[url]][0]:
            if url in best:
                second[url] = max(second.get(url, 0.0), found[best[url]][0])
            best[url] = i
        else:
            second[url] = max(second.get(url, 0.0), score)
    lifted = {i: second.get(url, 0.0) for url, i in best.items()}
    out = [(score + weight * lifted.get(i, 0.0), payload) for i, (score, payload) in enumerate(found)]
    out.sort(key=lambda x: -x[0])  # stable: equal scores keep the fusion's order
    if agreed_first(found, agreed):
        first = next(i for i, hit in enumerate(out) if hit[1] is found[0][1])
        out.insert(0, out.pop(first))
    return out[:limit]


@dataclass(frozen=True)
class Hit:
    """One chunk a search found: where it is from, its text, and its score (dense: cosine;
    hybrid: the reciprocal-rank fusion's, an API reference chunk's weighed for a question
    (`sync.core.ranking`), a page's best chunk lifted by its next best (`page_ranked`), for a
    query that names code the keyword ranks' alone; keyword: BM25's)."""

    url: str
    title: str
    text: str
    score: float
    chunk_id: str
    chunk_index: int
    payload: Mapping[str, Any] = field(default_factory=dict, repr=False)  # every stored field, as stored

    @classmethod
    def from_point(cls, score: float, payload: Mapping[str, Any]) -> "Hit":
        index = payload.get("chunk_index")
        return cls(
            url=str(payload.get("url", "")),
            title=str(payload.get("title") or ""),
            text=str(payload.get("text", "")),
            score=float(score),
            chunk_id=str(payload.get("chunk_id", "")),
            chunk_index=index if isinstance(index, int) else -1,
            payload=payload,
        )

    @property
    def metadata(self) -> dict[str, Any]:
        """The chunk's `metadata` payload (url, title, chunk_id, chunk_index, fetched_at), or
        the same fields from the top-level payload for points written before it existed."""
        stored = self.payload.get("metadata")
        if isinstance(stored, Mapping):
            return dict(stored)
        return {k: self.payload[k] for k in _METADATA if k in self.payload}


def check_mode(mode: str) -> str:
    """`mode` when it is a search mode, else ConfigError naming the modes."""
    if mode not in SEARCH_MODES:
        raise ConfigError(f"unknown search mode {mode!r}: use one of {', '.join(SEARCH_MODES)}")
    return mode


class Collection:
    """A synced collection opened for reading (make one with `open_collection`)."""

    def __init__(
        self,
        store: Store,
        embedder: Any,
        *,
        keep_open: bool = False,
        owns_store: bool = True,
        owns_embedder: bool = False,
    ):
        self.store = store
        self.embedder = embedder
        self.keep_open = keep_open
        self._owns_store = owns_store
        self._owns_embedder = owns_embedder  # made here from a name: its client (a remote one's) closes with it

    @property
    def name(self) -> str:
        return self.store.collection

    def search(self, query: str, limit: int = 5, mode: str = "hybrid") -> list[Hit]:
        """The `limit` chunks that best match `query`, best first, by `mode` (hybrid, dense or
        keyword). ConfigError for a blank query, an unknown mode, or `keyword` on a collection
        without keyword vectors; `hybrid` there is dense, with a warning naming the repair."""
        if not query or not query.strip():
            raise ConfigError("the search query is empty: give some text to search for")
        if limit < 1:
            raise ConfigError(f"limit must be at least 1, not {limit}")
        check_mode(mode)
        # A name is ranked by BM25 alone (`sync.core.query_kind`): nothing to embed, unless the
        # collection has no keyword vectors or BM25 finds nothing for it (then embedded below).
        named = mode == "hybrid" and looks_like_identifier(query)
        # Embedded before the shard is opened: it is held for the query only.
        vector = self.embedder.embed([query])[0] if mode != "keyword" and not named else None
        keywords = query_vector(query) if mode != "dense" else None
        try:
            if mode != "dense" and not self.store.has_keywords():
                if mode == "keyword":
                    raise ConfigError(
                        f"collection {self.name!r} has no keyword vectors (it was built before "
                        f"them): `pagesync audit --fix` adds them from the stored texts"
                    )
                log.warning(
                    "collection %r has no keyword vectors: searching dense only "
                    "(`pagesync audit --fix` adds them from the stored texts)",
                    self.name,
                )
                mode = "dense"
            found: Sequence[tuple[float, Mapping[str, Any]]]
            ranked: list[tuple[float, Mapping[str, Any]]] = []
            if mode == "hybrid" and named:
                # A name, not a question: BM25's ranking alone, the hits that hold it as typed
                # first (`verbatim_first`), scored by rank as the fusion scores one list; its
                # first hit stays first.
                by_keyword = self.store.search(None, limit=prefetch_size(limit), keywords=keywords, mode="keyword")
                as_typed = verbatim_first(by_keyword, query.strip())
                ranked = [(1 / (RRF_K + rank), payload) for rank, (_, payload) in enumerate(as_typed)]
            if vector is None and mode != "keyword" and not ranked:  # a name searched as a question after all
                vector = self.embedder.embed([query])[0]
            if ranked:
                found = page_ranked(ranked, limit, agreed=1 / RRF_K)
            elif mode == "hybrid":  # the fusion's candidates, guides first, ranked with their pages
                fused = self.store.search(vector, limit=prefetch_size(limit), keywords=keywords, mode=mode)
                found = page_ranked(guides_first(fused, agreed=BOTH_FIRST), limit)
            else:
                found = self.store.search(vector, limit=limit, keywords=keywords, mode=mode)
        finally:
            if not self.keep_open:
                self._release()
        return [Hit.from_point(score, payload) for score, payload in found]

    def _release(self) -> None:
        """Let go of an embedded shard between searches (a server connection stays)."""
        if isinstance(self.store, EdgeStore):
            self.store.close()

    def close(self) -> None:
        if self._owns_store:
            self.store.close()
        else:
            self._release()
        close_embedder = getattr(self.embedder, "close", None) if self._owns_embedder else None
        if callable(close_embedder):
            close_embedder()

    def __enter__(self) -> "Collection":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _is_url(where: str) -> bool:
    return "://" in where


def open_collection(
    path_or_url: str | Path = ".pagesync/qdrant",
    collection: str = "pages",
    *,
    api_key: str | None = None,
    embedder: Any = None,
    client: Any = None,
    keep_open: bool = False,
    lock_wait: float = READ_LOCK_WAIT,
) -> Collection:
    """Open a synced collection for searching.

    - `path_or_url`: the embedded store's directory (`pagesync run --qdrant-path`, default
      `.pagesync/qdrant`), or a Qdrant server's URL, `http(s)://...` (with `api_key`). `client`: a
      `qdrant_client.QdrantClient` of your own instead (a server, or local mode); it is
      not closed by `close()`.
    - `collection`: the collection or an alias of it (`pagesync reindex` makes one).
    - `embedder`: an embedder name as `pagesync run --embedder` takes it, or an object
      with `embed(texts)`, `model_id` and `dimension`; default the one the collection's
      points name, else the bundled all-MiniLM-L6-v2. Checked against the vector size.
    - `keep_open`: keep an embedded shard open between searches (faster; a pass cannot
      start until `close()`). `lock_wait`: seconds to wait for another reader's query.

    Raises `CollectionNotFoundError` (no such collection), `StoreHeldError` (a pass is
    writing the embedded store), `CollectionMismatchError` (an embedder of another size):
    each a `sync.errors.PagesyncError` with one line and the command line's exit code.
    """
    if client is not None:
        store: Store = ClientStore(client, collection, api_key=api_key)
    elif _is_url(str(path_or_url)):
        store = ClientStore.connect(str(path_or_url), collection, api_key=api_key)
    else:
        store = EdgeStore(path_or_url, collection, reading=True, lock_wait=lock_wait)
    reader = Collection(store, None, keep_open=keep_open, owns_store=client is None)
    try:
        require_collection(store)
        if embedder is None or isinstance(embedder, str):
            reader.embedder = choose_embedder(embedder, store, why="search")
            reader._owns_embedder = True
        else:
            check_embedder_fits(store, embedder)
            reader.embedder = embedder
    except BaseException:
        reader.close()
        raise
    if not keep_open:
        reader._release()  # learning the embedder opened the shard
    return reader
