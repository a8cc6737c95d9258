"""Grids through real cluster engines: a local Ray cluster (PyPI `ray`) and Slurm through submitit (a real
slurmctld + slurmd when one answers on this machine, else submitit's local cluster, which runs the same job
scripts as local processes). A SciFact slice, BM25 (PISA) + all-MiniLM-L6-v2 (dense, encoded in shards) +
SPLADE-tiny (learned sparse), real weights; results must equal the local runner's."""

from __future__ import annotations

import collections
import gzip
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from irgrid import grid
from irgrid.cluster.config import ExecutorConfig
from irgrid.cluster.graph import build_graph
from irgrid.models.cache import MODELS
from irgrid.runner.experiment import from_dict
from irgrid.store import Store

CHUNK = 20  # encoding chunk: a 60-document corpus encodes as 3 shards
RETRIEVERS = ["bm25-pisa", "all-minilm-l6-v2", "splade-tiny"]


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """The experiment on a slice, and the local runner's results on it (the reference)."""
    from support import write_scifact_slice

    root = tmp_path_factory.mktemp("executors")
    files = write_scifact_slice(root, 10, 60)
    exp = {"name": "cluster", "collections": [{"name": "exec-slice", **files}], "datasets": ["exec-slice"],
           "retrievers": RETRIEVERS, "measures": ["nDCG@10", "R@100"], "baseline": "bm25-pisa",
           "correction": "holm", "latency_sample": 2}
    (root / "exp.yaml").write_text(json.dumps(exp))  # JSON is YAML
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("IRGRID_ENCODE_CHUNK", str(CHUNK))  # jobs inherit it: every process encodes the same chunks
        MODELS.release_all()  # engines made in this process pick up the chunk size
        spec = from_dict(exp, source=str(root / "exp.yaml"))
        reference = grid.run(spec, out=root / "local", store=Store(root / "local-cache"))
        assert reference.ok, reference.failures
        yield root, exp, spec


def _same_results(csv_a: Path, csv_b: Path) -> None:
    """Identical results.csv, latency aside (ms/query is a measurement of the machine, not a result)."""
    a, b = pd.read_csv(csv_a), pd.read_csv(csv_b)
    for df in (a, b):
        df.loc[df.measure == "ms/query", "value"] = 0.0
    pd.testing.assert_frame_equal(a, b, check_exact=True)


def _same_runs(out_a: Path, out_b: Path, systems: list[str]) -> None:
    for system in systems:
        ra, rb = (gzip.decompress((o / "runs" / "exec-slice" / f"{system}.res.gz").read_bytes()) for o in (out_a, out_b))
        assert ra == rb, system


def _no_duplicate_work(cache: Path) -> collections.Counter:
    builds = [json.loads(line) for line in (cache / "builds.log").read_text().splitlines()]
    per_artifact = collections.Counter(b["artifact"] for b in builds)
    assert max(per_artifact.values()) == 1, per_artifact  # every artifact was built exactly once
    return collections.Counter(b["kind"] for b in builds)


def test_job_graph_shares_indexes_and_orders_shards_before_merge(setup, tmp_path):
    root, exp, _ = setup
    spec = from_dict(dict(exp, retrievers=[*RETRIEVERS, {"name": "bm25-pisa", "as": "bm25-k1", "options": {"k1": 1.2}}]),
                     source=str(root / "exp.yaml"))
    jobs, cells = build_graph(spec, Store(tmp_path / "empty"), ExecutorConfig(executor="ray", shards=3), tmp_path)
    kinds = collections.Counter(j.kind for j in jobs)
    assert kinds == {"cell": 4, "shard": 3, "merge": 1, "index": 2}
    by_id = {j.id: j for j in jobs}
    cell = {j.cells[0][1]: j for j in jobs if j.kind == "cell"}
    assert cell["bm25-pisa"].deps == cell["bm25-k1"].deps  # one PISA index job for both
    (merge,) = [j for j in jobs if j.kind == "merge"]
    assert cell["all-minilm-l6-v2"].deps == [merge.id] and len(merge.deps) == 3
    assert [by_id[d].task.span for d in merge.deps] == [(0, 20), (20, 40), (40, 60)]
    order = [j.id for j in jobs]
    assert all(order.index(d) < order.index(j.id) for j in jobs for d in j.deps)  # dependencies come first
    # nothing to do on the cache where the local runner finished the grid
    done, _ = build_graph(spec, Store(root / "local-cache"), ExecutorConfig(executor="ray", shards=3), tmp_path)
    assert [j.cells for j in done] == [[("exec-slice", "bm25-k1")]]


