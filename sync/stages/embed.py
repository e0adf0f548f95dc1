"""Embed: a decided change's vectors, with as few model inputs as the pass can manage.

Each new chunk takes a vector it already has (the page's own stored vectors, a page leaving
this pass, the pass's cache of texts met before: `VectorCache`), or waits for the batch
in flight that holds its text, or becomes one of this batch's model inputs, each text once
(`enqueue`, `_assign`). A batch's model call runs in a worker thread while the pass goes
on fetching (`flush` starts it, `drain` finishes it and hands the pages to the writer),
one batch in flight at most, so writes keep queue order. Reuse only saves work: a failed
read costs the reuse, never a page.

Leaving pages (left the sitemap, 404/410, 301/308, no text) are read key-first, only when a
written page has texts its own points and the cache lack: their reuse keys (no vectors,
within `reuse_leaving_chunks`), then the vectors of just the pages holding such a text
(`_leaving_vectors`). A text queued for the model before its leaving page was known (a 404
or 301 met later) is looked up again when its batch starts (`_late_reuse`). If the batch in
flight that a chunk waited on fails, the waiting batch embeds the text itself. A remote
embedder whose call failed in part (`EmbedBatchError`) fails only the pages lacking a vector.

Tokens: `tokens_embedded` is what the embedder's provider counted (its `tokens_embedded`
counter across the pass). With `max_embed_tokens`, each batch is cut, before it is sent, to
the pages whose new texts fit what is left, counted offline as an upper bound
(`embedders.limits.token_bound`); the first page that does not fit stops the embedding: it
and every page after it keep their points and state (due next pass) and the pass visits no
more pages (`stopped`). Both are `token_spend.TokenSpend`'s, the queue's `tokens`.
"""

from __future__ import annotations

import asyncio
import logging
from array import array
from collections import OrderedDict
from typing import Generic, Protocol, Sequence, TypeVar

from embedders.base import Embedder

from ..core.hashing import reuse_key
from ..core.page import PageState
from ..core.report import Report
from ..edges.store import Store
from ..edges.threads import in_daemon_thread
from ..errors import EmbedBatchError, PagesyncError
from .pending import Embeddable
from ..core.planning import pages_within_chunk_budget
from .token_spend import TokenSpend

__all__ = ["EmbedQueue", "VectorCache", "VectorLookup", "BatchSink"]

log = logging.getLogger("pagesync")


T = TypeVar("T", bound=Embeddable)
T_in = TypeVar("T_in", bound=Embeddable, contravariant=True)


class VectorLookup(Protocol):
    """Vectors known by reuse key: the pass's `VectorCache`, or a reindex's `VectorMemo` on disk."""

    def __contains__(self, key: str) -> bool: ...

    def get(self, key: str) -> Sequence[float] | None: ...

    def put(self, key: str, vector: Sequence[float]) -> None: ...


class BatchSink(Protocol[T_in]):
    """Where the queue hands its pages: the pass's `write.Writer`, or a reindex's new collection.

    `hold` a page as it is queued, `write` a batch whose every chunk has its vector (in queue
    order), `would_write` a dry run's batch, `fail` a page whose vectors could not be had.
    """

    def hold(self, item: T_in) -> None: ...

    async def write(self, items: Sequence[T_in]) -> None: ...

    def would_write(self, items: Sequence[T_in]) -> None: ...

    def fail(self, page: PageState, message: str) -> None: ...


class VectorCache:
    """Vectors met this pass, by reuse key: least recently used dropped past `size`.

    Held as float32 arrays (what Qdrant stores anyway): ~1.5 KB a vector at 384-d.
    """

    def __init__(self, size: int):
        self.size = max(0, size)
        self._d: OrderedDict[str, array] = OrderedDict()

    def __contains__(self, key: str) -> bool:
        return key in self._d

    def get(self, key: str) -> array | None:
        v = self._d.get(key)
        if v is not None:
            self._d.move_to_end(key)
        return v

    def put(self, key: str, vector: Sequence[float]) -> None:
        if not self.size:
            return
        self._d[key] = vector if isinstance(vector, array) else array("f", vector)
        self._d.move_to_end(key)
        while len(self._d) > self.size:
            self._d.popitem(last=False)


