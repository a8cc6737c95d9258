"""File locks on the shared cache: whoever holds an artifact's lock builds it, everybody else waits and reuses it.

The locks are `flock`/`fcntl` locks (PyPI `filelock`), so the kernel releases them when the holder dies: a job
killed by Slurm, the OOM killer or SIGKILL never leaves a stale lock, and nothing it half-wrote is trusted
(artifacts are published by an atomic rename, see `irgrid.util.files`). On NFS, Linux maps `flock` onto NFS byte-range
locks (NFSv4, or v3 with lockd); Lustre and GPFS need their `flock` mount option, which HPC sites enable.

The pattern (`Store.building`): check the artifact; if absent, take its lock; check again (another job may
have published it while we waited); build only if it is still absent.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

from filelock import FileLock, Timeout

from irgrid.util.errors import Error

log = logging.getLogger("irgrid")


class LockTimeout(Error, TimeoutError):
    """An artifact's lock was not free within the allowed time."""


@contextlib.contextmanager
def hold(path: str | os.PathLike, what: str, timeout: float | None = None) -> Iterator[None]:
    """Hold the exclusive lock at `path` (created if needed) for the block; wait for it, logging once whom for.

    `timeout` None waits as long as it takes (a build can take hours; its holder is alive while it builds,
    since a dead holder's lock is released by the kernel).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(path), timeout=-1)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        holder = lock_holder(path)
        log.info("waiting for %s: being built by %s", what, holder or "another job")
        start = time.monotonic()
        try:
            lock.acquire(timeout=-1 if timeout is None else timeout)
        except Timeout:
            raise LockTimeout(f"{what}: lock {path} still held by {holder or 'another job'} after {timeout}s") from None
        log.info("%s: lock acquired after %.1fs", what, time.monotonic() - start)
    try:
        _write_holder(path)
        yield
    finally:
        lock.release()


def is_locked(path: str | os.PathLike) -> bool:
    """Whether some live process holds the lock at `path` now (for status displays; racy by nature)."""
    path = Path(path)
    if not path.exists():
        return False
    lock = FileLock(str(path), timeout=0)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        return True
    lock.release()
    return False


def _holder_file(path: Path) -> Path:
    return path.with_name(path.name + ".holder")


def _write_holder(path: Path) -> None:
    """Who holds the lock (host and pid), for the 'waiting for' message; informational only."""
    try:
        _holder_file(path).write_text(f"{socket.gethostname()}:{os.getpid()}")
    except OSError:
        pass


def lock_holder(path: Path) -> str:
    try:
        return _holder_file(path).read_text().strip()
    except OSError:
        return ""
