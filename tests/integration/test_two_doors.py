"""One expression language, two doors (issue 31): every grammar form run as an experiment-file item, as
`irgrid.pipeline("EXPR", ds)` and as PyTerrier operators over the entries' roles (`.retriever(ds)`,
`.scorer(ds)`, `irgrid.PerQueryMinMax`, `irgrid.rrf`) gives the same run row for row and the same results.csv
rows; a first stage composed after another one re-ranks, never re-retrieves; malformed stored runs are refused.

Cheap: a 150-document SciFact slice as a bring-your-own collection (so both doors are tested on one), BM25 by
PISA, tiny random-weight models of MiniLM, ColBERTv2 and a cross-encoder (the wiring, not effectiveness)."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pandas as pd
import pytest

from irgrid import grid
from irgrid.runner.experiment import from_dict, with_extra

pytestmark = pytest.mark.slow

FORMS = {
    "casc-dense": "bm25-pisa % 20 >> all-minilm-l6-v2",
    "casc-late": "bm25-pisa % 20 >> colbertv2",
    "casc-ce": "bm25-pisa % 20 >> ce-ms-marco-minilm-l6-v2",
    "linear": "0.7 * bm25-pisa + 0.3 * all-minilm-l6-v2",
    "fused": "rrf(bm25-pisa, all-minilm-l6-v2, k=60)",
    "union": "(bm25-pisa % 10 | all-minilm-l6-v2 % 10) >> all-minilm-l6-v2",
    "inter": "(bm25-pisa % 30 & all-minilm-l6-v2 % 30) >> all-minilm-l6-v2",
    "named": "casc-dense % 5",  # a named sub-pipeline (another item's `as:` name)
}
COMPARED = ["dataset", "system", "measure", "value", "p_value", "p_value_corrected", "significant", "baseline"]


def operators(ds):
    """The same forms composed in Python from the entries' roles."""
    import irgrid

    mm = irgrid.PerQueryMinMax
    bm25 = irgrid.retriever("bm25-pisa").retriever(ds)
    mini = irgrid.retriever("all-minilm-l6-v2")
    dense, rescore = mini.retriever(ds), mini.scorer(ds)
    casc = (bm25 % 20) >> rescore
    return {
        "casc-dense": casc,
        "casc-late": (bm25 % 20) >> irgrid.retriever("colbertv2").scorer(ds),
        "casc-ce": (bm25 % 20) >> irgrid.retriever("ce-ms-marco-minilm-l6-v2").scorer(ds),
        "linear": 0.7 * (bm25 >> mm()) + 0.3 * (dense >> mm()),
        "fused": irgrid.rrf(bm25, dense, k=60),
        "union": ((bm25 % 10) | (dense % 10)) >> rescore,
        "inter": ((bm25 % 30) & (dense % 30)) >> rescore,
        "named": casc % 5,
    }


