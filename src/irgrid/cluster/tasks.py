"""One job, run out of process where the engine put it (a Ray worker, a Slurm job, a local process): its environment,
status file and log around the work of its task (`Task.run`, against the shared cache under its locks)."""

from __future__ import annotations

import json
import logging
import os
import socket
import time
import traceback
from pathlib import Path
from typing import Any

from irgrid.cluster.graph import Task
from irgrid.cluster.state import read_json
from irgrid.util.files import write_text_atomic

log = logging.getLogger("irgrid")


def execute(task: Task, *dependencies: Any) -> dict[str, Any]:
    """Run one job, under the settings it was submitted with. `dependencies` are the results of the jobs it waited
    for (Ray passes them; unused)."""
    from irgrid.util import settings

    # exported for ir_datasets, Hugging Face, Java, which read them themselves; put back afterwards (a Ray worker
    # or a local executor's process runs other jobs next)
    with settings.exported(task.settings.environment()), settings.using(task.settings):
        return _execute(task)


def _execute(task: Task) -> dict[str, Any]:
    out = Path(task.out)
    status_path = out / "jobs" / f"{task.job_id}.json"
    log_path = out / "logs" / f"{task.job_id}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    previous = read_json(status_path) or {}
    attempt = int(previous.get("attempt", 0)) + 1
    handler = logging.FileHandler(log_path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s", "%H:%M:%S"))
    root = logging.getLogger("irgrid")
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    started = time.time()
    base = {"job": task.job_id, "kind": task.kind, "attempt": attempt, "host": socket.gethostname(),
            "pid": os.getpid(), "started": round(started, 3), "log": str(log_path)}
    try:
        log.info("job %s (%s), attempt %d, on %s pid %d", task.job_id, task.kind, attempt, base["host"], base["pid"])
        write_text_atomic(status_path, json.dumps({**base, "status": "running"}, indent=2))
        from irgrid import store as store_mod

        store = store_mod.Store(task.store_root)
        with store_mod.using(store):  # the job's caches (tiny models, GGUF, generations) are its grid's
            task.run(store)
        log.info("job %s finished", task.job_id)
    except BaseException as e:
        tb = traceback.format_exc()
        log.error("job %s FAILED: %s: %s\n%s", task.job_id, type(e).__name__, e, tb)
        write_text_atomic(status_path, json.dumps({**base, "status": "failed", "error": f"{type(e).__name__}: {e}",
                                                   "traceback": tb, "finished": round(time.time(), 3)}, indent=2))
        raise
    finally:
        root.removeHandler(handler)
        handler.close()
    seconds = round(time.time() - started, 3)
    write_text_atomic(status_path, json.dumps({**base, "status": "done", "seconds": seconds,
                                               "finished": round(time.time(), 3)}, indent=2))
    return {"job": task.job_id, "seconds": seconds}
