"""Nothing lost, nothing stale, one clear error: the campaign's crash/loss/silently-wrong cases (issue 13), each
rebuilt on a tiny real collection (a SciFact slice as bring-your-own files, PISA BM25 only)."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from support import experiment_yaml, write_scifact_slice

from irgrid import grid
from irgrid.runner import cell as cell_mod
from irgrid.runner.experiment import from_dict, load
from irgrid.store import Store

N_QUERIES, N_DOCS = 20, 200
ENV = {**os.environ, "HF_HUB_OFFLINE": "1"}


@pytest.fixture(scope="module")
def slice_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("slice")
    write_scifact_slice(root, N_QUERIES, N_DOCS)
    return root


def _copy_slice(slice_root: Path, dst: Path) -> Path:
    shutil.copytree(slice_root / "data", dst / "data")
    return dst


def _cli(*args: str, env: dict | None = None, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "irgrid.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env=env or ENV)


def _value(results: pd.DataFrame, system: str, measure: str = "AP") -> float:
    row = results[(results["system"] == system) & (results["measure"] == measure)]
    return float(row["value"].iloc[0])


# -- 1. two grids on one cache, same new PISA parameters: lazily written files under the index's lock ---------
RACER = """
import sys, time
from pathlib import Path
from irgrid import grid
from irgrid.runner.experiment import load
from irgrid.store import Store
exp, cache, out, me, other = sys.argv[1:]
spec, store = load(exp), Store(cache)
spec.datasets[0].topics(); spec.datasets[0].qrels()  # everything imported and read before the start line
Path(me).touch()
while not Path(other).exists():
    time.sleep(0.001)
