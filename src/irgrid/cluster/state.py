"""The state of a submitted grid on disk: the submitting process keeps `OUT/grid-state.json` (jobs and cells:
pending, submitted, running, done, failed, blocked, cached, with log paths); each job writes `OUT/jobs/<id>.json`
(running/done/failed, attempt, host, pid). `irgrid status OUT` reads both (`status`, `format_status`)."""

from __future__ import annotations

import collections
import json
import os
import socket
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from irgrid.cluster.config import ExecutorError
from irgrid.cluster.graph import spec_hash
from irgrid.util.files import write_text_atomic

if TYPE_CHECKING:
    from irgrid.cluster.config import ExecutorConfig
    from irgrid.cluster.graph import Job
    from irgrid.runner.cell import Failure
    from irgrid.runner.experiment import ExperimentSpec

STATE = "grid-state.json"
STATE_FORMAT = 1
FINAL = ("done", "failed", "blocked", "cached")


def read_json(path: Path) -> dict[str, Any] | None:
    """A state or job file; None while it is missing or being replaced."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


class GridState:
    def __init__(self, out: Path, spec: ExperimentSpec, config: ExecutorConfig, jobs: list[Job],
                 cells: list[dict[str, Any]], previous: dict[str, Any] | None):
        self.out, self.path = out, out / STATE
        self.jobs_by_id = {j.id: j for j in jobs}
        self.data: dict[str, Any] = {
            "format": STATE_FORMAT, "experiment": spec.name, "source": spec.source, "experiment_hash": spec_hash(spec),
            "executor": config.executor, "submissions": (previous or {}).get("submissions", 0) + 1,
            "driver": {"host": socket.gethostname(), "pid": os.getpid(), "started": round(time.time(), 3),
                       "finished": None},
            "jobs": {j.id: {"kind": j.kind, "label": j.label, "deps": j.deps, "status": "pending", "engine_id": None,
                            "log": str(out / "logs" / f"{j.id}.log"), "error": None, "cells": [list(c) for c in j.cells],
                            "accelerator": j.accelerator}
                     for j in jobs},
            "cells": [],
        }
        for c in cells:
            status = "cached" if c.get("cached") else "pending"
            self.data["cells"].append({**{k: v for k, v in c.items() if k != "cached"}, "status": status})

    def job(self, job_id: str) -> dict[str, Any]:
        return self.data["jobs"][job_id]

    def submitted(self, job_id: str, engine_id: str | None, extra_log: str | None = None) -> None:
        rec = self.job(job_id)
        rec["engine_id"] = engine_id
        rec["status"] = "submitted" if rec["status"] == "pending" else rec["status"]
        if extra_log:
            rec["engine_log"] = extra_log

    def finished(self, job_id: str, ok: bool, error: str | None = None) -> None:
        rec = self.job(job_id)
        rec["status"] = "done" if ok else "failed"
        if error:
            rec["error"] = error
        self._sync_job_file(job_id)

    def block_if_needed(self, job_id: str) -> bool:
        """A job that needs a failed (or blocked) job is 'blocked', naming that job; True when it is."""
        bad = [d for d in self.job(job_id)["deps"]
               if self.data["jobs"].get(d, {}).get("status") in ("failed", "blocked")]
        if bad:
            self.job(job_id).update(status="blocked", error=f"not run: needed job {bad[0]} failed")
        return bool(bad)

    def refresh(self) -> None:
        """Running jobs, attempts and errors from the jobs' own status files; cells from the jobs; then write."""
        for job_id, rec in self.data["jobs"].items():
            if rec["status"] in ("done", "failed", "blocked"):
                continue
            self._sync_job_file(job_id)
        self._cells()
        self.write()

    def _sync_job_file(self, job_id: str) -> None:
        rec = self.job(job_id)
        status = read_json(self.out / "jobs" / f"{job_id}.json")
        if status is None:
            return
        rec["attempt"] = status.get("attempt")
        rec["host"], rec["pid"] = status.get("host"), status.get("pid")
        if rec["status"] in ("pending", "submitted") and status.get("status") == "running":
            rec["status"] = "running"
        if status.get("status") == "failed" and not rec.get("error"):
            rec["error"] = status.get("error")

    def close(self) -> None:
        """Jobs that never started because a job they needed failed are 'blocked' (an engine reports them failed,
        or they were never submitted); in dependency order, so a blocked job blocks what depends on it."""
        for job_id, rec in self.data["jobs"].items():
            never_started = rec["status"] == "failed" and not (self.out / "jobs" / f"{job_id}.json").exists()
            if never_started or rec["status"] in ("pending", "submitted"):
                self.block_if_needed(job_id)
        self.data["driver"]["finished"] = round(time.time(), 3)
        self._cells()
        self.write()

    def _cells(self) -> None:
        for cell in self.data["cells"]:
            if cell["status"] == "cached":
                continue
            rec = self.data["jobs"].get(cell["job"])
            if rec is None:
                continue
            cell["status"] = {"submitted": "pending"}.get(rec["status"], rec["status"])
            cell["error"] = rec.get("error")
            cell["log"] = rec["log"]

    def write(self) -> None:
        write_text_atomic(self.path, json.dumps(self.data, indent=2))

    def failures(self) -> dict[tuple[str, str], Failure]:
        from irgrid.runner.cell import Failure

        out: dict[tuple[str, str], Failure] = {}
        for cell in self.data["cells"]:
            if cell["status"] in ("failed", "blocked"):
                rec = self.data["jobs"][cell["job"]]
                status = read_json(self.out / "jobs" / f"{cell['job']}.json") or {}
                detail = f"log: {rec['log']}" + (f"\nengine log: {rec['engine_log']}" if rec.get("engine_log") else "")
                out[(cell["dataset"], cell["retriever"])] = Failure(
                    cell["dataset"], cell["retriever"], rec.get("error") or "job failed",
                    detail + ("\n" + status["traceback"] if status.get("traceback") else ""))
        return out


