"""Executor configuration: the config file and the command-line flags."""

from __future__ import annotations

import pytest

from irgrid.cluster.executors import ExecutorConfig, ExecutorError


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
    with pytest.raises(ExecutorError, match="unknown key"):
        ExecutorConfig.load(cfg, "slurm")
    with pytest.raises(ExecutorError, match="not one of"):
        ExecutorConfig.load(None, "kubernetes")
    with pytest.raises(ExecutorError, match="shards"):
        ExecutorConfig.load(None, "ray", shards=0)