grid.run(spec, out=out, store=store)
"""


@pytest.mark.slow  # 5 rounds x 2 processes: ~2 min on 2 shared cores
def test_two_grids_same_new_bm25_parameters_never_crash(slice_root, tmp_path):
    root = _copy_slice(slice_root, tmp_path)
    cache = tmp_path / "cache"
    experiment_yaml(root, retrievers="[bm25-pisa]", datasets="[vaswani]")  # 11,429 documents: a real race window
    assert _cli("run", str(root / "exp.yaml"), "--cache", str(cache)).returncode == 0  # publishes the index
    for i in range(5):  # a new k1 each round: both grids write its per-parameter files at the same moment
        k1 = round(1.1 + i / 10, 2)
        procs = []
        for who, other in (("a", "b"), ("b", "a")):
            exp = root / f"exp-{i}-{who}.yaml"
            exp.write_text((root / "exp.yaml").read_text().replace(
                "retrievers: [bm25-pisa]", f"retrievers: [{{name: bm25-pisa, as: bm25-{who}, options: {{k1: {k1}}}}}]"))
            procs.append(subprocess.Popen(
                [sys.executable, "-c", RACER, str(exp), str(cache), str(tmp_path / f"out-{i}-{who}"),
                 str(tmp_path / f"ready-{i}-{who}"), str(tmp_path / f"ready-{i}-{other}")],
                env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        outs = [p.communicate(timeout=300) for p in procs]
        for p, (_, err) in zip(procs, outs):
            assert p.returncode == 0, f"round {i}: rc {p.returncode}\n{err[-3000:]}"
        a, b = (pd.read_csv(tmp_path / f"out-{i}-{who}" / "results.csv") for who in ("a", "b"))
        assert _value(a, "bm25-a") == _value(b, "bm25-b")


def test_partial_query_time_index_file_is_rewritten_not_trusted(slice_root, tmp_path):
    """What the race (or a kill) leaves: a truncated per-parameter PISA file in the published index. Before the
    fix the next grid with those parameters crashed in native code (SIGBUS/SIGSEGV)."""
    root = _copy_slice(slice_root, tmp_path)
    cache = tmp_path / "cache"
    first = experiment_yaml(root, retrievers="[{name: bm25-pisa, as: bm25-a, options: {k1: 1.37}}]")
    assert _cli("run", str(first), "--cache", str(cache), "--out", str(tmp_path / "o1")).returncode == 0
    lazy = [p for p in cache.glob("indexes/*/pisa-porter2-*/**/*") if p.is_file() and "1.37" in p.name]
    assert lazy, "PISA wrote no per-parameter files"
    for p in lazy:
        p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])
    second = root / "exp2.yaml"
    second.write_text(first.read_text().replace("as: bm25-a", "as: bm25-b"))
    proc = _cli("run", str(second), "--cache", str(cache), "--out", str(tmp_path / "o2"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    a, b = (pd.read_csv(tmp_path / o / "results.csv") for o in ("o1", "o2"))
    assert _value(a, "bm25-a") == _value(b, "bm25-b")


# -- 2. a failed baseline is one recorded failure; the other cells and datasets still report ----------------
@pytest.mark.slow  # a vaswani index and a report: ~1 min on 2 shared cores
def test_failed_baseline_with_correction_is_recorded_and_the_grid_finishes(slice_root, tmp_path, monkeypatch):
    root = _copy_slice(slice_root, tmp_path)
    spec = load(experiment_yaml(root, name="mine",
                                retrievers="[bm25-pisa, {name: bm25-pisa, as: bm25-k12, options: {k1: 1.2}}]",
                                datasets="[mine, vaswani]", extra="baseline: bm25-pisa\ncorrection: holm\n"))
    original = cell_mod.build_pipeline

    def failing(retriever, dataset=None, *a, **kw):
        if retriever.name == "bm25-pisa" and dataset.name == "mine":
            raise RuntimeError("injected baseline failure")
        return original(retriever, dataset, *a, **kw)

    monkeypatch.setattr(cell_mod, "build_pipeline", failing)
    results = grid.run(spec, out=tmp_path / "out", store=Store(tmp_path / "cache")).results
    failures = json.loads((tmp_path / "out" / "failures.json").read_text())
    assert [(f["dataset"], f["retriever"]) for f in failures][:1] == [("mine", "bm25-pisa")]
    assert any("tests skipped" in f["error"] and f["dataset"] == "mine" for f in failures)
    mine = results[results["dataset"] == "mine"]
    assert set(mine["system"]) == {"bm25-k12"} and mine["p_value"].isna().all()
    assert set(results[results["dataset"] == "vaswani"]["system"]) == {"bm25-pisa", "bm25-k12"}
    assert (tmp_path / "out" / "results.csv").exists()
    # the report names the failed cell, and counts no tie where the baseline failed (issue 32: 0/0/0)
    from irgrid.report.write import write_report

    write_report(tmp_path / "out", n_resamples=50)
    report = tmp_path / "out" / "report"
    for doc in ("report.md", "report.html"):
        text = (report / doc).read_text()
        assert "1 failed cell(s) (failures.json)" in text and "bm25-pisa on mine: RuntimeError: injected" in text
    wtl = pd.read_csv(report / "win_tie_loss.csv")
    row = wtl[(wtl["system"] == "bm25-k12") & (wtl["measure"] == "AP")].iloc[0]
    assert (row["datasets"], row["baseline_missing"]) == (1, 1)  # vaswani compared; mine had no baseline
    assert "bm25-pisa (failed on 1 dataset(s))" in (report / "report.md").read_text()


# -- 3. a docs file changed after it was hashed is never cached under the old hash --------------------------
def test_docs_changed_after_loading_is_refused_not_cached_under_the_old_hash(slice_root, tmp_path):
    root = _copy_slice(slice_root, tmp_path)
    spec = load(experiment_yaml(root))
    docs = root / "data" / "docs.tsv"
    lines = docs.read_text().splitlines(keepends=True)
    docs.write_text("".join(lines[: len(lines) // 2]))  # edited while the grid starts
    store = Store(tmp_path / "cache")
    failures = grid.run(spec, out=tmp_path / "out", store=store).failures
    assert len(failures) == 1 and "docs.tsv" in failures[0].error and "changed" in failures[0].error
    assert not list((store.root / "indexes").glob("*/*/irgrid-index.json"))  # nothing published
    proc = _cli("run", str(root / "exp.yaml"), "--cache", str(store.root))  # reloaded: hashed from the new bytes
    assert proc.returncode == 0, proc.stderr[-2000:]


# -- 4. a byte-order mark in a topics file does not rename the first query -----------------------------------
def test_bom_in_topics_is_stripped(slice_root, tmp_path):
    root = _copy_slice(slice_root, tmp_path)
    topics = root / "data" / "topics.tsv"
    topics.write_bytes(b"\xef\xbb\xbf" + topics.read_bytes())
    spec = load(experiment_yaml(root))
    first = topics.read_text(encoding="utf-8-sig").split("\t", 1)[0]
    assert spec.datasets[0].topics()["qid"].iloc[0] == first
    results = grid.run(spec, store=Store(tmp_path / "cache")).results
    perq = grid.measures_mod.experiment([grid.Store(tmp_path / "cache").runs.load(
        spec.retrievers[0], spec.datasets[0])[0]], spec.datasets[0].topics(), spec.datasets[0].qrels(),
        spec.measures, names=["x"], perquery=True, verbose=False)
    assert first in set(perq["qid"]) and _value(results, "bm25-pisa") > 0


# -- 5. changed staged data is picked up: new copy, new index, new runs -------------------------------------
def test_changed_staged_data_is_picked_up(tmp_path, staged):
    stage = tmp_path / "staged"
    shutil.copytree(staged / "vaswani", stage / "vaswani")
    os.chmod(stage / "vaswani", 0o755)
    exp = tmp_path / "exp.yaml"
    exp.write_text("name: s\ndatasets: [vaswani]\nretrievers: [bm25-pisa]\nmeasures: [AP]\n")
    env = {**ENV, "IRGRID_IRDS_STAGED": str(stage)}
    env.pop("IR_DATASETS_HOME", None)

    def ap(cache: Path) -> float:
        proc = _cli("run", str(exp), "--cache", str(cache), "--out", str(cache.parent / f"out-{cache.name}"), env=env)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return _value(pd.read_csv(cache.parent / f"out-{cache.name}" / "results.csv"), "bm25-pisa")

    before = ap(tmp_path / "cache")
    qrels = stage / "vaswani" / "qrels.txt"
    os.chmod(qrels, 0o644)
    lines = qrels.read_text().splitlines(keepends=True)
    qrels.write_text("".join(lines[::2]))  # every other judgement dropped
    after = ap(tmp_path / "cache")
    assert after != before
    assert after == ap(tmp_path / "cache2")  # the same as a fresh cache on the new data


# -- 5b. the cache's copy of the staged data is verified, not trusted (issue 32) ---------------------------------
def _flip(path: Path, old: bytes, new: bytes) -> None:
    data = path.read_bytes()
    assert data.count(old) >= 1 and len(old) == len(new)
    path.write_bytes(data.replace(old, new, 1))


@pytest.mark.slow  # three CLI runs on vaswani: ~50 s on 2 shared cores
def test_a_corrupted_copy_of_staged_data_is_recopied_never_keyed_as_the_right_data(tmp_path, staged):
    """One byte changed in the cache's copy of vaswani's queries, then of its documents: each next run names the
    copy, copies it again from the staged home and computes (or reuses) the result of the right bytes only."""
    exp = tmp_path / "exp.yaml"
    exp.write_text("name: s\ndatasets: [vaswani]\nretrievers: [bm25-pisa]\nmeasures: [AP]\n")
    env = {**ENV, "IRGRID_IRDS_STAGED": str(staged)}
    env.pop("IR_DATASETS_HOME", None)  # the cache's own copy: <cache>/irds
    cache, out = tmp_path / "cache", tmp_path / "out"

    def run() -> tuple[float, str]:
        proc = _cli("run", str(exp), "--cache", str(cache), "--out", str(out), env=env)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return _value(pd.read_csv(out / "results.csv"), "bm25-pisa"), proc.stderr

    right, _ = run()
    runs = sorted((cache / "runs").rglob("*.res.gz"))
    copy = cache / "irds" / "vaswani"
    for name, old, new in (("queries.txt", b"MEASUREMENT OF DIELECTRIC", b"XEASUREMENT OF DIELECTRIC"),
                           ("docs.txt", b"\n1239\n", b"\n1x39\n")):  # a query's word; a relevant document's id
        _flip(copy / name, old, new)
        shutil.rmtree(cache / "runs")  # a new cell computes: from the repaired copy only
        if name == "docs.txt":  # and builds the index again
            shutil.rmtree(cache / "indexes")
        value, stderr = run()
        assert f"{copy / name} does not match the staged file" in stderr and "copied again" in stderr, stderr[-2000:]
        assert value == right  # computed from the right bytes (the bad copy gives another AP) ...
        assert (copy / name).read_bytes() == (staged / "vaswani" / name).read_bytes()
        assert sorted((cache / "runs").rglob("*.res.gz")) == runs  # ... and stored under their key
    _, stderr = run()  # verified once per process: a clean copy costs no warning
    assert "staged data" not in stderr


def test_staged_copy_deleted_or_edited_in_process_is_copied_again(tmp_path, staged, monkeypatch, caplog):
    """In one process (a notebook): the copy checked once, then re-hashed only when its size/mtime changes; a
    deleted cache home (deleted mid-run) is seeded again instead of ir_datasets trying to download."""
    from irgrid.data import datasets
    from irgrid.util import settings

    home = tmp_path / "irds"
    monkeypatch.setattr(settings, "irds_home", lambda: home)
    datasets._seed(staged, home)
    monkeypatch.setattr(datasets, "ensure_irds_home", lambda: home)
    monkeypatch.setattr(datasets, "RECHECK_SECONDS", 0.0)  # as if the next call came seconds later
    key = datasets.staged_fingerprint("vaswani")
    queries = home / "vaswani" / "queries.txt"
    _flip(queries, b"MEASUREMENT", b"XEASUREMENT")
    with caplog.at_level("WARNING", logger="irgrid.data.datasets"):
        assert datasets.staged_fingerprint("vaswani") == key
    assert f"{queries} does not match" in caplog.text
    assert queries.read_bytes() == (staged / "vaswani" / "queries.txt").read_bytes()
    caplog.clear()
    shutil.rmtree(home)
    with caplog.at_level("WARNING", logger="irgrid.data.datasets"):
        assert datasets.staged_fingerprint("vaswani") == key
    assert "lost its copy of the staged data" in caplog.text
    assert queries.read_bytes() == (staged / "vaswani" / "queries.txt").read_bytes()


# -- 6. a corrupt run meta is named, moved aside and recomputed; it breaks nothing else --------------------------
def test_corrupt_run_meta_is_named_and_recomputed(slice_root, tmp_path):
    root = _copy_slice(slice_root, tmp_path)
    exp, cache = experiment_yaml(root), tmp_path / "cache"
    assert _cli("run", str(exp), "--cache", str(cache), "--out", str(tmp_path / "o1")).returncode == 0
    meta = next((cache / "runs").glob("*/*.json"))
    meta.write_text('{"retriever": "bm25-pisa", "quer')
    dry = _cli("run", str(exp), "--cache", str(cache), "--dry-run")
    assert dry.returncode == 0, dry.stderr[-2000:]
    proc = _cli("run", str(exp), "--cache", str(cache), "--out", str(tmp_path / "o2"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert meta.name in proc.stderr and "Traceback" not in proc.stderr
    a, b = (pd.read_csv(tmp_path / o / "results.csv") for o in ("o1", "o2"))
    assert _value(a, "bm25-pisa") == _value(b, "bm25-pisa")


# -- 7. an empty docs file is refused with its name, before any index is built -------------------------------
def test_empty_docs_file_is_refused(slice_root, tmp_path):
    root = _copy_slice(slice_root, tmp_path)
    (root / "data" / "docs.tsv").write_text("")
    proc = _cli("run", str(experiment_yaml(root)), "--cache", str(tmp_path / "cache"), "--out", str(tmp_path / "out"))
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "docs.tsv" in proc.stderr and "empty" in proc.stderr and "Traceback" not in proc.stderr
    assert not list((tmp_path / "cache").glob("indexes/*/*"))


# -- 8. a cached run that lost lines (still a valid gzip) is detected and recomputed ---------------------------
def test_truncated_cached_run_is_recomputed(slice_root, tmp_path):
    root = _copy_slice(slice_root, tmp_path)
    spec, store = load(experiment_yaml(root)), Store(tmp_path / "cache")
    first = grid.run(spec, store=store).results
    run = next((store.root / "runs").glob("*/*.res.gz"))
    lines = gzip.open(run, "rt").read().splitlines(keepends=True)
    with gzip.open(run, "wt") as f:
        f.write("".join(lines[: len(lines) // 2]))
    second = grid.run(load(root / "exp.yaml"), store=store).results
    assert _value(second, "bm25-pisa") == _value(first, "bm25-pisa")
    assert list(run.parent.glob(f".{run.name}.corrupt-*"))  # moved aside, not deleted: evidence kept


# -- 9. an output folder is never a mix of two experiments ------------------------------------------------------
def test_outputs_killed_while_writing_are_never_mixed(slice_root, tmp_path, monkeypatch):
    from irgrid.runner import outputs as report_mod

    root = _copy_slice(slice_root, tmp_path)
    out, store = tmp_path / "out", Store(tmp_path / "cache")
    grid.run(load(experiment_yaml(root)), out=out, store=store)
    other = load(experiment_yaml(root, retrievers="[{name: bm25-pisa, as: other, options: {k1: 1.5}}]"))

    def killed(*a, **kw):
        raise KeyboardInterrupt("killed while writing outputs")

    monkeypatch.setattr(report_mod, "write_qrels", killed)
    with pytest.raises(KeyboardInterrupt):
        grid.run(other, out=out, store=store)
    monkeypatch.undo()
    proc = _cli("report", str(out))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "incomplete" in proc.stderr and "rerun" in proc.stderr
    grid.run(other, out=out, store=store)  # the rerun completes it: one experiment, its runs only
    assert sorted(p.name for p in (out / "runs").rglob("*.res.gz")) == ["other.res.gz"]
    assert set(pd.read_csv(out / "results.csv")["system"]) == {"other"}


# -- 10. a damaged PISA index file or a deleted marker: detected, moved aside, rebuilt ---------------------------
def test_damaged_index_file_is_rebuilt_not_trusted(slice_root, tmp_path):
    root = _copy_slice(slice_root, tmp_path)
    store = Store(tmp_path / "cache")
    first = grid.run(load(experiment_yaml(root)), store=store).results
    folder = next((store.root / "indexes").glob("*/pisa-porter2-*"))
    victim = max((p for p in folder.rglob("*") if p.is_file() and p.suffix != ".json"), key=lambda p: p.stat().st_size)
    victim.write_bytes(victim.read_bytes()[: victim.stat().st_size // 3])
    shutil.rmtree(store.root / "runs")
    second = grid.run(load(root / "exp.yaml"), store=store)
    assert second.ok and _value(second.results, "bm25-pisa") == _value(first, "bm25-pisa")
    assert list(folder.parent.glob(f".{folder.name}.corrupt-*"))


def test_deleted_index_marker_is_rebuilt_and_published(slice_root, tmp_path):
    root = _copy_slice(slice_root, tmp_path)
    store = Store(tmp_path / "cache")
    grid.run(load(experiment_yaml(root)), store=store)
    folder = next((store.root / "indexes").glob("*/pisa-porter2-*"))
    (folder / "irgrid-index.json").unlink()
    shutil.rmtree(store.root / "runs")
    grid.run(load(root / "exp.yaml"), store=store)
    assert (folder / "irgrid-index.json").exists()
    kinds = [b["kind"] for b in store.builds()]
    assert kinds.count("index") == 2
    grid.run(load(root / "exp.yaml"), store=store)
    assert [b["kind"] for b in store.builds()].count("index") == 2  # published: reused from now on


def test_bad_device_is_one_clear_error(tmp_path):
    proc = _cli("run", str(experiment_yaml(tmp_path, name="x", datasets="[vaswani]")), "--dry-run",
                env={**ENV, "IRGRID_DEVICE": "gpu"})
    assert proc.returncode == 2 and "IRGRID_DEVICE='gpu'" in proc.stderr and "Traceback" not in proc.stderr
    import torch

    if not torch.cuda.is_available():  # asked for, not there: one error naming the setting, before any cell
        proc = _cli("run", str(experiment_yaml(tmp_path, name="x", datasets="[vaswani]")), "--dry-run",
                    env={**ENV, "IRGRID_DEVICE": "cuda"})
        assert proc.returncode == 2 and "IRGRID_DEVICE=cuda: CUDA is not available" in proc.stderr, proc.stderr


def test_out_that_is_a_file_fails_before_any_cell(slice_root, tmp_path):
    root = _copy_slice(slice_root, tmp_path)
    (tmp_path / "out").write_text("")
    proc = _cli("run", str(experiment_yaml(root)), "--cache", str(tmp_path / "cache"), "--out", str(tmp_path / "out"))
    assert proc.returncode == 2 and "is a file" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "cache" / "runs").exists()


def test_native_chatter_is_off_unless_verbose_and_cache_file_is_refused(slice_root, tmp_path):
    root = _copy_slice(slice_root, tmp_path)
    exp = experiment_yaml(root)
    quiet = _cli("run", str(exp), "--cache", str(tmp_path / "c1"))
    assert quiet.returncode == 0, quiet.stderr[-2000:]
    assert "[info]" not in quiet.stdout + quiet.stderr and "irgrid [1/1] bm25-pisa" in quiet.stderr
    loud = _cli("-v", "run", str(exp), "--cache", str(tmp_path / "c2"))
    assert loud.returncode == 0 and "[info]" in loud.stdout + loud.stderr  # PISA's own log, with -v
    (tmp_path / "cachefile").write_text("")
    proc = _cli("run", str(exp), "--cache", str(tmp_path / "cachefile"))
    assert proc.returncode == 2 and "is a file" in proc.stderr and "Traceback" not in proc.stderr


def test_unstaged_dataset_is_a_recorded_failure_with_the_staging_hint(tmp_path, capfd):
    """One mirror (a ConnectionError) or several (ir_datasets' RuntimeError 'All download sources failed', issue
    32): both get the staging hint, and ir_datasets' download retries are not printed (only with -v)."""
    spec = from_dict({"datasets": ["beir/nfcorpus/test", "cranfield", "vaswani"], "retrievers": ["bm25-pisa"],
                      "measures": ["AP"]})
    ran = grid.run(spec, out=tmp_path / "out", store=Store(tmp_path / "cache"))
    results, failures = ran.results, ran.failures
    assert [(f.dataset, f.retriever) for f in failures] == [("beir/nfcorpus/test", "bm25-pisa"),
                                                            ("cranfield", "bm25-pisa")]
    for failure in failures:
        assert "not staged" in failure.error and "IRGRID_IRDS_STAGED" in failure.error, failure.error
    assert set(results["dataset"]) == {"vaswani"}
    printed = capfd.readouterr()
    assert "download error" not in printed.err + printed.out and "Download failed" not in printed.err