def load_state(out: str | Path) -> dict[str, Any] | None:
    return read_json(Path(out) / STATE)


# -------------------------------------------------------------------------------------------------------------
# `irgrid status OUT`

def status(out: str | Path) -> dict[str, Any]:
    """The grid state with what the cache and the jobs say now (a cell whose run is stored is done whatever the
    submitting process last wrote; a job that says running while its driver is gone is 'stale')."""
    out = Path(out)
    data = load_state(out)
    if data is None:
        raise ExecutorError(f"{out} holds no {STATE}: not a grid submitted with --executor ray|slurm")
    driver = data["driver"]
    alive = driver.get("finished") is None and _alive(driver.get("host"), driver.get("pid"))
    data["driver"]["alive"] = alive
    for job_id, rec in data["jobs"].items():
        status = read_json(out / "jobs" / f"{job_id}.json") or {}
        rec["attempt"] = status.get("attempt", rec.get("attempt"))
        if rec["status"] in ("pending", "submitted") and status.get("status") == "running":
            rec["status"] = "running"
        if rec["status"] not in FINAL and status.get("status") in ("done", "failed"):
            rec["status"] = status["status"]
            rec["error"] = status.get("error")
        if rec["status"] in ("pending", "submitted", "running") and not alive and driver.get("finished") is None:
            engine = str(rec.get("engine_id") or "")
            if not engine.startswith("slurm:"):  # Ray and local jobs end with their driver
                rec["status"] = "stale"
    for cell in data["cells"]:
        if cell["status"] == "cached":
            continue
        if cell.get("run") and Path(cell["run"]).exists() and Path(cell["meta"]).exists():
            cell["status"] = "done"
            continue
        rec = data["jobs"].get(cell["job"], {})
        cell["status"] = {"submitted": "pending"}.get(rec.get("status", "pending"), rec.get("status", "pending"))
        cell["error"], cell["log"] = rec.get("error"), rec.get("log")
    return data


def _alive(host: str | None, pid: int | None) -> bool:
    if not pid:
        return False
    if host != socket.gethostname():
        return True  # cannot tell from here: assume it is
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def format_status(data: Mapping[str, Any]) -> str:
    cells = data["cells"]
    counts = collections.Counter(c["status"] for c in cells)
    driver = data["driver"]
    when = "finished" if driver.get("finished") else ("running" if driver.get("alive") else "gone (killed?)")
    lines = [f"experiment {data['experiment']} ({data['source']}), executor {data['executor']}, "
             f"submission {data['submissions']}; submitting process on {driver['host']} pid {driver['pid']}: {when}",
             "cells: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) + f" (of {len(cells)})", ""]
    width = max((len(c["retriever"]) for c in cells), default=9)
    dwidth = max((len(c["dataset"]) for c in cells), default=7)
    for c in cells:
        lines.append(f"{c['dataset'].ljust(dwidth)}  {c['retriever'].ljust(width)}  {c['status']}")
    jobs = [(i, r) for i, r in data["jobs"].items() if r["kind"] != "cell"]
    if jobs:
        lines += ["", "index jobs:"]
        for _job_id, rec in jobs:
            attempt = f" (attempt {rec['attempt']})" if rec.get("attempt") and rec["attempt"] > 1 else ""
            lines.append(f"  {rec['status']:<9} {rec['label']}{attempt}")
    bad = [(i, r) for i, r in data["jobs"].items() if r["status"] in ("failed", "blocked", "stale")]
    if bad:
        lines += ["", "failed:"]
        for _job_id, rec in bad:
            lines.append(f"  {rec['label']}: {rec['status']}: {rec.get('error') or 'no result'}")
            lines.append(f"    log: {rec['log']}" + (f"  engine log: {rec['engine_log']}" if rec.get("engine_log") else ""))
        lines += ["", "resubmit what is missing: irgrid run EXPERIMENT --out OUT --executor ... --resume"]
    return "\n".join(lines) + "\n"
