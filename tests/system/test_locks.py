"""Locks on the shared cache: one builder per artifact across processes, none left by a killed holder, nothing
half-written ever trusted."""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import time

import pytest

from irgrid.util import locks

HOLD = """
import sys, time
from irgrid.util import locks
with locks.hold(sys.argv[1], "test artifact"):
    print("held", flush=True)
    time.sleep(60)
"""


def test_a_killed_holder_releases_its_lock(tmp_path):
    lock = tmp_path / "a.lock"
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(lock)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    assert locks.is_locked(lock)
    with pytest.raises(locks.LockTimeout, match="still held by"):
        with locks.hold(lock, "test artifact", timeout=0.2):
            pass
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    start = time.monotonic()
    with locks.hold(lock, "test artifact", timeout=5):
        assert time.monotonic() - start < 2  # the kernel released it with the process: no stale lock
    assert not locks.is_locked(lock)


_BUILDS = "calls.txt"


def _slow_build(ctx) -> None:
    with open(ctx.path.parent.parent.parent / _BUILDS, "a") as f:  # <cache>/indexes/<corpus>/<tmp>
        f.write(f"{os.getpid()}\n")
    time.sleep(1.5)
    (ctx.path / "data.txt").write_text("\n".join(d["docno"] for d in ctx.docs()))


def _open(path, params, models):
    return (path / "data.txt").read_text().split()


def _ensure(root: str, exp: dict, source: str, barrier) -> None:
    from irgrid.core.retrievers import IndexRecipe
    from irgrid.runner import cell as cell_mod
    from irgrid.runner.experiment import from_dict
    from irgrid.store import Store

    spec = from_dict(exp, source=source)
    recipe = IndexRecipe("slow-test", build=_slow_build, open=_open)
    barrier.wait()
    cell_mod.ensure_index(recipe, spec.datasets[0], Store(root))


def test_concurrent_builders_build_once_and_share(tmp_path):
    from support import write_scifact_slice

    from irgrid.core.retrievers import IndexRecipe
    from irgrid.runner.experiment import from_dict
    from irgrid.store import Store

    files = write_scifact_slice(tmp_path, 2, 20)
    exp = {"name": "locks", "collections": [{"name": "locks-slice", **files}], "datasets": ["locks-slice"],
           "retrievers": ["bm25-pisa"]}
    source = str(tmp_path / "exp.yaml")
    spec = from_dict(exp, source=source)
    store = Store(tmp_path / "cache")
    recipe = IndexRecipe("slow-test", build=_slow_build, open=_open)
    final = store.indexes.dir(recipe, spec.datasets[0])
    # a builder killed earlier left a half-written folder: never read as an index, removed by the next builder
    stale = final.parent / f".{final.name}.tmp-killed"
    stale.mkdir(parents=True)
    (stale / "data.txt").write_text("half")
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(3)
    procs = [ctx.Process(target=_ensure, args=(str(store.root), exp, source, barrier)) for _ in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0, 0]
    assert len((store.root / _BUILDS).read_text().split()) == 1  # one builder; the other two waited and reused it
    assert [b["kind"] for b in store.builds()] == ["index"]
    assert store.indexes.ready(recipe, spec.datasets[0]) and not stale.exists()
    assert len((final / "data.txt").read_text().split()) == 20
    assert not list(store.root.rglob("*.tmp-*"))
