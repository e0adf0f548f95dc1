"""The embed queue's tokens: what a pass sent, the --max-embed-tokens guard, what skip and reuse saved.

A remote embedder counts the tokens its provider billed (`tokens_embedded`); a local model
counts none, and the guard then spends the offline upper bound of each text sent
(`embedders.limits.token_bound`).
"""

from __future__ import annotations

from typing import Protocol, Sequence, TypeVar

from embedders.base import Embedder
from embedders.limits import token_bound

from ..core.report import Report

__all__ = ["TokenSpend"]


class _Queued(Protocol):
    """What the guard reads of a queued page: its chunks' reuse keys and the vectors known so far."""

    chunks: list[str]
    keys: list[str]
    vectors: list[Sequence[float] | None]


_Q = TypeVar("_Q", bound=_Queued)


class TokenSpend:
    """Tokens sent this pass, and the guard that stops the embedding at `limit` (None: no limit)."""

    def __init__(self, embedder: Embedder, report: Report, limit: int | None):
        self.embedder, self.report, self.limit = embedder, report, limit
        # The embedder's own counter (a remote embedder's `usage`) as the pass began.
        self.base = self._counted()
        self.bound_sent = 0  # offline bounds of the texts sent: the spend of an embedder that counts none
        self.token_bound = getattr(embedder, "token_bound", None) or token_bound
        self.stopped = False  # the limit reached: nothing more is sent or visited

    @property
    def guarding(self) -> bool:
        """A batch is cut to the budget before it is sent (a limit is set, or it was reached)."""
        return self.stopped or self.limit is not None

    def sent(self, texts: Sequence[str]) -> None:
        """`texts` go to the model: their offline bounds count against the limit."""
        if self.limit is not None:
            self.bound_sent += sum(map(self.token_bound, texts))

    def _counted(self) -> int | None:
        """The embedder's count of tokens sent so far (its provider's), None if it keeps none."""
        n = getattr(self.embedder, "tokens_embedded", None)  # an optional counter of remote embedders
        return n if isinstance(n, int) else None

    def note(self) -> None:
        """The report's `tokens_embedded`, as the provider has counted them so far."""
        now = self._counted()
        if now is not None and self.base is not None:
            self.report.tokens_embedded = now - self.base

    def spent(self) -> int:
        """Tokens this pass sent: as the provider counted them, else the offline bounds."""
        now = self._counted()
        if now is not None and self.base is not None:
            return now - self.base
        return self.bound_sent

    def within_budget(
        self, batch: list[_Q], to_embed: dict[str, str], *, dedup: bool
    ) -> tuple[list[_Q], dict[str, str]]:
        """The batch's pages whose new texts fit what the limit leaves (each text's offline
        upper bound), in queue order, with just their model inputs. The first page that
        does not fit stops the embedding for the pass (`_stop`): it and every later page that
        needs a model input are left as they were; pages needing none (all their chunks
        reused) are still written. `dedup`: a text is one model input however many chunks
        hold it (vector reuse on), else every chunk is an input of its own, in queue order."""
        limit = self.limit
        stopped = self.stopped or limit is None
        left_over = 0 if stopped or limit is None else limit - self.spent()
        keys = list(to_embed)
        taken: set[str] = set()
        kept: list[_Q] = []
        left: list[_Q] = []
        cost = pos = need = 0
        for item in batch:
            if dedup:
                mine = [k for k, v in zip(item.keys, item.vectors) if v is None and k in to_embed and k not in taken]
            else:
                mine = keys[pos : pos + len(item.chunks)]
                pos += len(item.chunks)
            extra = sum(self.token_bound(to_embed[k]) for k in mine)
            if extra and (stopped or cost + extra > left_over):
                if not stopped:
                    stopped, need = True, extra
                left.append(item)
                continue
            kept.append(item)
            taken.update(mine)
            cost += extra
        if left:
            self._stop(len(left), need, left_over - cost)
        return kept, {k: t for k, t in to_embed.items() if k in taken}

    def _stop(self, left: int, need: int, left_over: int | None) -> None:
        """The limit reached: the pass sends nothing more and visits no more pages; the `left`
        pages keep their old points and state (due again) for the next pass. One line in the
        report's errors says so (exit 1). `need`: the first left page's bound, `left_over`:
        what the budget had left for it."""
        self.report.pages_over_token_budget += left
        if self.stopped:
            return
        self.stopped = True
        self.report.embed_budget_reached = True
        self.report.error(
            "(pass)",
            (
                f"token budget reached (--max-embed-tokens {self.limit}): the next page's new texts may "
                f"take up to {need} tokens (counted offline, an upper bound) and {max(0, left_over or 0)} are left; "
                f"pages not embedded keep their points and are embedded by the next pass"
            ),
        )

    def count_tokens(self, *, chunks_skipped: int, last_per_chunk: object, chunk_tokens: float) -> None:
        """At the pass's end: `tokens_embedded`, and the estimates of what skip and reuse saved,
        at this pass's tokens per embedded chunk (else the last pass's, else `chunk_tokens`,
        the splitter's chunk size in tokens). 0 for an embedder that counts no tokens (a local model)."""
        r = self.report
        self.note()
        if self._counted() is None:
            return
        if r.tokens_embedded and r.chunks_embedded:
            r.tokens_per_chunk = round(r.tokens_embedded / r.chunks_embedded, 2)
        per_chunk = r.tokens_per_chunk or (
            last_per_chunk if isinstance(last_per_chunk, (int, float)) and last_per_chunk > 0 else None
        )
        if per_chunk is None:
            per_chunk = chunk_tokens
        r.tokens_saved_by_skip = round(chunks_skipped * per_chunk)
        r.tokens_saved_by_reuse = round(r.chunks_reused * per_chunk)
