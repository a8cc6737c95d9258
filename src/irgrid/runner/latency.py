"""The latency pass (`irgrid run EXP --latency`): every system of a grid re-measured in one process, warm,
interleaved and repeated, so their query latencies are comparable (a cached run's ms/query was measured whenever
and under whatever load that run had).

Each round times every system once on the same queries, in a rotated order (so no system always runs first or
last after another), after one warm-up pass per system; the median and spread over rounds are reported.
Expressions run as composed (`Expression.compose(live=True)`: their first stages retrieve live), never as the
sum of their stored stages. PyTerrier has no such benchmark harness (pt.Experiment times one pass per system,
in order), hence ours.
"""

from __future__ import annotations

import datetime
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from irgrid import store as store_mod
from irgrid.runner.cell import build_pipeline, hardware
from irgrid.runner.transforms import latency_accounting
from irgrid.store import Store
from irgrid.util.console import quiet_native
from irgrid.util.settings import SettingsError

COLUMNS = ["dataset", "system", "round", "position", "queries", "ms_per_query"]
SUMMARY = ["dataset", "system", "median_ms", "q1_ms", "q3_ms", "min_ms", "max_ms", "rounds", "queries",
           "measured_at", "source"]
SUMMARY_FILE, TIMINGS_FILE = "latency.csv", "latency_timings.csv"


def _pipeline(retriever: Any, dataset: Any, store: Store, models: dict[str, str]) -> Any:
    return build_pipeline(retriever, dataset, store, models, check_queries=False, live=True)


def measure(spec: Any, store: Store | None = None, rounds: int = 5, queries: int | None = None,
            cells: set[tuple[str, str]] | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(every timing, its summary per dataset and system). `queries`: the first N queries of each dataset (all
    when None); the same ones for every system. `cells`: only these (dataset, system) pairs (those a grid
    computed); a system whose pipeline fails to build is named in `summary.attrs["skipped"]`, the others go on.
    `store` (default: the current one) is current for every cache the pipelines open."""
    store = store or store_mod.current()
    with store_mod.using(store):
        return _measure(spec, store, rounds, queries, cells)


def _measure(spec: Any, store: Store, rounds: int, queries: int | None,
             cells: set[tuple[str, str]] | None) -> tuple[pd.DataFrame, pd.DataFrame]:
    import logging
    import traceback

    if rounds < 1:
        raise SettingsError(f"the latency pass needs at least 1 round, not {rounds}")
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    rows, skipped = [], []
    for dataset in spec.datasets:
        wanted = [r for r in spec.cells_on(dataset) if cells is None or (dataset.name, r.name) in cells]
        if not wanted:
            continue
        topics = dataset.topics()
        topics = topics.head(queries) if queries else topics
        pipes = {}
        for r in wanted:
            try:
                with quiet_native(f"latency: {r.name} on {dataset.name}"):
                    pipe = _pipeline(r, dataset, store, dict(spec.models))
                    pipe.transform(topics)  # warm-up on the very queries: models, JIT, JVM, OS page cache
            except Exception as e:  # recorded, the other systems are still timed
                logging.getLogger("irgrid").debug(traceback.format_exc())
                skipped.append((dataset.name, r.name, f"{type(e).__name__}: {e}"))
                continue
            pipes[r.name] = (pipe, latency_accounting(pipe))
        names = list(pipes)
        for k in range(rounds if names else 0):
            order = names[k % len(names):] + names[:k % len(names)]  # rotated: each system leads one round
            for position, name in enumerate(order):
                pipe, accounted = pipes[name]
                before = accounted()
                t0 = time.perf_counter()
                pipe.transform(topics)
                seconds = time.perf_counter() - t0 + accounted() - before
                rows.append({"dataset": dataset.name, "system": name, "round": k, "position": position,
                             "queries": len(topics), "ms_per_query": 1000 * seconds / max(len(topics), 1)})
    timings = pd.DataFrame(rows, columns=COLUMNS)
    summary = summarise(timings, when)
    summary.attrs["hardware"] = hardware()
    summary.attrs["skipped"] = skipped
    return timings, summary


def summarise(timings: pd.DataFrame, when: str) -> pd.DataFrame:
    out = []
    for (dataset, system), g in timings.groupby(["dataset", "system"], sort=False):
        ms = g["ms_per_query"].to_numpy(dtype=float)
        out.append({"dataset": dataset, "system": system, "median_ms": float(np.median(ms)),
                    "q1_ms": float(np.percentile(ms, 25)), "q3_ms": float(np.percentile(ms, 75)),
                    "min_ms": float(ms.min()), "max_ms": float(ms.max()), "rounds": len(ms),
                    "queries": int(g["queries"].iloc[0]), "measured_at": when,
                    "source": "latency pass (one process, interleaved rounds, warm)"})
    return pd.DataFrame(out, columns=SUMMARY)


def results_digest(out: Path) -> str:
    """sha256 of the grid's results.csv: ties a latency pass to the grid it timed (a later grid written to the same
    folder makes an old latency.csv stale, and the report then ignores it)."""
    from irgrid.util.hashing import file_sha256

    return file_sha256(Path(out) / "results.csv")


def write(out: Path, timings: pd.DataFrame, summary: pd.DataFrame) -> list[Path]:
    from irgrid.util.files import write_text_atomic

    out = Path(out)
    summary = summary.assign(results_sha256=results_digest(out))
    write_text_atomic(out / SUMMARY_FILE, summary.to_csv(index=False))
    write_text_atomic(out / TIMINGS_FILE, timings.to_csv(index=False))
    return [out / SUMMARY_FILE, out / TIMINGS_FILE]
