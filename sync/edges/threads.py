"""A blocking call a pass can walk away from: the model call of a batch.

`asyncio.to_thread` runs on the loop's default executor, and `asyncio.run` waits for every
thread of that executor before it returns, also after Ctrl-C: a pass interrupted during a
model batch of half a minute took that half minute to end. `in_daemon_thread` runs the
call in a daemon thread of its own instead: a cancelled pass stops waiting at once, the
thread's result is dropped, and the process exits without joining it. Only calls whose
result is all they leave behind may run so (the model computes vectors and writes
nothing); store writes stay on the default executor, so that a pass ends only after the
write in flight was confirmed or failed, and the store is then closed cleanly.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Callable

__all__ = ["in_daemon_thread"]


def in_daemon_thread(fn: Callable[..., Any], *args: Any, name: str = "pagesync-call") -> asyncio.Future:
    """`fn(*args)` in a new daemon thread; a future of its result on the running loop.
    Cancelling the future abandons the call (it runs on, unobserved, and is not waited for)."""
    loop = asyncio.get_running_loop()
    fut: asyncio.Future = loop.create_future()

    def settle(ok: bool, value: Any) -> None:
        if fut.done():  # cancelled meanwhile: nobody waits for it
            return
        if ok:
            fut.set_result(value)
        else:
            fut.set_exception(value)

    def deliver(ok: bool, value: Any) -> None:
        try:
            loop.call_soon_threadsafe(settle, ok, value)
        except RuntimeError:  # the loop is closed: the pass ended without this result
            pass

    def work() -> None:
        try:
            result = fn(*args)
        except BaseException as exc:  # KeyboardInterrupt included: the awaiting pass raises it
            deliver(False, exc)
        else:
            deliver(True, result)

    threading.Thread(target=work, name=name, daemon=True).start()
    return fut
