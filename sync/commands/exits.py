"""How a command ends: one line on stderr and an exit code. `guarded` runs a command's body
and maps what escapes it (0 done; 1 finished with failures; 2 bad usage or configuration;
130 interrupted; 141 a reader of stdout gone)."""

from __future__ import annotations

import logging
import os
import signal
import sys
from typing import Any, Callable, NoReturn

import typer

from ..errors import PagesyncError

__all__ = [
    "fail",
    "EXIT_INTERRUPTED",
    "EXIT_BROKEN_PIPE",
    "PROCESS",
    "exit_now",
    "interrupted_outside_a_body",
    "guarded",
]


def fail(exc: BaseException, code: int) -> None:
    typer.echo(f"pagesync: error: {exc}", err=True)
    raise typer.Exit(code)


EXIT_INTERRUPTED = 130  # 128 + SIGINT: the shell's code for a command stopped by Ctrl-C
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE: the shell's code for a writer whose reader left (`export | head`)


# Set by `main`: this process is the command itself, so it may end with `os._exit` (below).
PROCESS = {"hard_exit": False}


def exit_now(code: int) -> NoReturn:
    """End the process with `code` at once, after flushing what it printed, without the
    interpreter's finalisation: a model call abandoned in a daemon thread (ONNX Runtime's,
    mid-batch) would otherwise be torn down by it and abort the process (SIGABRT). Only
    ever called with the state and the store closed, or never opened: nothing is lost."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a reader gone, a stream closed: nothing more to say
            pass
    os._exit(code)


def interrupted_outside_a_body(signum: int, frame: Any) -> None:
    """SIGINT while options are read or after a command's body: nothing is open, so exit
    130 at once (click would print "Aborted!" and exit 1)."""
    typer.echo("pagesync: interrupted", err=True)
    exit_now(EXIT_INTERRUPTED)


def guarded(fn: Callable[[], int], interrupted: str = "interrupted") -> None:
    """Run a command body: PagesyncError -> one line and its exit code (the error class
    decides: configuration and environment errors, sync.errors.ConfigError and its kin, are
    2); an OSError that reached this far (a path pagesync cannot use) is 2 as well. Ctrl-C
    (SIGINT) is one line, `interrupted`, and exit 130 (the shell's convention), never 1,
    which means "finished, but pages failed". A reader of stdout that went away (`export |
    head`) ends the command quietly with 141, as SIGPIPE would, not as a usage error."""
    # Within the body Ctrl-C is a KeyboardInterrupt (asyncio.run turns it into a cancelled
    # pass), so that the state and the store are closed on the way out before the exit.
    outside = signal.getsignal(signal.SIGINT) is interrupted_outside_a_body
    if outside:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        code = fn()
    except PagesyncError as exc:
        fail(exc, exc.exit_code)
    except BrokenPipeError:
        # Before OSError, its base. stdout goes to /dev/null so that the interpreter's last
        # flush at exit does not raise (and print) the same error again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise typer.Exit(EXIT_BROKEN_PIPE) from None
    except OSError as exc:
        fail(exc, 2)
    except KeyboardInterrupt:
        typer.echo(f"pagesync: {interrupted}", err=True)
        if PROCESS["hard_exit"]:  # a model call may still run in a thread of its own
            exit_now(EXIT_INTERRUPTED)
        raise typer.Exit(EXIT_INTERRUPTED) from None
    finally:
        if outside:
            signal.signal(signal.SIGINT, interrupted_outside_a_body)
    raise typer.Exit(code)
