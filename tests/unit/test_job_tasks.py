"""The job graph's tasks (one class per kind, each with its own `run`) and the value a grid returns (`GridResult`),
without data: a job of any kind gets its status file and log from `execute`, and travels by cloudpickle."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import cloudpickle
import pandas as pd
import pytest

from irgrid.cluster.graph import CellTask, IndexTask, Job, MergeTask, ShardTask, Task
from irgrid.cluster.tasks import execute
from irgrid.grid import RESULT_COLUMNS, GridResult
from irgrid.runner.cell import Failure


@dataclass(kw_only=True)
class TouchTask(Task):
    """A kind no engine knows about: `execute` needs nothing but its `run`."""

    kind: ClassVar[str] = "touch"
    fail: bool = False

    def run(self, store, topics=None) -> Path:
        if self.fail:
            raise RuntimeError("touch failed on purpose")
        target = Path(store.root) / "touched"
        target.write_text(self.job_id)
        (Path(store.root) / "environment.json").write_text(json.dumps(dict(os.environ)))  # as the job saw it
        return target


def _common(tmp_path: Path) -> dict:
    from irgrid.util.settings import Settings

    settings = Settings(cache=tmp_path / "cache", passthrough=(("IRGRID_TEST_JOB", "1"),))
    return {"store_root": str(tmp_path / "cache"), "out": str(tmp_path / "out"), "settings": settings,
            "dataset": None}


def test_one_class_per_kind_each_picklable_with_its_own_fields(tmp_path):
    import irgrid
    from irgrid.pipelines.sparse import PISA_PORTER2

    common = _common(tmp_path)
    tasks = [IndexTask(job_id="i", recipe=PISA_PORTER2, **common),
             ShardTask(job_id="s", recipe=PISA_PORTER2, span=(0, 20), **common),
             MergeTask(job_id="m", recipe=PISA_PORTER2, ranges=[(0, 20), (20, 40)], **common),
             CellTask(job_id="c", retriever=irgrid.retriever("bm25-pisa"), latency_sample=3, **common)]
    assert [t.kind for t in tasks] == ["index", "shard", "merge", "cell"]
    assert len({type(t).run for t in tasks}) == 4  # each kind does its own work: no dispatch on a string
    for task in tasks:
        back = cloudpickle.loads(cloudpickle.dumps(task))
        assert type(back) is type(task) and back == task
    assert cloudpickle.loads(cloudpickle.dumps(tasks[3])).retriever.key() == irgrid.retriever("bm25-pisa").key()
    with pytest.raises(TypeError):
        ShardTask(job_id="s", recipe=PISA_PORTER2, **common)  # a shard without its span is refused at once
    job = Job("c", tasks[3].kind, "bm25-pisa on x", [], tasks[3], False, cells=[("x", "bm25-pisa")])
    assert job.kind == "cell"


def test_execute_runs_any_task_kind_with_its_status_file_and_log(tmp_path, monkeypatch):
    monkeypatch.setenv("IRGRID_TEST_JOB", "0")  # restored afterwards: execute applies the job's environment
    for name in _common(tmp_path)["settings"].environment():  # IR_DATASETS_HOME too: restored (or removed) after
        monkeypatch.setenv(name, os.environ.get(name, ""))
        if not os.environ[name]:
            monkeypatch.delenv(name)
    (tmp_path / "cache").mkdir()
    before = dict(os.environ)
    result = execute(TouchTask(job_id="touch-1", **_common(tmp_path)))
    assert result["job"] == "touch-1" and (tmp_path / "cache" / "touched").read_text() == "touch-1"
    status = json.loads((tmp_path / "out" / "jobs" / "touch-1.json").read_text())
    assert (status["status"], status["kind"], status["attempt"]) == ("done", "touch", 1)
    assert "job touch-1 (touch), attempt 1" in (tmp_path / "out" / "logs" / "touch-1.log").read_text()
    seen = json.loads((tmp_path / "cache" / "environment.json").read_text())
    assert seen["IRGRID_TEST_JOB"] == "1"  # the job's environment, applied where it runs
    assert seen["IR_DATASETS_HOME"] == str(tmp_path / "cache" / "irds")
    assert dict(os.environ) == before  # and put back after it: the worker's next job starts from its own
    with pytest.raises(RuntimeError, match="on purpose"):
        execute(TouchTask(job_id="touch-1", fail=True, **_common(tmp_path)))
    assert dict(os.environ) == before  # a failed job too
    status = json.loads((tmp_path / "out" / "jobs" / "touch-1.json").read_text())
    assert (status["status"], status["attempt"]) == ("failed", 2)
    assert status["error"] == "RuntimeError: touch failed on purpose" and "Traceback" in status["traceback"]


def test_grid_result_is_a_readable_value():
    rows = pd.DataFrame([{"dataset": "d", "system": s, "measure": "AP", "value": v, "p_value": None,
                          "p_value_corrected": None, "significant": None, "baseline": "a", "beyond_depth": False,
                          "n": 3} for s, v in (("a", 0.25), ("b", 0.5))], columns=RESULT_COLUMNS)
    failure = Failure("d", "c", "RuntimeError: out of memory\nmore", "Traceback ...")
    result = GridResult("exp", rows, pd.DataFrame(), [failure], Path("out"))
    assert result.to_frame() is result.results and not result.ok
    assert repr(result) == ("GridResult('exp': 1 dataset(s) x 2 system(s), 2 result rows, 1 failure(s), out='out')\n"
                            "  FAILED c on d: RuntimeError: out of memory")
    assert "<table" in result._repr_html_() and "FAILED c on d" in result._repr_html_()
    assert GridResult("exp", rows, pd.DataFrame()).ok


def test_only_the_local_executor_runs_without_an_output_folder():
    """Ray and Slurm keep the grid state and job logs in `out`: refused before any work when there is none."""
    from irgrid.cluster.config import ExecutorError
    from irgrid.cluster.executors import make

    make("local").check(None)
    for name in ("ray", "slurm"):
        with pytest.raises(ExecutorError, match=f"the {name} executor needs an output folder"):
            make(name).check(None)
        make(name).check(Path("out"))
