"""Executor configuration: the config file and the command-line flags."""

from __future__ import annotations

import pytest

from irgrid.cluster.config import ExecutorConfig, ExecutorError
from irgrid.runner.experiment import from_dict


def test_config_file_and_flags(tmp_path):
    cfg = tmp_path / "cluster.yaml"
    cfg.write_text("executor: slurm\nshards: 4\nslurm: {partition: gpu, gpus_per_job: 1, time_min: 90, "
                   "additional: {constraint: h100}}\nray: {address: auto}\n")
    c = ExecutorConfig.load(cfg)
    assert (c.executor, c.shards, c.partition, c.gpus_per_job, c.time_min, c.additional) == \
        ("slurm", 4, "gpu", 1, 90, {"constraint": "h100"})
    c = ExecutorConfig.load(cfg, "ray", shards=2, partition=None)
    assert (c.executor, c.address, c.shards, c.partition) == ("ray", "auto", 2, None)
    cfg.write_text("slurm: {partitoin: gpu}\n")
    with pytest.raises(ExecutorError, match=r"cluster.yaml: slurm: unknown key\(s\) \['partitoin'\].*Did you mean 'partition'"):
        ExecutorConfig.load(cfg, "slurm")
    cfg.write_text("slurm: {time_min: '90'}\n")
    with pytest.raises(ExecutorError, match=r"cluster.yaml: slurm: 'time_min' must be a whole number; got '90'"):
        ExecutorConfig.load(cfg, "slurm")
    with pytest.raises(ExecutorError, match="not one of"):
        ExecutorConfig.load(None, "kubernetes")
    with pytest.raises(ExecutorError, match="shards"):
        ExecutorConfig.load(None, "ray", shards=0)


def test_a_failed_job_blocks_everything_downstream(tmp_path):
    """One rule, in the grid state: a job that needs a failed or blocked job is blocked and names it, whether
    the engine never submitted it (pending) or reported it failed without it ever starting."""
    from irgrid.cluster.graph import Job
    from irgrid.cluster.state import GridState

    spec = from_dict({"datasets": ["vaswani"], "retrievers": ["bm25-pisa"], "measures": ["AP"]})
    jobs = [Job("index", "index", "index", [], None, False), Job("merge", "merge", "merge", ["index"], None, False),
            Job("cell", "cell", "cell", ["merge"], None, False, cells=[("vaswani", "bm25-pisa")]),
            Job("other", "cell", "other", [], None, False)]
    cells = [{"dataset": "vaswani", "retriever": "bm25-pisa", "job": "cell", "run": "r", "meta": "m"}]
    state = GridState(tmp_path, spec, ExecutorConfig(executor="ray"), jobs, cells, None)
    state.finished("index", False, "RuntimeError: boom")
    state.finished("merge", False, "the engine cancelled it")  # no job file: it never started
    state.finished("other", True)
    state.close()
    status = {j: (r["status"], r["error"]) for j, r in state.data["jobs"].items()}
    assert status == {"index": ("failed", "RuntimeError: boom"),
                      "merge": ("blocked", "not run: needed job index failed"),
                      "cell": ("blocked", "not run: needed job merge failed"), "other": ("done", None)}
    assert state.data["cells"][0]["status"] == "blocked"
    failure = state.failures()[("vaswani", "bm25-pisa")]
    assert failure.error == "not run: needed job merge failed"


def test_every_yaml_reader_refuses_duplicate_keys(tmp_path):
    """cluster.yaml, expected-scores and QA experiment files are read like experiment files (irgrid.util.yamlsafe)."""
    from irgrid.qa.grid import QAExperimentError
    from irgrid.qa.grid import load as load_qa
    from irgrid.report.check import CheckError, load_expected

    bad = tmp_path / "dup.yaml"
    bad.write_text("executor: ray\nexecutor: slurm\n")
    with pytest.raises(ExecutorError, match="dup.yaml.*line 2: key 'executor' appears twice"):
        ExecutorConfig.load(bad)
    with pytest.raises(CheckError, match="dup.yaml.*line 2: key 'executor' appears twice"):
        load_expected(bad)
    with pytest.raises(QAExperimentError, match="dup.yaml.*line 2: key 'executor' appears twice"):
        load_qa(bad)