@pytest.fixture(scope="module")
def doors(tmp_path_factory):
    """The grid with every form as items, as irgrid.pipeline(...) and as operators (extra=), in one cache."""
    from support import write_scifact_slice

    import irgrid
    from irgrid.store import Store

    mp = pytest.MonkeyPatch()
    try:  # the environment is restored even when building the grids fails (no leak into later tests)
        mp.setenv("IRGRID_TINY_MODELS", "1")
        root = tmp_path_factory.mktemp("doors")
        mp.setenv("IRGRID_CACHE", str(root / "cache"))
        files = write_scifact_slice(root, n_queries=8, n_docs=150)
        collection = {"name": "scifact-slice", **{k: str(root / v) for k, v in files.items()}}
        exp = {"name": "doors", "collections": [collection], "datasets": ["scifact-slice"],
               "retrievers": ["bm25-pisa", "all-minilm-l6-v2", *({"as": n, "pipeline": e} for n, e in FORMS.items())],
               "measures": ["nDCG@10", "AP", "R@20"], "baseline": "bm25-pisa", "latency_sample": 0}
        store = Store(root / "cache")
        yaml_results = grid.run(from_dict(exp), out=root / "yaml", store=store, fail_fast=True).results
        ds = irgrid.dataset(collection)
        builds = len(store.builds())
        # door 2: irgrid.pipeline("EXPR", ds): the items' own cells (same keys: nothing computed anew)
        base = {**exp, "retrievers": ["bm25-pisa", "all-minilm-l6-v2"]}
        by_text = {n: irgrid.pipeline(e, ds) for n, e in FORMS.items() if n != "named"}
        by_text["named"] = irgrid.pipeline(FORMS["named"], ds, names={"casc-dense": by_text["casc-dense"]})
        text_results = grid.run(with_extra(from_dict(base), by_text, None), out=root / "text", store=store,
                                fail_fast=True).results
        text_builds = len(store.builds()) - builds
        # door 3: PyTerrier operators over the roles, keyed by the caller
        ops = operators(ds)
        op_results = grid.run(with_extra(from_dict(base), ops, {n: f"{n}-v1" for n in ops}), out=root / "ops",
                              store=store, fail_fast=True).results
        yield {"root": root, "yaml": yaml_results, "text": text_results, "ops": op_results, "text_builds": text_builds,
               "store": store, "ds": ds, "exp": exp}
    finally:
        mp.undo()


def _run(root, out, name):
    with gzip.open(root / out / "runs" / "scifact-slice" / f"{name}.res.gz", "rt") as f:
        run = pd.read_csv(f, sep=" ", header=None, names=["qid", "Q0", "docno", "rank", "score", "name"],
                          dtype={"qid": str, "docno": str})
    return run.drop(columns=["Q0", "name"]).sort_values(["qid", "rank"]).reset_index(drop=True)


@pytest.mark.parametrize("name", list(FORMS))
def test_every_form_gives_the_same_run_through_both_doors(doors, name):
    root = doors["root"]
    yaml_run = _run(root, "yaml", name)
    assert len(yaml_run) and not yaml_run.duplicated(["qid", "docno"]).any()
    for door in ("text", "ops"):
        other = _run(root, door, name)
        pd.testing.assert_frame_equal(other[["qid", "docno", "rank"]], yaml_run[["qid", "docno", "rank"]])
        np.testing.assert_array_equal(other["score"].to_numpy(), yaml_run["score"].to_numpy())


def test_results_csv_rows_are_identical(doors):
    """Every measure row (values, paired tests, corrections) is the same whatever the door; ms/query is measured
    anew by each run. The expression door is the very item (same key), so even `beyond_depth` agrees."""
    def rows(door):
        res = pd.read_csv(doors["root"] / door / "results.csv")
        return res[res["measure"] != "ms/query"].sort_values(["system", "measure"]).reset_index(drop=True)

    yaml_rows = rows("yaml")
    pd.testing.assert_frame_equal(rows("text"), yaml_rows)
    pd.testing.assert_frame_equal(rows("ops")[COMPARED], yaml_rows[COMPARED])
    assert doors["text_builds"] == 0  # irgrid.pipeline("EXPR", ds) in a grid reads the items' stored cells
    flagged = yaml_rows.set_index(["system", "measure"])["beyond_depth"]
    assert flagged["named", "nDCG@10"] and flagged["named", "R@20"]  # 5 deep
    assert flagged["casc-dense", "AP"] and not flagged["casc-dense", "nDCG@10"]  # truncated vs bm25's 1000
    assert not flagged["bm25-pisa", "AP"]
    # an intersection declares 30 but holds what both first stages share: its run's own depth decides (issue 41)
    held = int(_run(doors["root"], "yaml", "inter")["qid"].value_counts().max())
    assert held < 30 and flagged["inter", "R@20"] == (held < 20) and flagged["inter", "AP"]
    md = (doors["root"] / "yaml" / "results.md").read_text()
    assert "†: the measure looks deeper than the system returns" in md and "scifact-slice: named R@20" in md


