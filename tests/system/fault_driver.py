"""Fault injection for tests/test_faults.py: kill a grid (SIGKILL) at the k-th write-like call, rerun it, and
compare every output with an uninterrupted run.

Run as `python fault_driver.py EXPERIMENT WORKDIR N_POINTS`. Imports happen once; every grid runs in a forked
child (seconds instead of an interpreter start each), which kills itself with SIGKILL at its injected point.
Prints one JSON object: the reference run's call count and phases, and per point the phase it hit and
whether the rerun was identical.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import signal
import sys
import traceback
from pathlib import Path

import pandas as pd

from irgrid import grid
from irgrid.core import retrievers
from irgrid.core.retrievers import DocStage, IndexRecipe, Retriever
from irgrid.pipelines.sparse import bm25_query, build_pisa, open_pisa  # noqa: E402
from irgrid.runner import cell as cell_mod
from irgrid.runner.experiment import load
from irgrid.runner.outputs import verify_outputs
from irgrid.store import Store


def lowercase_stage(ctx):
    """A cheap real document stage (lower-cased text), so stage writing is among the fault points."""
    import pyterrier as pt

    return pt.apply.text(lambda row: row["text"].lower())


retrievers.register(Retriever(
    name="bm25-lower", family="sparse", architecture="lexical", query=bm25_query,
    index=IndexRecipe("pisa-lower", build=build_pisa, open=open_pisa, params={"stemmer": "porter2", "stops": "terrier"},
                      stage=DocStage("lowercase", make=lowercase_stage)),
    options={"k1": 0.9, "b": 0.4, "num_results": 1000},
))

PHASES = (("write_outputs", "outputs"), ("writing", "outputs"), ("_copy_atomic", "outputs"),
          ("_write_stage", "stage"), ("Stages.write", "stage"), ("Indexes.build", "index"), ("Runs.save", "run"),
          ("_compute_cell", "run"))


def _phase() -> str:
    names = []
    frame = sys._getframe(2)
    while frame is not None:
        names += [frame.f_code.co_name, frame.f_code.co_qualname]  # methods of the store's areas by qualname
        frame = frame.f_back
    for name, phase in PHASES:
        if name in names:
            return phase
    return "other"


def _instrument(kill_at: int, log: list[str]) -> None:
    """Count calls that write or publish; SIGKILL this process at call number `kill_at` (0: never)."""

    def wrap(owner, attr):
        original = getattr(owner, attr)

        def wrapped(*a, **kw):
            log.append(f"{attr}:{_phase()}")
            if len(log) == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
            return original(*a, **kw)

        setattr(owner, attr, wrapped)

    import pathlib

    for owner, attr in ((os, "replace"), (os, "rename"), (shutil, "copyfile"), (shutil, "rmtree"),
                        (pathlib.Path, "write_text"), (pathlib.Path, "unlink"), (gzip, "open"),
                        (pd.DataFrame, "to_csv")):
        wrap(owner, attr)
    tracked = cell_mod._TrackedDocs.__call__

    def docs(self):  # inside index builds and stages: every 50 documents is a point too
        for i, doc in enumerate(tracked(self)):
            if i % 50 == 49:
                log.append(f"docs:{_phase()}")
                if len(log) == kill_at:
                    os.kill(os.getpid(), signal.SIGKILL)
            yield doc

    cell_mod._TrackedDocs.__call__ = docs


def _child(experiment: str, cache: Path, out: Path, kill_at: int, log_path: Path) -> None:
    log: list[str] = []
    code = 0
    try:
        _instrument(kill_at, log)
        grid.run(load(experiment), out=out, store=Store(cache))
    except BaseException:
        traceback.print_exc()
        code = 1
    log_path.write_text(json.dumps(log))
    os._exit(code)


def run_grid(experiment: str, cache: Path, out: Path, kill_at: int, log_path: Path) -> int:
    pid = os.fork()
    if pid == 0:
        _child(experiment, cache, out, kill_at, log_path)
    _, status = os.waitpid(pid, 0)
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def snapshot(out: Path) -> dict[str, str]:
    """Every output that must not depend on a kill (timings removed)."""
    verify_outputs(out)
    results = pd.read_csv(out / "results.csv")
    snap = {"results.csv": results[results["measure"] != "ms/query"].to_csv(index=False),
            "perquery.csv": (out / "perquery.csv").read_text(),
            "failures.json": (out / "failures.json").read_text()}
    for run in sorted((out / "runs").rglob("*.res.gz")):
        snap[str(run.relative_to(out))] = gzip.decompress(run.read_bytes()).decode()
    return snap


def main() -> None:
    experiment, work, n_points = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
    ref_log = work / "ref.json"
    rc = run_grid(experiment, work / "ref-cache", work / "ref-out", 0, ref_log)
    assert rc == 0, f"reference run failed: {rc}"
    reference = snapshot(work / "ref-out")
    calls = json.loads(ref_log.read_text())
    total = len(calls)
    points = sorted({1 + i * (total - 1) // (n_points - 1) for i in range(n_points)})
    outcome = []
    for k in points:
        cache, out = work / f"c{k}", work / f"o{k}"
        killed = run_grid(experiment, cache, out, k, work / f"k{k}.json")
        again = run_grid(experiment, cache, out, 0, work / f"r{k}.json")
        try:
            same = again == 0 and snapshot(out) == reference
        except Exception as e:
            same = f"{type(e).__name__}: {e}"
        outcome.append({"point": k, "call": calls[k - 1], "killed_rc": killed, "rerun_rc": again, "identical": same})
        shutil.rmtree(cache, ignore_errors=True)
    print(json.dumps({"total_calls": total, "phases": sorted({c.split(':')[1] for c in calls}),
                      "points": outcome}))


if __name__ == "__main__":
    main()
