"""Spawned workers end with their parent (irgrid.util.workers): a parent killed by SIGKILL (no pool shutdown) left
its stability-audit worker encoding a corpus for nobody."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

PARENT = textwrap.dedent("""
    import concurrent.futures, multiprocessing, os, sys, time
    from irgrid.util.workers import exit_with_parent

    def work(path):
        open(path, "w").write(str(os.getpid()))
        time.sleep(120)

    if __name__ == "__main__":
        kw = dict(initializer=exit_with_parent, initargs=(os.getpid(),)) if sys.argv[2] == "watched" else {}
        pool = concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"), **kw)
        pool.submit(work, sys.argv[1])
        while not os.path.exists(sys.argv[1]) or not open(sys.argv[1]).read():
            time.sleep(0.05)
        os.kill(os.getpid(), 9)  # no shutdown: what a killed `irgrid audit` does
""")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:  # a zombie waiting for init to reap it counts as gone
        return f.read().split(")")[-1].split()[0] != "Z"


def _orphan(tmp_path, mode: str) -> int:
    script, pidfile = tmp_path / "parent.py", tmp_path / f"worker-{mode}.pid"
    script.write_text(PARENT)
    log = tmp_path / f"parent-{mode}.log"  # the killed parent's resource tracker reports leaked semaphores there
    with log.open("w") as err:
        proc = subprocess.run([sys.executable, str(script), str(pidfile), mode], timeout=120, stderr=err)
    assert proc.returncode == -signal.SIGKILL, log.read_text()
    return int(pidfile.read_text())


def _gone_within(pid: int, seconds: float) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if not _alive(pid):
            return True
        time.sleep(0.1)
    return False


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc to tell a zombie from a live process")
def test_a_watched_worker_ends_when_its_parent_is_killed(tmp_path):
    assert _gone_within(_orphan(tmp_path, "watched"), 30)


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc to tell a zombie from a live process")
def test_an_unwatched_worker_outlives_its_killed_parent(tmp_path):
    """The control: without the initializer the orphan keeps running (so the test above shows the fix)."""
    pid = _orphan(tmp_path, "plain")
    try:
        assert not _gone_within(pid, 3)
    finally:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