def _kill_session(pid: int) -> None:
    """SIGKILL a process started with start_new_session, and everything it started (e.g. a local Ray cluster)."""
    import psutil

    for proc in psutil.process_iter(["pid"]):
        try:
            if os.getsid(proc.pid) == pid:
                os.kill(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _job_files(out: Path, pattern: str) -> list[dict]:
    found = []
    for path in sorted((out / "jobs").glob(pattern)) if (out / "jobs").exists() else []:
        try:
            found.append(json.loads(path.read_text()))
        except ValueError:  # being replaced
            pass
    return found


@pytest.mark.slow  # a local Ray cluster, a killed worker and driver: minutes on 2 cores
@pytest.mark.heavy  # ~70 s; make test keeps the Slurm executor and the local kill/resume tests
def test_ray_grid_survives_a_killed_worker_and_a_killed_driver(setup, tmp_path):
    """A Ray worker SIGKILLed mid-shard is retried by Ray; the driver SIGKILLed mid-grid leaves a state that
    `irgrid status` reports, and `irgrid run --resume` completes the grid with no artifact built twice."""
    root, _, _ = setup
    out, cache = tmp_path / "out", tmp_path / "cache"
    cfg = tmp_path / "cluster.yaml"
    cfg.write_text("executor: ray\nshards: 3\nray: {num_cpus: 2, max_retries: 2, poll_seconds: 0.5}\n")
    cmd = [sys.executable, "-m", "irgrid.cli", "run", str(root / "exp.yaml"), "--out", str(out), "--cache", str(cache),
           "--executor-config", str(cfg)]
    driver = subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 240
        victim = None
        while victim is None and time.time() < deadline and driver.poll() is None:
            running = [j for j in _job_files(out, "*--docs-*.json") if j["status"] == "running"]
            victim = running[0] if running else None
            time.sleep(0.1)
        assert victim is not None and victim["pid"] != driver.pid, "no shard job seen running"
        os.kill(victim["pid"], signal.SIGKILL)  # a Ray worker, mid-encoding
        retried = None
        while retried is None and time.time() < deadline and driver.poll() is None:
            again = [j for j in _job_files(out, f"{victim['job']}.json") if j["attempt"] >= 2]
            retried = again[0] if again else None
            time.sleep(0.1)
        assert retried is not None, "Ray did not retry the killed job"
        while not list((cache / "runs").glob("*/*.json")) and time.time() < deadline and driver.poll() is None:
            time.sleep(0.1)
        assert driver.poll() is None, "the grid finished before the driver could be killed"
    finally:
        _kill_session(driver.pid)  # the driver and its local Ray cluster, as a dead node would
        driver.wait()
    status = subprocess.run([sys.executable, "-m", "irgrid.cli", "status", str(out)], capture_output=True, text=True)
    assert "gone (killed?)" in status.stdout and status.returncode == 1, status.stdout + status.stderr
    assert not (out / "results.csv").exists()
    first = json.loads((out / "grid-state.json").read_text())
    resumed = subprocess.run([*cmd, "--resume"], capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    state = json.loads((out / "grid-state.json").read_text())
    assert state["submissions"] == 2 and len(state["jobs"]) < len(first["jobs"])  # only what was missing
    assert any(c["status"] == "cached" for c in state["cells"])
    assert all(j["status"] == "done" for j in state["jobs"].values())
    kinds = _no_duplicate_work(cache)
    assert kinds == {"shard": 3, "index": 3, "stage": 1, "run": 3}
    assert json.loads((out / "jobs" / f"{victim['job']}.json").read_text())["attempt"] >= 2
    _same_results(root / "local" / "results.csv", out / "results.csv")
    _same_runs(root / "local", out, RETRIEVERS)
    status = subprocess.run([sys.executable, "-m", "irgrid.cli", "status", str(out)], capture_output=True, text=True)
    assert status.returncode == 0 and "failed" not in status.stdout, status.stdout


def _raising_query(index, ctx):
    raise RuntimeError("simulated CUDA out of memory in a job")


def _slurm_answers() -> bool:
    if shutil.which("sinfo") is None:
        return False
    proc = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, timeout=30)
    return proc.returncode == 0 and any(s.strip() in ("idle", "mix", "alloc") for s in proc.stdout.splitlines())


@pytest.mark.slow  # every cell as a job through the fake sbatch: minutes on 2 cores
def test_slurm_executor_runs_the_grid_and_reports_a_failed_cell(setup, tmp_path):
    """Through submitit: a real Slurm when one answers here (jobs with --dependency=afterok), else submitit's
    local cluster. A cell whose job raises is reported with its log; the others equal the local runner's."""
    import cloudpickle

    from irgrid.cluster import state as grid_state
    from irgrid.core.retrievers import Retriever
    from irgrid.pipelines.sparse import PISA_PORTER2

    root, exp, _ = setup
    cluster = "slurm" if _slurm_answers() else "local"
    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the broken entry below lives in this test file
    spec = from_dict(dict(exp, retrievers=["bm25-pisa", "all-minilm-l6-v2"]), source=str(root / "exp.yaml"))
    spec.retrievers.append(Retriever(name="broken", family="sparse", architecture="lexical", index=PISA_PORTER2,
                                     query=_raising_query, options={}))
    out, cache = tmp_path / "out", tmp_path / "cache"
    config = ExecutorConfig(executor="slurm", cluster=cluster, shards=2, poll_seconds=0.5, max_parallel=2, time_min=20)
    results = grid.run(spec, out=out, store=Store(cache), executor=config).results
    failures = json.loads((out / "failures.json").read_text())
    assert [(f["retriever"], f["error"]) for f in failures] == [("broken", "RuntimeError: simulated CUDA out of memory in a job")]
    assert "log: " in failures[0]["traceback"] and "Traceback" in failures[0]["traceback"]
    data = grid_state.status(out)
    assert {c["retriever"]: c["status"] for c in data["cells"]} == \
        {"bm25-pisa": "done", "all-minilm-l6-v2": "done", "broken": "failed"}
    text = grid_state.format_status(data)
    assert "broken on exec-slice: failed: RuntimeError: simulated CUDA out of memory" in text
    log_path = Path(data["jobs"]["cell--exec-slice--broken"]["log"])
    assert "simulated CUDA out of memory" in log_path.read_text()
    assert all(j["engine_id"].startswith(f"{cluster}:") for j in data["jobs"].values())
    assert _no_duplicate_work(cache) == {"shard": 2, "index": 2, "run": 2}  # one PISA index for two cells
    reference = pd.read_csv(root / "local" / "results.csv").set_index(["system", "measure"])["value"]
    got = results.set_index(["system", "measure"])["value"]
    for system in ("bm25-pisa", "all-minilm-l6-v2"):
        for measure in ("nDCG@10", "R@100"):
            assert got[system, measure] == reference[system, measure]
    _same_runs(root / "local", out, ["bm25-pisa", "all-minilm-l6-v2"])
    # resubmitting computes nothing that exists: only the failed cell is submitted again (and fails again)
    jobs, _ = build_graph(spec, Store(cache), config, out)
    assert [j.id for j in jobs] == ["cell--exec-slice--broken"]
