"""Executor configuration: the cluster config file (`--executor-config cluster.yaml`) and command-line flags ->
one validated `ExecutorConfig`."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from irgrid.core.schema import NUMBER, Key, Schema
from irgrid.util.errors import Error
from irgrid.util.yamlsafe import read_yaml

EXECUTORS = ("local", "ray", "slurm")


class ExecutorError(Error, RuntimeError):
    """Bad executor configuration, an engine that is not installed or not reachable, or a bad --resume."""


_NAME = (str, int)  # Slurm partitions, accounts and QOS may be numbers in YAML
_SECTION_KEYS: dict[str, Key] = {
    "gpus_per_job": Key(NUMBER), "cpus_per_job": Key(int), "mem_gb": Key(NUMBER), "time_min": Key(int),
    "max_retries": Key(int), "poll_seconds": Key(NUMBER), "partition": Key(_NAME), "account": Key(_NAME),
    "qos": Key(_NAME), "cluster": Key(str), "folder": Key(str), "setup": Key(list, hint="a list of shell lines"),
    "additional": Key(dict, hint="a mapping of sbatch options"), "max_parallel": Key(int), "address": Key(str),
    "num_cpus": Key(int),
}


@dataclass
class ExecutorConfig:
    """Options of the cluster engines, from a small YAML file (`--executor-config`) and command-line flags.

    ```yaml
    executor: slurm              # the default --executor
    shards: 8                    # corpus-encoding shards per dense index (jobs on different GPUs)
    slurm:  {partition: gpu, gpus_per_job: 1, cpus_per_job: 8, mem_gb: 64, time_min: 240, account: lab,
             qos: normal, max_retries: 1, folder: /shared/irgrid-slurm, setup: ["module load cuda"],
             additional: {constraint: h100}, cluster: slurm}   # cluster: slurm | local
    ray:    {address: auto, gpus_per_job: 1, cpus_per_job: 1, max_retries: 3}
    ```
    """

    executor: str = "local"
    shards: int = 1
    gpus_per_job: float = 0  # for jobs that run a neural model (encoders, SPLADE); BM25 jobs get none
    cpus_per_job: int = 1
    mem_gb: float | None = None
    time_min: int = 240
    max_retries: int = 2  # resubmissions of a job whose process died without a result
    poll_seconds: float = 2.0
    # slurm (submitit)
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    cluster: str | None = None  # submitit cluster: slurm (default where sbatch exists), or local (no Slurm)
    folder: str | None = None  # submitit's job folder (default OUT/slurm); on the shared filesystem
    setup: list[str] = field(default_factory=list)  # shell lines run before each job (module load, venv)
    additional: dict[str, Any] = field(default_factory=dict)  # any other sbatch option
    max_parallel: int | None = None  # submitit's local cluster: jobs running at once
    # ray
    address: str | None = None  # an existing cluster ("auto", "ray://head:10001"); None starts a local one
    num_cpus: int | None = None  # CPUs of a local Ray cluster (default: all)

    SECTIONS: ClassVar[dict[str, tuple[str, ...]]] = {
        "slurm": ("gpus_per_job", "cpus_per_job", "mem_gb", "time_min", "max_retries", "poll_seconds", "partition",
                  "account", "qos", "cluster", "folder", "setup", "additional", "max_parallel"),
        "ray": ("gpus_per_job", "cpus_per_job", "mem_gb", "max_retries", "poll_seconds", "address", "num_cpus"),
    }
    FILE: ClassVar[Schema] = Schema({"executor": Key(str), "shards": Key(int),
                                     **{s: Key(dict, hint="a mapping") for s in SECTIONS}})

    @classmethod
    def load(cls, path: str | Path | None, executor: str | None = None, **overrides: Any) -> ExecutorConfig:
        """The config file's top level and the section of the chosen executor, then non-None overrides."""

        data: dict[str, Any] = {}
        if path is not None:
            path = Path(path)
            if not path.is_file():
                raise ExecutorError(f"executor config {path} does not exist")
            data = cls.FILE.check(read_yaml(path, ExecutorError) or {}, str(path), ExecutorError)
        chosen = executor or data.get("executor") or "local"
        if chosen not in EXECUTORS:
            raise ExecutorError(f"executor {chosen!r} is not one of {EXECUTORS}")
        values: dict[str, Any] = {"executor": chosen}
        if "shards" in data:
            values["shards"] = data["shards"]
        section = data.get(chosen) or {}
        if chosen in cls.SECTIONS:
            schema = Schema({k: _SECTION_KEYS[k] for k in cls.SECTIONS[chosen]})
            values.update(schema.check(section, f"{path}: {chosen}", ExecutorError))
        values.update({k: v for k, v in overrides.items() if v is not None})
        config = cls(**values)
        config.validate()
        return config

    def validate(self) -> None:
        if not isinstance(self.shards, int) or self.shards < 1:
            raise ExecutorError(f"shards must be a whole number >= 1, got {self.shards!r}")
        if self.max_retries < 0 or self.cpus_per_job < 1 or self.gpus_per_job < 0 or self.time_min < 1:
            raise ExecutorError("max_retries >= 0, cpus_per_job >= 1, gpus_per_job >= 0 and time_min >= 1 are required")
        if self.cluster not in (None, "slurm", "local"):
            raise ExecutorError(f"slurm cluster {self.cluster!r} is not one of slurm, local (submitit's clusters)")