class EmbedQueue(Generic[T]):
    """The embed queue: vector reuse, batching, the model call's overlap, the token guard.

    Takes pages waiting for vectors (`enqueue`: a pass's decided changes, a reindex's pages),
    hands each finished batch's pages to `writer.write` in queue order, and fails a page whose
    vectors could not be had through `writer.fail`. `full()` is the backpressure the visits
    flush on; `stopped`: the token budget is spent (the pass visits no more pages).
    """

    def __init__(
        self,
        store: Store,
        embedder: Embedder,
        writer: BatchSink[T],
        report: Report,
        *,
        batch: int,
        write_batch: int,
        reuse_vectors: bool,
        reuse_cache: int,
        reuse_leaving_chunks: int,
        read_stored: bool,
        max_embed_tokens: int | None,
        dry_run: bool,
        store_was_empty: bool,
        rebuilding: frozenset[str] = frozenset(),
        cache: VectorLookup | None = None,
    ):
        self.store, self.embedder, self.writer, self.report = store, embedder, writer, report
        self.batch, self.write_batch, self.reuse_vectors = batch, write_batch, reuse_vectors
        self.dry_run = dry_run
        # A first index has nothing to read; a lost collection (rebuilt) holds nothing to reuse.
        self.store_was_empty, self.rebuilding = store_was_empty, rebuilding
        self.queue: list[T] = []
        self.queued_chunks = 0
        # This batch's model inputs, each text once: reuse key -> text.
        self.to_embed: dict[str, str] = {}
        # The batch whose model call is in flight (see `flush`): its pages, its inputs, the call.
        self.inflight: tuple[list[T], dict[str, str], asyncio.Future | None] | None = None
        self.inflight_keys: dict[str, str] = {}  # that batch's model inputs (reuse key -> text)
        self.last_fresh: dict[str, Sequence[float]] = {}  # the vectors of the batch finished last
        # A repair rewrites from scratch (`read_stored` False): nothing stored is read.
        self.read_stored = reuse_vectors and read_stored
        # Vectors met so far, by reuse key: the pass's own (least recently used dropped), or `cache`.
        self.cache: VectorLookup = cache if cache is not None else VectorCache(reuse_cache if reuse_vectors else 0)
        # Pages leaving this pass, as reuse sources (`sync.engine`'s docstring, "Vector reuse"):
        # given by the ledger as they are queued for the purge (`add_leaving`), their keys
        # read on the first need, their vectors per url.
        self.leaving_on = self.read_stored and reuse_leaving_chunks > 0
        self.reuse_leaving_chunks = reuse_leaving_chunks
        self.leaving_todo: list[PageState] = []  # keys not read yet
        self.leaving_keys: dict[str, str] = {}  # reuse key -> url of a leaving page holding it
        self.leaving_read: set[str] = set()  # leaving urls whose vectors were read (or tried)
        self.leaving_budget = reuse_leaving_chunks
        self.leaving_over = 0  # leaving pages past the budget: not reuse sources
        # Queued pages hold their texts and reused vectors: bound them as well as the model input.
        self.max_queued_chunks = max(1024, 16 * batch)
        # Tokens sent, and the --max-embed-tokens guard over them (`TokenSpend`).
        self.tokens = TokenSpend(embedder, self.report, max_embed_tokens)

    @property
    def stopped(self) -> bool:
        """The token budget is spent: nothing more is sent, and the pass visits no more pages."""
        return self.tokens.stopped

    def full(self) -> bool:
        """Enough queued for a batch (or for the memory bound): time to `flush`."""
        return len(self.to_embed) >= self.batch or self.queued_chunks >= self.max_queued_chunks

    def add_leaving(self, page: PageState) -> None:
        """A page queued for the purge that holds points: a reuse source until the purges."""
        if self.leaving_on and (page.indexed or page.pending_hash is not None):
            self.leaving_todo.append(page)

    async def enqueue(self, item: T) -> None:
        """Queue a decided change for its vectors and write: its stored vectors read first
        (reuse), then each chunk given a known vector or made a model input."""
        page, chunks = item.page, item.chunks
        self.writer.hold(item)
        stored: dict[str, list[float]] = {}
        # A new page may have points all the same: the state was lost or replaced while the
        # collection stayed (a deleted state.db, a fresh CI cache). Looked up unless the
        # collection was empty when the pass began (a first index reads nothing).
        known = page.indexed or page.pending_hash is not None
        if self.read_stored and chunks and (known or not self.store_was_empty) and page.url not in self.rebuilding:
            # Read before anything of this page is written (its write comes at a later flush).
            stored = await self._read_vectors(page.url)
        keys = None
        if self.leaving_on and (self.leaving_todo or self.leaving_keys):
            # Texts neither its own points nor the pass hold: maybe a page leaving this pass does.
            model_id = self.embedder.model_id
            keys = [reuse_key(model_id, text) for text in item.inputs]
            missing = [k for k in keys if k not in stored and k not in self.cache]
            if missing:
                stored = {**stored, **await self._leaving_vectors(missing)}
        self._assign(item, stored, keys)
        self.queue.append(item)
        self.queued_chunks += len(chunks)

    async def _read_vectors(self, url: str) -> dict[str, list[float]]:
        """The url's stored vectors made by this pass's embedder (reuse key -> vector).

        Reuse only saves work, so it never fails a page: when the store cannot be read, the
        rest of the pass embeds every chunk, as without reuse (a store that is really down
        fails the write anyway, which keeps the old points and retries the page).
        """
        try:
            return await asyncio.to_thread(self.store.vectors_for_url, url, embedder=self.embedder.model_id)
        except PagesyncError as exc:
            log.warning("could not read stored vectors (%s); this pass embeds every chunk of changed pages", exc)
            self.read_stored = False
            return {}

    async def _leaving_vectors(self, keys: Sequence[str]) -> dict[str, list[float]]:
        """Vectors for `keys` from pages leaving this pass (reuse key -> vector), also put
        in the pass's cache.

        The leaving pages' keys are read first, without vectors, the first time a written
        page lacks a text (and again for pages found leaving since), within
        `reuse_leaving_chunks`; then the vectors of only the leaving pages holding one of
        `keys`, each page once. All before the purges delete them. A failed read ends this
        reuse for the pass, never the pass: the texts are embedded.
        """
        if self.leaving_todo and self.leaving_on:
            todo, self.leaving_todo = self.leaving_todo, []
            urls, self.leaving_budget, over = pages_within_chunk_budget(todo, self.leaving_budget)
            if over:
                if not self.leaving_over:
                    log.info(
                        "vector reuse: pages leaving this pass past %s chunks are not read for reuse",
                        self.reuse_leaving_chunks,
                    )
                self.leaving_over += over
            if urls:
                model_id = self.embedder.model_id
                try:
                    pairs = await asyncio.to_thread(
                        lambda: list(self.store.reuse_keys_for_urls(urls, embedder=model_id))
                    )
                except PagesyncError as exc:
                    log.warning(
                        "could not read the chunks of pages leaving this pass (%s); their texts "
                        "are embedded again where new pages hold them",
                        exc,
                    )
                    self.leaving_on, self.leaving_keys = False, {}
                    return {}
                for key, url in pairs:
                    self.leaving_keys.setdefault(key, url)
        urls = sorted({u for k in keys if (u := self.leaving_keys.get(k)) is not None and u not in self.leaving_read})
        out: dict[str, list[float]] = {}
        dim = self.embedder.dimension
        for url in urls:
            if not self.read_stored:  # a read failed: the rest is embedded
                break
            self.leaving_read.add(url)
            for key, vec in (await self._read_vectors(url)).items():
                if len(vec) == dim:
                    out[key] = vec
                    self.cache.put(key, vec)
        return out

    async def _late_reuse(self, batch: list[T], to_embed: dict[str, str]) -> None:
        """Before a batch's model call: its inputs that the pass has come to know since
        they were queued (a 301 or 404 met later whose page held the text, another page's
        stored vectors) take that vector and leave the inputs. The first chunk of each
        such text, the one that made it an input, now counts as reused."""
        if not self.reuse_vectors or not to_embed:
            return
        dim = self.embedder.dimension
        found: dict[str, Sequence[float]] = {}
        for key in to_embed:
            vec = self.cache.get(key)
            if vec is not None and len(vec) == dim:
                found[key] = vec
        if self.leaving_on and (self.leaving_todo or self.leaving_keys):
            found.update(await self._leaving_vectors([k for k in to_embed if k not in found]))
        if not found:
            return
        for key in found:
            del to_embed[key]
        first: set[str] = set()
        for item in batch:
            for i, key in enumerate(item.keys):
                if item.vectors[i] is None and key in found:
                    item.vectors[i] = found[key]
                    if key not in first:
                        first.add(key)
                        item.reused += 1

    async def remember_vectors(self, page: PageState) -> None:
        """A moved page's stored vectors into the pass's cache: its text under the new URL
        is not embedded again."""
        if not (self.read_stored and (page.indexed or page.pending_hash is not None)):
            return
        self.leaving_read.add(page.url)  # read here, not again as a leaving page
        stored = await self._read_vectors(page.url)
        for key, vec in stored.items():
            if len(vec) == self.embedder.dimension:
                self.cache.put(key, vec)

    def _assign(self, item: T, stored: dict[str, list[float]], keys: Sequence[str] | None = None) -> None:
        """Give each chunk a known vector (this page's stored ones or a leaving page's, then
        the pass's), or make its text one of this batch's model inputs, unless the batch
        already has it. `keys`: the chunks' reuse keys, when the caller has them already."""
        model_id, dim = self.embedder.model_id, self.embedder.dimension
        for key, known in stored.items():
            if len(known) == dim:
                self.cache.put(key, known)
        dedup = self.reuse_vectors
        if keys is None:
            keys = [reuse_key(model_id, text) for text in item.inputs]
        for text, key in zip(item.inputs, keys, strict=True):
            vec: Sequence[float] | None = stored.get(key)
            if vec is None or len(vec) != dim:
                vec = self.cache.get(key)
            item.keys.append(key)
            item.vectors.append(vec)
            if vec is not None or (dedup and (key in self.to_embed or key in self.inflight_keys)):
                item.reused += 1  # None until its batch starts (in flight) or ends (this batch)
            else:
                # Without reuse every chunk is a model input of its own (the old behaviour).
                self.to_embed[key if dedup else f"{key}#{len(self.to_embed)}"] = text

    async def flush(self) -> None:
        """Start the model call of the queued pages' new texts (one call spanning pages, each
        text once) in a worker thread, and return: the visits extract and chunk the next
        pages meanwhile. The batch in flight before is finished first (`drain`), so one
        batch at most is in flight and writes keep queue order."""
        if not self.queue:
            return
        await self.drain()
        batch, self.queue, self.queued_chunks = self.queue, [], 0
        to_embed, self.to_embed = self.to_embed, {}
        await self._late_reuse(batch, to_embed)  # a dry run too: its would-be counts follow
        if self.dry_run:
            # Nothing is embedded or reused: what a real pass would do goes to the would-be counters.
            self.report.chunks_would_reuse += sum(item.reused for item in batch)
            self.report.chunks_would_embed += sum(len(item.chunks) - item.reused for item in batch)
            for key in to_embed:  # later batches count these as a real pass would
                self.cache.put(key, array("f"))
            self.writer.would_write(batch)
            return
        if self.reuse_vectors:
            # Chunks that waited on the batch just finished (its texts were in flight when they
            # were queued): its vectors now, or, if its model call failed, inputs of this batch.
            for item in batch:
                for i, (key, vec) in enumerate(zip(item.keys, item.vectors)):
                    if vec is None and key not in to_embed:
                        known = self.last_fresh.get(key)
                        if known is None:
                            to_embed[key] = item.inputs[i]
                            item.reused -= 1
                        else:
                            item.vectors[i] = known
        if self.tokens.guarding:
            batch, to_embed = self.tokens.within_budget(batch, to_embed, dedup=self.reuse_vectors)
        texts = list(to_embed.values())
        self.tokens.sent(texts)
        # A daemon thread, not the default executor: a pass cancelled by Ctrl-C does not wait
        # for the model to finish the batch (`sync.edges.threads`).
        call = in_daemon_thread(self.embedder.embed, texts, name="pagesync-embed") if texts else None
        self.inflight, self.inflight_keys = (batch, to_embed, call), to_embed

    def cancel(self) -> None:
        """An error ended the visits with a batch in flight: nothing of it is written."""
        if self.inflight is not None:
            _, _, call = self.inflight
            self.inflight, self.inflight_keys = None, {}
            if call is not None:
                call.cancel()

    async def drain(self) -> None:
        """Finish the batch in flight: wait for its vectors, then write its pages (steps 2-4 of
        the write order in `sync.engine`, in queue order). A call that failed in part fails
        only the pages one of whose texts got no vector."""
        if self.inflight is None:
            return
        batch, to_embed, call = self.inflight
        self.inflight, self.inflight_keys, self.last_fresh = None, {}, {}
        keys = list(to_embed)
        failed: dict[str, str] = {}  # reuse key -> why its text got no vector
        try:
            vectors = await call if call is not None else []
            if len(vectors) != len(keys):
                raise PagesyncError(f"embedder returned {len(vectors)} vectors for {len(keys)} texts")
        except EmbedBatchError as exc:
            vectors, failed = list(exc.vectors), {keys[i]: msg for i, msg in exc.errors.items()}
        except Exception as exc:
            self.tokens.note()  # tokens a failed call spent are spent all the same
            # Nothing was deleted yet: every page keeps its old points and is retried.
            for item in batch:
                self.writer.fail(item.page, f"embedding failed: {exc}")
            return
        self.tokens.note()
        fresh = {k: v for k, v in zip(keys, vectors) if k not in failed}
        self.report.chunks_embedded += len(fresh)
        for key, vec in fresh.items():
            self.cache.put(key, vec)
        self.last_fresh = fresh if self.reuse_vectors else {}
        ready: list[T] = []
        pos = 0
        for item in batch:
            if self.reuse_vectors:
                mine = [k for k, v in zip(item.keys, item.vectors) if v is None]
            else:  # every chunk was an input of its own, in queue order
                mine = keys[pos : pos + len(item.chunks)]
                pos += len(item.chunks)
            why = next((failed[k] for k in mine if k in failed), None)
            if why is not None:  # old points and state kept: retried by a later pass
                self.writer.fail(item.page, f"embedding failed: {why}")
                continue
            if self.reuse_vectors:
                item.vectors = [fresh[k] if v is None else v for k, v in zip(item.keys, item.vectors)]
            else:
                item.vectors = [fresh[k] for k in mine]
            ready.append(item)
        self.report.chunks_reused += sum(item.reused for item in ready)
        for i in range(0, len(ready), self.write_batch):
            await self.writer.write(ready[i : i + self.write_batch])
