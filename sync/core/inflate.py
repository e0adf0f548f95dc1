"""Bounded Content-Encoding decoding: an answer's body, inflated under a byte cap.

httpx inflates a whole read at once (a 32 KB zstd body or a 3.5 KB `gzip, gzip` one
becomes gigabytes before any cap is seen), so the Fetcher reads the raw bytes and
decodes them here. Each layer of `Content-Encoding` is a `_Stage` that never produces
more than `cap + 1` bytes in all, in pieces of at most `_PIECE` bytes (zlib's
`max_length`) or zstd's `write_size`, so memory stays within a few times the cap
whatever the compression ratio. Only what is bounded here is advertised
(`ACCEPT_ENCODING`); a bounded-incapable coding the server sends anyway (br) is refused.
"""

from __future__ import annotations

import zlib
from typing import Iterable

import httpx

__all__ = ["ACCEPT_ENCODING", "BoundedDecoder"]

_PIECE = 64 * 1024
_ZSTD_WINDOW = 8 * 1024 * 1024  # RFC 9659: HTTP zstd decoders need not accept a larger window

try:  # a dependency of httpx's optional zstd support, not of pagesync: used when present
    import zstandard as _zstd
except ImportError:  # pragma: no cover - depends on the environment
    _zstd = None  # type: ignore[assignment]  # absent: zstd is then not offered (ACCEPT_ENCODING)

ACCEPT_ENCODING = "gzip, deflate" + (", zstd" if _zstd is not None else "")


class _Stage:
    """One coding's decoder with an output budget: `feed` returns the decoded pieces,
    stopping (and setting `full`) once `room` bytes have come out."""

    def __init__(self, room: int):
        self.room = room
        self.full = False

    def _take(self, out: bytes, pieces: list[bytes]) -> None:
        if len(out) >= self.room:
            out, self.full = out[: self.room], True
        self.room -= len(out)
        if out:
            pieces.append(out)

    def feed(self, data: bytes) -> list[bytes]:
        raise NotImplementedError


class _Zlib(_Stage):
    """gzip (every member of a multi-member file) or deflate (zlib-wrapped, or raw as some
    servers send it), inflated at most `_PIECE` bytes per call."""

    def __init__(self, room: int, gzip: bool):
        super().__init__(room)
        self._gzip = gzip
        # deflate: the input so far, until zlib has checked a zlib header (its first 2 bytes);
        # a header error starts over as raw deflate with all of it.
        self._probe: bytes | None = None if gzip else b""
        self._d = zlib.decompressobj(zlib.MAX_WBITS | 16 if gzip else zlib.MAX_WBITS)

    def feed(self, data: bytes) -> list[bytes]:
        pieces: list[bytes] = []
        if self._probe is not None:
            self._probe += data
        while not self.full:
            try:
                out = self._d.decompress(data, min(_PIECE, self.room))
            except zlib.error as exc:
                if self._probe is not None:  # deflate without its zlib header
                    self._d, data, self._probe = zlib.decompressobj(-zlib.MAX_WBITS), self._probe, None
                    continue
                raise httpx.DecodingError(str(exc)) from exc
            if self._probe is not None and len(self._probe) >= 2:
                self._probe = None
            self._take(out, pieces)
            data = self._d.unconsumed_tail
            if self._d.eof:
                rest = self._d.unused_data
                if not (self._gzip and rest[:2] == b"\x1f\x8b"):
                    break  # the end, or trailing bytes that are no member: ignored, as browsers do
                self._d, data = zlib.decompressobj(zlib.MAX_WBITS | 16), rest
                continue
            # Input left over, or a full piece (more may be pending inside zlib): go on.
            if not data and len(out) < _PIECE:
                break
        return pieces


class _Full(Exception):
    pass


class _Zstd(_Stage):
    """zstd (every frame), through a stream writer whose sink stops it once the budget is
    spent: one `write` can no longer inflate past the cap. The window is bounded too."""

    def __init__(self, room: int):
        super().__init__(room)
        self._pieces: list[bytes] = []
        decompressor = _zstd.ZstdDecompressor(max_window_size=_ZSTD_WINDOW)
        # arg-type: a sink needs only write()
        self._w = decompressor.stream_writer(self, write_size=_PIECE, closefd=False)  # type: ignore[arg-type]

    def write(self, b: bytes) -> int:  # the stream writer's sink
        self._take(bytes(b), self._pieces)
        if self.full:
            raise _Full
        return len(b)

    def feed(self, data: bytes) -> list[bytes]:
        if not self.full:
            try:
                self._w.write(data)
            except _Full:
                pass
            except _zstd.ZstdError as exc:
                raise httpx.DecodingError(str(exc)) from exc
        pieces, self._pieces = self._pieces, []
        return pieces


def _stage(coding: str, room: int) -> _Stage | None:
    """The decoder of one coding; None for identity and for codings httpx ignores too."""
    if coding in ("gzip", "x-gzip"):
        return _Zlib(room, gzip=True)
    if coding == "deflate":
        return _Zlib(room, gzip=False)
    if coding == "zstd" and _zstd is not None:
        return _Zstd(room)
    if coding in ("zstd", "br", "compress", "x-compress"):
        raise httpx.DecodingError(f"unsupported Content-Encoding {coding} (not requested)")
    return None


class BoundedDecoder:
    """The raw body of an answer decoded through its `Content-Encoding` layers, at most
    `cap + 1` bytes out of each layer. `full` once a layer reached its budget: the body is
    over the cap (or, for an inner layer, its compressed form is), and reading can stop."""

    def __init__(self, content_encoding: str | None, cap: int):
        codings = [c.strip().lower() for c in (content_encoding or "").split(",") if c.strip()]
        # Listed in the order applied: the last one is undone first.
        self._stages = [s for s in (_stage(c, cap + 1) for c in reversed(codings)) if s is not None]
        self._room = cap + 1  # identity: the raw bytes themselves are bounded
        self.full = False

    def feed(self, raw: bytes) -> list[bytes]:
        """The decoded pieces of the next raw chunk."""
        pieces: Iterable[bytes] = [raw]
        for stage in self._stages:
            pieces = [out for piece in pieces for out in stage.feed(piece)]
            self.full = self.full or stage.full
        if not self._stages:
            out = b"".join(pieces)
            if len(out) >= self._room:
                out, self.full = out[: self._room], True
            self._room -= len(out)
            pieces = [out] if out else []
        return list(pieces)