# -- 11. a full disk under the cache: the native builder's abort fails that index, named, the grid survives ------
def test_full_disk_is_reported_in_words_and_the_grid_survives(tmp_path):
    disk = tmp_path / "tiny"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(disk)], capture_output=True).returncode:
        pytest.skip("cannot mount a 2 MiB tmpfs here (needs root); the message is covered by the crash path")
    try:
        exp = tmp_path / "exp.yaml"
        exp.write_text("name: d\ndatasets: [vaswani]\nretrievers: [bm25-pisa]\nmeasures: [AP]\n")
        proc = _cli("run", str(exp), "--cache", str(disk / "cache"), "--out", str(tmp_path / "out"))
        assert proc.returncode == 1, proc.stderr[-3000:]  # a recorded failure, not a dead process
        failures = json.loads((tmp_path / "out" / "failures.json").read_text())
        # whichever step meets the full disk first says so in words: PISA's native builder, or copying the staged
        # collection into the cache's ir_datasets home
        error = failures[0]["error"]
        assert len(failures) == 1 and ("crashed in native code" in error or "no space left copying" in error)
        assert "MiB free on the disk of the cache" in error
        assert not list((disk / "cache").glob("indexes/*/*"))  # nothing half-built published
    finally:
        subprocess.run(["umount", str(disk)], capture_output=True)


