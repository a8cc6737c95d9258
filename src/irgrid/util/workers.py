"""Worker processes that end with their parent.

A spawned worker (multiprocessing's Pool, concurrent.futures' ProcessPoolExecutor) outlives a parent killed by a
signal: SIGTERM and SIGKILL skip the pool's shutdown, so an orphaned worker went on encoding a whole corpus (or
holding a JVM) for nobody, seen when a `irgrid audit --stability` was stopped. Neither library offers an option for
this (Linux's PR_SET_PDEATHSIG is not reachable from the standard library), hence this initializer."""

from __future__ import annotations

import os
import threading
import time


def exit_with_parent(parent: int, poll: float = 0.5) -> None:
    """Pool initializer (`initializer=exit_with_parent, initargs=(os.getpid(),)`): a daemon thread ends this
    worker once its parent process `parent` is gone (the worker is re-parented)."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll)
        os._exit(1)

    threading.Thread(target=watch, daemon=True, name="irgrid-exit-with-parent").start()
