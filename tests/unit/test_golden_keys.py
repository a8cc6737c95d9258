"""Golden cache keys: resumability rests on them (a changed key recomputes every index and run it names; an
unchanged key over changed semantics serves stale results), so each change must be a visible, reviewed diff.

Pinned in golden/cache_keys.json: retriever and index-recipe keys of a few entries under both profiles, dataset
configurations, the staged-data fingerprint of a fixed manifest, and every cell key of experiments/quickstart.yaml.
Keys are computed with no staged data (its fingerprint is pinned separately), so they hold on any machine.
After an intended change: `pytest tests/unit/test_golden_keys.py --update-golden`, and commit the diff.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).resolve().parent / "golden" / "cache_keys.json"
ENTRIES = ["bm25", "bm25-pisa", "all-minilm-l6-v2", "splade-tiny", "contriever"]
# catalog datasets whose corpus is in the catalog too (any other id would set up ir_datasets: not a unit test)
DATASETS = ["vaswani", "beir/scifact/test", "beir/arguana/test", "instructir"]
# a staged manifest as datasets._seed records it ({relative path: [size, mtime_ns, sha256]}): fixed bytes, fixed keys
MANIFEST = {
    "beir/scifact/corpus.jsonl.gz": [7_000_000, 1, "a" * 64],
    "beir/scifact/queries.jsonl.gz": [40_000, 1, "b" * 64],
    "beir/scifact/test.tsv": [6_000, 1, "c" * 64],
    "vaswani/docs.txt": [2_000_000, 1, "d" * 64],
}
HOW = "pytest tests/unit/test_golden_keys.py --update-golden"
PER_DATASET_ENTRIES = ["colbertv2", "jina-embeddings-v3"]
PER_DATASET_SETS = ["beir/scifact/test", "beir/arguana/test", "beir/climate-fever/test"]


def _keys(tmp_path: Path) -> dict:
    from irgrid.core.retrievers import get
    from irgrid.data import datasets
    from irgrid.runner.experiment import load
    from irgrid.store import Store

    store = Store(tmp_path)
    scifact = datasets.get("beir/scifact/test")
    entries = {}
    for name in ENTRIES:
        for profile in ("card", "paper"):
            entry = get(name).with_profile(profile)
            entries[f"{name}@{profile}"] = {
                "key": entry.key(),
                "index": store.indexes.dir(entry.index, scifact).name if entry.index else None,
            }
    sets = {}
    for name in DATASETS:
        ds = datasets.get(name)
        sets[name] = {"config": ds.config(), "run_key_bm25": store.runs.key(get("bm25"), ds)}
    fingerprints = {irds_id: datasets._fingerprint(MANIFEST, irds_id)
                    for irds_id in ("beir/scifact", "beir/scifact/test", "vaswani", "cranfield")}
    spec = load(ROOT / "experiments" / "quickstart.yaml")
    cells = {}
    for ds in spec.datasets:
        for retriever in spec.retrievers:
            cells[f"{ds.name} | {retriever.name}"] = {
                "run": store.runs.path(retriever, ds).name,
                "index": store.indexes.dir(retriever.index, ds).name if retriever.index else None,
            }
    # cells whose `paper` profile sets a value for their dataset (colbert.py@4bedb75 query_maxlen on ArguAna and
    # Climate-FEVER; dense_encoder.py@4bedb75 Jina v3 without a task on ArguAna) and the same entries elsewhere
    per_dataset = {}
    for name in PER_DATASET_ENTRIES:
        for profile in ("card", "paper"):
            entry = get(name).with_profile(profile)
            for ds_name in PER_DATASET_SETS:
                ds = datasets.get(ds_name)
                cell = entry.for_dataset(ds)
                per_dataset[f"{name}@{profile} | {ds_name}"] = {
                    "run": store.runs.path(cell, ds).name, "index": store.indexes.dir(cell.index, ds).name}
    return {"entries": entries, "datasets": sets, "staged_fingerprints": fingerprints, "quickstart_cells": cells,
            "per_dataset_cells": per_dataset}


def test_cache_keys_are_the_golden_ones(tmp_path, monkeypatch, request):
    for var in ("IRGRID_IRDS_STAGED", "IRGRID_TINY_MODELS", "IRGRID_MODELS"):
        monkeypatch.delenv(var, raising=False)  # keys of a plain machine: no staged fingerprint, real checkpoints
    keys = _keys(tmp_path)
    if request.config.getoption("--update-golden"):
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(json.dumps(keys, indent=1, sort_keys=True) + "\n")
        pytest.skip(f"rewrote {GOLDEN.relative_to(ROOT)}: review and commit the diff")
    if not GOLDEN.exists():
        pytest.fail(f"{GOLDEN.relative_to(ROOT)} is missing: create it with `{HOW}`", pytrace=False)
    golden = json.loads(GOLDEN.read_text())
    changed = [f"{section}[{name!r}]: {golden[section].get(name)} -> {value}"
               for section in keys for name, value in keys[section].items() if golden[section].get(name) != value]
    changed += [f"{section}[{name!r}]: no longer computed" for section in golden for name in golden[section]
                if name not in keys.get(section, {})]
    assert not changed, (
        "cache keys changed: every cached index and run under these keys will be recomputed (or, if the key should "
        "have changed and did not, served stale). If intended, regenerate with `" + HOW + "` and commit the diff:\n  "
        + "\n  ".join(changed))