def test_full_out_disk_is_named_not_the_cache(slice_root, tmp_path):
    """A copy from the cache into a full --out: shutil names the source (a cache file) first; the error names the
    --out file, whose disk is the full one (issue 32)."""
    disk = tmp_path / "tiny"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(disk)], capture_output=True).returncode:
        pytest.skip("cannot mount a 16 KiB tmpfs here (needs root)")
    try:
        root = _copy_slice(slice_root, tmp_path)
        proc = _cli("run", str(experiment_yaml(root)), "--cache", str(tmp_path / "cache"), "--out", str(disk / "out"))
        assert proc.returncode == 2, proc.stderr[-2000:]
        line = proc.stderr.strip().splitlines()[-1]
        assert line.startswith(f"irgrid: error: no space left on the device of {disk / 'out'}"), line
        assert str(tmp_path / "cache") not in line and "MiB free" in line
    finally:
        subprocess.run(["umount", str(disk)], capture_output=True)


def test_a_reused_out_keeps_no_qrels_or_runs_of_the_earlier_experiment(slice_root, tmp_path):
    root = _copy_slice(slice_root, tmp_path)
    out, store = tmp_path / "out", Store(tmp_path / "cache")
    for name in ("first-exp", "second-exp"):
        grid.run(load(experiment_yaml(root, name=name)), out=out, store=store)
    manifest = json.loads((out / "manifest.json").read_text())
    assert sorted(p.name for p in (out / "qrels").iterdir()) == ["second-exp.qrels"]
    assert not [f for f in manifest["files"] if "first-exp" in f], manifest["files"]
    assert "qrels/second-exp.qrels" in manifest["files"]