def test_a_first_stage_after_another_reranks_and_a_scorer_needs_candidates(doors):
    """The issue's F1 composition: a dense entry's first stage fed a result frame re-ranks exactly those
    candidates (the scorer's scores), instead of retrieving 1,000 new documents per input row."""
    import irgrid
    from irgrid.runner.grammar import ExpressionError
    from irgrid.runner.roles import RoleError

    ds = doors["ds"]
    topics = ds.topics()
    bm25 = irgrid.retriever("bm25-pisa").pipeline(ds)
    naive = (bm25 % 20) >> irgrid.retriever("all-minilm-l6-v2").pipeline(ds)
    out = naive(topics)
    assert not out.duplicated(["qid", "docno"]).any() and out.groupby("qid").size().max() <= 20
    cascade = _run(doors["root"], "yaml", "casc-dense")
    merged = out.merge(cascade, on=["qid", "docno"], suffixes=("", "_yaml"))
    assert len(merged) == len(out) == len(cascade)
    np.testing.assert_array_equal(merged["score"].to_numpy(), merged["score_yaml"].to_numpy())
    # a BM25 entry given candidates scores them with its own retrieval scores (issue 41 item 5)
    k12 = irgrid.retriever("bm25-pisa").with_options(k1=1.2)
    rescored = (bm25 % 20 >> k12.pipeline(ds))(topics)
    own = k12.pipeline(ds)(topics)
    both = rescored.merge(own, on=["qid", "docno"], suffixes=("", "_own"))
    assert len(rescored) == len((bm25 % 20)(topics)) and len(both) == len(rescored)
    assert both["score"].tolist() == both["score_own"].tolist()
    import dataclasses

    unscoring = dataclasses.replace(irgrid.retriever("bm25-pisa"), name="no-scorer", make_scorer=None)
    with pytest.raises(RoleError, match=r"'no-scorer' \(sparse\) cannot score given candidates.*families"):
        (bm25 % 20 >> unscoring.pipeline(ds))(topics)
    with pytest.raises(RoleError, match=r"scorer\(\) re-ranks candidates but got queries only"):
        irgrid.retriever("all-minilm-l6-v2").scorer(ds)(topics)
    with pytest.raises(RoleError, match=r"'splade-tiny' \(sparse\) cannot score"):
        irgrid.retriever("splade-tiny").scorer(ds)
    with pytest.raises(ExpressionError, match=r"is a first stage.*scorer"):
        (bm25 % 20 >> irgrid.pipeline(FORMS["casc-dense"], ds))(topics)
    folder = irgrid.retriever("all-minilm-l6-v2").indexer(ds).index()
    assert folder == doors["store"].indexes.dir(irgrid.retriever("all-minilm-l6-v2").index, ds)


