"""A blocking call a pass can walk away from: the model call of a batch.

`asyncio.to_thread` runs on the loop's default executor, and `asyncio.run` waits for every
thread of that executor before it returns, also after Ctrl-C: a pass interrupted during a
model batch of half a minute took that half minute to end. `in_daemon_thread` runs the
call in a daemon thread of its own instead: a cancelled pass stops waiting at once, the
thread's result is dropped, and the process exits without joining it. Only calls whose
result is all they leave behind may run so (the model computes vectors and writes
nothing); store writes stay on the default executor, so that a pass ends only after the
write in flight was confirmed or failed, and the store is then closed cleanly.

A call still running when the process ends must not meet the interpreter's finalisation
(in Python 3.11 a daemon thread that wakes then is ended by `pthread_exit`, which unwinds
the native frames of ONNX Runtime and aborts the process): `running()` says whether one
does, so the command exits with `os._exit` instead.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Callable

__all__ = ["in_daemon_thread", "running"]

_running: set[threading.Thread] = set()  # calls started and not yet returned
_lock = threading.Lock()


def running() -> int:
    """How many calls started by `in_daemon_thread` have not returned yet."""
    with _lock:
        return len(_running)


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
        finally:
            with _lock:
                _running.discard(thread)

    thread = threading.Thread(target=work, name=name, daemon=True)
    with _lock:  # counted before it starts: a call is never running uncounted
        _running.add(thread)
    thread.start()
    return fut