def test_python_api_run_of_a_dict_and_bad_queries(slice_root, tmp_path, monkeypatch):
    """`irgrid.run(dict)` as its docstring offers; a None/number/NaN query through `irgrid.pipeline` is one
    ValueError naming the query, not PISA's SystemError (issue 32)."""
    import irgrid

    monkeypatch.setenv("IRGRID_CACHE", str(tmp_path / "cache"))
    root = _copy_slice(slice_root, tmp_path)
    data = {"collections": [{"name": "api-dict", "docs": str(root / "data/docs.tsv"),
                             "topics": str(root / "data/topics.tsv"), "qrels": str(root / "data/qrels.txt")}],
            "datasets": ["api-dict"], "retrievers": ["bm25-pisa"], "measures": ["AP"]}
    ran = irgrid.run(data)
    assert _value(ran.results, "bm25-pisa") > 0 and ran.ok
    spec = from_dict(data)
    pipe = irgrid.pipeline("bm25-pisa", spec.datasets[0])
    assert len(pipe.search("protein folding")) > 0
    for query in (None, 3, float("nan")):
        with pytest.raises(ValueError, match="is not text"):
            pipe.search(query)


def test_second_grid_on_the_same_out_is_refused_at_once(slice_root, tmp_path):
    from irgrid.util import locks

    root = _copy_slice(slice_root, tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    with locks.hold(out / ".irgrid-out.lock", "test holder"):
        proc = _cli("run", str(experiment_yaml(root)), "--cache", str(tmp_path / "cache"), "--out", str(out))
    assert proc.returncode == 2 and "is being written by another irgrid run" in proc.stderr, proc.stderr[-2000:]
    assert not (tmp_path / "cache" / "runs").exists()


def test_typo_in_a_collection_measures_fails_before_any_cell(slice_root, tmp_path):
    root = _copy_slice(slice_root, tmp_path)
    exp = experiment_yaml(root)
    exp.write_text(exp.read_text().replace("qrels: data/qrels.txt}", "qrels: data/qrels.txt, measures: [nDCG@ten]}")
                   .replace("measures: [AP, nDCG@10]\n", ""))
    proc = _cli("run", str(exp), "--cache", str(tmp_path / "cache"), "--out", str(tmp_path / "out"))
    assert proc.returncode == 2 and "'nDCG@ten' is not a measure" in proc.stderr, proc.stderr[-2000:]
    assert not (tmp_path / "cache" / "runs").exists()


def test_read_only_out_is_found_before_any_cell_even_as_root(tmp_path):
    """A real write probe: os.access says yes to root on a read-only mount, the probe does not."""
    from irgrid.grid import check_out
    from irgrid.runner.outputs import OutputError

    ro = tmp_path / "ro"
    ro.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,ro", "tmpfs", str(ro)], capture_output=True).returncode:
        pytest.skip("cannot mount a read-only tmpfs here (needs root); non-root users get EACCES the same way")
    try:
        with pytest.raises(OutputError, match=r"--out .*ro/out: .*ro is not writable \(Read-only file system\)"):
            check_out(ro / "out")
    finally:
        subprocess.run(["umount", str(ro)], capture_output=True)
    check_out(tmp_path / "fine")  # a creatable folder passes


def test_read_only_cache_is_said_as_such_for_cached_and_new_cells(tmp_path):
    """Issue 40 item 10: before, every cell (cached or not) failed with "not staged and could not be downloaded"."""
    cache, ro = tmp_path / "cache", tmp_path / "ro-cache"
    one = tmp_path / "one.yaml"
    one.write_text("name: one\ndatasets: [vaswani]\nretrievers: [bm25-pisa]\nmeasures: [AP]\n")
    assert _cli("run", str(one), "--cache", str(cache)).returncode == 0  # bm25-pisa cached
    two = tmp_path / "two.yaml"
    two.write_text("name: two\ndatasets: [vaswani]\nretrievers: [bm25-pisa, {name: bm25-pisa, as: k12, options: "
                   "{k1: 1.2}}]\nmeasures: [AP]\n")
    ro.mkdir()
    if subprocess.run(["mount", "--bind", "-o", "ro", str(cache), str(ro)], capture_output=True).returncode:
        pytest.skip("cannot bind-mount a read-only cache here (needs root); non-root users get EACCES the same way")
    try:
        proc = _cli("run", str(two), "--cache", str(ro))
    finally:
        subprocess.run(["umount", str(ro)], capture_output=True)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert f"the cache {ro} is not writable ({ro}: Read-only file system)" in proc.stderr
    assert "not staged" not in proc.stderr + proc.stdout


def test_local_write_errors_are_not_download_failures():
    import errno

    from irgrid.data.datasets import is_download_failure

    for code in (errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOSPC):
        assert not is_download_failure(OSError(code, os.strerror(code), "/cache/irds/vaswani"))
    assert is_download_failure(OSError(errno.ENETUNREACH, "Network is unreachable"))