def test_stored_runs_with_duplicates_or_deeper_than_their_system_are_refused(doors, tmp_path):
    from irgrid.runner.checks import RunCheckError
    from irgrid.store import file_digest

    store, exp = doors["store"], doors["exp"]
    spec = from_dict(exp)
    ds = spec.datasets[0]
    entry = {r.name: r for r in spec.retrievers}["casc-dense"]
    path, meta_path = store.runs.path(entry, ds), store.runs.meta_path(entry, ds)
    original, original_meta = path.read_bytes(), meta_path.read_text()

    def tamper(lines):  # rewrite the stored run, and its metadata so that the cache's own verification passes
        with gzip.open(path, "wt") as f:
            f.write("".join(lines))
        meta = json.loads(original_meta)
        meta["run"].update(size=path.stat().st_size, sha256=file_digest(path), rows=len(lines),
                           queries=len({line.split()[0] for line in lines}))
        meta_path.write_text(json.dumps(meta))

    lines = gzip.decompress(original).decode().splitlines(keepends=True)
    one = lines[0].split()
    try:
        tamper(lines + [f"{one[0]} Q0 {one[2]} 999 -1e9 casc-dense\n"])
        with pytest.raises(RunCheckError, match=rf"'casc-dense' on 'scifact-slice': 1 duplicate \(qid, docno\) "
                                                rf"pair\(s\), e\.g\. qid={one[0]} docno={one[2]}.*scorer"):
            grid.run(spec, store=store, fail_fast=True)
        q = one[0]
        extra = [f"{q} Q0 fake-{i} {900 + i} {-1e9 - i} casc-dense\n" for i in range(25)]
        tamper(lines + extra)
        with pytest.raises(RunCheckError, match=rf"query {q} has \d+ results, more than the system's depth 20"):
            grid.run(spec, store=store, fail_fast=True)
        results = grid.run(spec, store=store)  # not fail-fast: one failed cell, named, the others evaluated
        failure = next(f for f in results.failures if f.retriever == "casc-dense")
        assert "RunCheckError" in failure.error and "scifact-slice" in failure.error
    finally:
        path.write_bytes(original)
        meta_path.write_text(original_meta)


def test_sampled_dataset_names_resolve_in_both_doors(tmp_path):
    """`{name: vaswani, queries: 5, seed: 3}` hands `vaswani@q5s3` to a function of `extra=`: it resolves to
    that sample, and so does the plain name."""
    import irgrid

    exp = {"datasets": [{"name": "vaswani", "queries": 5, "seed": 3}], "retrievers": ["bm25-pisa"],
           "measures": ["AP"], "latency_sample": 0}
    seen = []

    def mine(name):
        seen.append(name)
        return irgrid.retriever("bm25-pisa").pipeline(name) % 10

    results = irgrid.run(exp, tmp_path / "out", extra={"mine": mine, "expr": lambda n: irgrid.pipeline(
        "bm25-pisa % 10", n)}, keys={"mine": "sampled-v1", "expr": "sampled-expr-v1"}).results
    assert seen == ["vaswani@q5s3"] and set(results["system"]) == {"bm25-pisa", "mine", "expr"}
    value = results.set_index(["system", "measure"])["value"]
    assert value["mine", "AP"] == value["expr", "AP"]
    assert irgrid.dataset("vaswani@q5s3").topics()["qid"].tolist() == seen[0].dataset.topics()["qid"].tolist()
    assert len(irgrid.retriever("bm25-pisa").pipeline("vaswani@q5s3").transform(
        irgrid.dataset("vaswani@q5s3").topics())["qid"].unique()) == 5


def test_a_raw_python_sum_of_differently_scaled_entries_warns(doors):
    """Issue 41: Python's `bm25 + dense` is PyTerrier's raw sum while the expression `bm25 + dense` normalises each
    side: the Python door warns when a raw `+` adds two differently scaled entries, and only then."""
    import warnings

    import irgrid
    from irgrid.runner.transforms import RawSumWarning

    ds, mm = doors["ds"], irgrid.PerQueryMinMax
    bm25 = irgrid.retriever("bm25-pisa").retriever(ds)
    variant = irgrid.retriever("bm25-pisa").with_options(name="bm25-pisa-k1.2", k1=1.2).retriever(ds)
    dense = irgrid.pipeline("all-minilm-l6-v2", ds)
    with pytest.warns(RawSumWarning, match=r"bm25-pisa \+ all-minilm-l6-v2: PyTerrier's `\+` adds raw scores"):
        raw = bm25 + dense
    assert len(raw.search("cells")) > 0  # still PyTerrier's sum: a warning, not a refusal
    with warnings.catch_warnings():
        warnings.simplefilter("error", RawSumWarning)
        bm25 + variant  # the same scale
        (bm25 >> mm()) + (dense >> mm())  # normalised first, as the grammar does
