"""The settings travel as a value, never through the environment. The CLI's flags reach the command while
`os.environ` stays as it was; a cluster job runs under the settings it was submitted with: the task carries the
`Settings` value (pickled as Ray and submitit pickle it), and the job reads them, not the environment of the process
it lands in (a 60-document SciFact slice with BM25 (PISA): an index job and a cell job, run in this process by
`tasks.execute`)."""

from __future__ import annotations

import dataclasses
import json
import os
import pickle
from pathlib import Path

import cloudpickle

from irgrid.cluster.config import ExecutorConfig
from irgrid.cluster.graph import build_graph
from irgrid.cluster.tasks import execute
from irgrid.runner import cell as cell_mod
from irgrid.runner.experiment import from_dict
from irgrid.store import Store
from irgrid.util import settings
from irgrid.util.settings import Settings


def test_a_job_runs_under_the_settings_its_task_carries(tmp_path, monkeypatch):
    from support import write_scifact_slice

    files = write_scifact_slice(tmp_path, 5, 60)
    exp = {"name": "jobs", "collections": [{"name": "settings-slice", **files}], "datasets": ["settings-slice"],
           "retrievers": ["bm25-pisa"], "measures": ["nDCG@10"], "latency_sample": 2}
    spec = from_dict(exp, source=str(tmp_path / "exp.yaml"))
    submitted = Settings.from_env(os.environ, cache=str(tmp_path / "submitted"), max_models=2)
    with settings.using(submitted):
        jobs, cells = build_graph(spec, Store(), ExecutorConfig(executor="slurm"), tmp_path / "out")
    assert [j.kind for j in jobs] == ["index", "cell"]
    expected = dataclasses.replace(submitted, ir_datasets_home=submitted.irds_home())
    tasks = [pickle.loads(cloudpickle.dumps(j.task)) for j in jobs]  # what a worker unpickles
    assert all(t.settings == expected for t in tasks)

    seen = []
    run_cell = cell_mod.run_cell

    def recording(*args, **kwargs):
        seen.append((settings.cache_root(), settings.max_models()))
        return run_cell(*args, **kwargs)

    monkeypatch.setattr(cell_mod, "run_cell", recording)
    monkeypatch.setenv("IRGRID_CACHE", str(tmp_path / "worker-env"))  # the worker's own environment says otherwise
    monkeypatch.setenv("IRGRID_MAX_MODELS", "7")
    before = dict(os.environ)
    for task in tasks:
        assert execute(task)["job"] == task.job_id
    assert dict(os.environ) == before  # in process, the exported environment is this process's own already
    assert seen == [(tmp_path / "submitted", 2)]
    assert Path(cells[0]["run"]).is_file() and str(tmp_path / "submitted") in cells[0]["run"]
    assert not (tmp_path / "worker-env").exists()
    status = json.loads((tmp_path / "out" / "jobs" / f"{jobs[1].id}.json").read_text())
    assert status["status"] == "done"


def test_cli_flags_reach_the_command_and_the_environment_is_untouched(tmp_path, monkeypatch, capsys):
    """`irgrid run EXP --cache X --tiny-models --dry-run` in process: the plan is made against X in tiny-model
    mode, and os.environ is exactly what it was (the CLI once exported IRGRID_CACHE and IRGRID_TINY_MODELS)."""
    from irgrid.cli import main
    from irgrid.runner import planning

    monkeypatch.delenv("IRGRID_TINY_MODELS", raising=False)
    seen = []
    make_plan = planning.make_plan

    def recording(spec, store):
        seen.append((store.root, settings.cache_root(), settings.tiny_models()))
        return make_plan(spec, store)

    monkeypatch.setattr(planning, "make_plan", recording)
    exp = tmp_path / "exp.yaml"
    exp.write_text(json.dumps({"datasets": ["vaswani"], "measures": ["AP"], "retrievers": ["bm25-pisa"]}))
    before = dict(os.environ)
    cache = tmp_path / "X"
    assert main(["run", str(exp), "--cache", str(cache), "--tiny-models", "--dry-run"]) == 0
    assert dict(os.environ) == before
    assert seen == [(cache, cache, True)]
    out = capsys.readouterr()
    assert "TINY-MODEL MODE" in out.err and "1 datasets × 1 retrievers = 1 cells: 0 cached" in out.out
