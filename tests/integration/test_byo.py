"""Bring-your-own collections: local TREC/TSV/JSONL files declared in an experiment file run like any dataset."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import experiment_yaml, write_scifact_slice

from irgrid.runner.experiment import ExperimentError, from_dict, load

N_QUERIES, N_DOCS = 40, 300


def _clean(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture(scope="module")
def collection(tmp_path_factory) -> Path:
    """A slice of the staged BEIR SciFact: 40 test queries, their relevant abstracts plus others (300 docs)."""
    root = tmp_path_factory.mktemp("byo")
    write_scifact_slice(root, N_QUERIES, N_DOCS, all_formats=True)
    return root


def test_byo_jsonl_and_trec_topics_give_the_same_collection(collection, shared_store):
    from irgrid import grid

    exp = collection / "exp2.yaml"
    exp.write_text("""\
collections:
  - {name: scifact-slice-tsv, docs: data/docs.tsv, topics: data/topics.tsv, qrels: data/qrels.txt}
  - {name: scifact-slice-jsonl, docs: data/docs.jsonl, topics: data/topics.trec, qrels: data/qrels.txt}
datasets: [scifact-slice-tsv, scifact-slice-jsonl]
retrievers: [bm25-pisa]
measures: [nDCG@10]
""")
    spec = load(exp)
    tsv, jsonl = spec.datasets
    assert tsv.group == jsonl.group == "byo" and tsv.corpus != jsonl.corpus  # corpus ids carry the file hash
    assert tsv.topics().equals(jsonl.topics()) and len(tsv.topics()) == N_QUERIES
    flat = [[(d["docno"], _clean(d["text"])) for d in ds.docs()] for ds in (tsv, jsonl)]
    assert flat[0] == flat[1]  # flat title + text either way (the TSV has whitespace collapsed)
    assert tsv.docs_count() == jsonl.docs_count() == len(flat[0]) > 250
    results = grid.run(spec, store=shared_store).results
    ndcg = results[results.measure == "nDCG@10"].set_index("dataset")["value"]
    assert ndcg["scifact-slice-tsv"] == pytest.approx(ndcg["scifact-slice-jsonl"])
    import pyterrier as pt  # registered with ir_datasets: the same interface as any other dataset

    assert len(pt.get_dataset("irds:scifact-slice-jsonl").get_topics("title")) == N_QUERIES


def test_byo_policies_and_cache_keys(collection):
    base = {"name": "slice-policies", "docs": "data/docs.tsv", "topics": "data/topics.tsv", "qrels": "data/qrels.txt",
            "drop_self_matches": True, "fields": ["text"]}
    spec = from_dict({"collections": [base], "datasets": ["slice-policies"], "retrievers": ["bm25-pisa"],
                      "measures": ["nDCG@10"]}, source=str(collection / "exp3.yaml"))
    ds = spec.datasets[0]
    assert ds.drop_self_matches and ds.fields == ("text",)
    assert {role for role, _ in ds.files} == {"docs", "topics", "qrels"}
    assert "files" in ds.config()  # editing a file changes the run cache key
    again = from_dict({"collections": [base], "datasets": ["slice-policies"], "retrievers": ["bm25-pisa"],
                       "measures": ["nDCG@10"]}, source=str(collection / "exp3.yaml"))
    assert again.datasets[0].config() == ds.config()  # re-reading the same files is fine


@pytest.mark.parametrize("change, message", [
    ({"docs": "data/nope.tsv"}, r"collections\[0\]: docs file .*nope.tsv does not exist \(paths are relative to"),
    ({"qrels": None}, r"missing \['qrels'\]"),
    ({"docs": "data/qrels.txt", "docs_format": "xml"}, r"docs_format 'xml' is not one of \['jsonl', 'tsv'\]"),
    ({"name": "vaswani"}, r"'vaswani' is already registered \(a catalog dataset\)"),
    ({"name": "cranfield"}, r"'cranfield' is an ir_datasets id"),
    ({"colour": "red"}, r"unknown key\(s\) \['colour'\]"),
])
def test_byo_errors_name_the_entry_and_the_fix(collection, change, message):
    item = {"name": "slice-bad", "docs": "data/docs.tsv", "topics": "data/topics.tsv", "qrels": "data/qrels.txt",
            **change}
    item = {k: v for k, v in item.items() if v is not None}
    with pytest.raises(ExperimentError, match=message):
        from_dict({"collections": [item], "datasets": ["vaswani"], "retrievers": ["bm25-pisa"],
                   "measures": ["AP"]}, source=str(collection / "bad.yaml"))


def test_reading_an_experiment_changes_no_global_catalog(collection):
    """A bring-your-own collection travels inside the spec: parsing (twice) registers nothing in irgrid's catalog
    or ir_datasets, and the dataset still reaches its corpus."""
    import ir_datasets

    from irgrid.data import datasets as ds_mod

    item = {"name": "slice-side-effects", "docs": "data/docs.tsv", "topics": "data/topics.tsv",
            "qrels": "data/qrels.txt"}
    exp = {"collections": [item], "datasets": [{"name": "slice-side-effects", "queries": 5}],
           "retrievers": ["bm25-pisa"], "measures": ["nDCG@10"]}
    catalog = ds_mod.DATASETS.names()
    first = from_dict(exp, source=str(collection / "exp-fx.yaml"))
    second = from_dict(exp, source=str(collection / "exp-fx.yaml"))
    assert ds_mod.DATASETS.names() == catalog
    assert "slice-side-effects" not in ir_datasets.registry
    ds = first.datasets[0]
    assert ds.config() == second.datasets[0].config()
    assert ds.corpus_dataset().name == ds.corpus and ds.corpus not in ds_mod.DATASETS
    assert ds.docs_count() == len(list(ds.docs())) > 250
    # another collection under that name with other files (a file edited in a notebook): each reads its own files,
    # the id's registration follows the dataset in use (issue 32: it was refused, every cell of the rerun failed)
    other = dict(item, docs="data/docs.jsonl", topics="data/topics.trec")
    clash = from_dict(dict(exp, collections=[other]), source=str(collection / "exp-fx.yaml")).datasets[0]
    assert clash.corpus != ds.corpus
    assert list(ds.topics()["query"]) == list(clash.topics()["query"])  # the same queries, from TSV then TREC
    assert ds.irds().queries_cls().__name__ == "GenericQuery" and clash.irds().queries_cls().__name__ == "TrecQuery"


def test_collection_file_edited_in_one_process_is_read_again(tmp_path, collection):
    """A notebook: run, edit the qrels, run again in the same process: the new judgements are used."""
    import shutil

    from irgrid import grid
    from irgrid.store import Store

    shutil.copytree(collection / "data", tmp_path / "data")
    exp = experiment_yaml(tmp_path, name="slice-notebook")
    store = Store(tmp_path / "cache")
    before = grid.run(load(exp), store=store).results
    qrels = tmp_path / "data" / "qrels.txt"
    lines = qrels.read_text().splitlines(keepends=True)
    qrels.write_text("".join(lines[: len(lines) // 2]))
    ran = grid.run(load(exp), store=store)
    after = ran.results
    assert ran.ok and len(after) == len(before)
    value = lambda r: float(r[r["measure"] == "nDCG@10"]["value"].iloc[0])  # noqa: E731
    assert value(after) != value(before)


def test_collection_key_typo_gets_a_suggestion(collection):
    item = {"name": "slice-typo", "docs": "data/docs.tsv", "topics": "data/topics.tsv", "qrels": "data/qrels.txt",
            "feilds": ["text"]}
    with pytest.raises(ExperimentError, match=r"collections\[0\]: unknown key\(s\) \['feilds'\].*Did you mean 'fields'"):
        from_dict({"collections": [item], "datasets": ["slice-typo"], "retrievers": ["bm25-pisa"]},
                  source=str(collection / "typo.yaml"))


def test_qrels_matching_no_document_are_warned_about(tmp_path, caplog):
    data = tmp_path / "data"
    data.mkdir()
    (data / "docs.tsv").write_text("D1\tt\tx\n")
    (data / "topics.tsv").write_text("q1\tx\n")
    (data / "qrels.txt").write_text("q1 0 D9 1\n")
    with caplog.at_level("WARNING", logger="irgrid"):
        load(experiment_yaml(tmp_path, name="nomatch"))
    assert any("no relevant document" in r.message for r in caplog.records)


def _cranfield_style(root: Path, renumbered: bool) -> Path:
    """Vaswani as bring-your-own files, with topics under "original" query numbers (1, 2, 4, 5, 7, ...: a gap
    every third) while the qrels keep the sequential ones, as Cranfield converted from its original files."""
    from irgrid.data import datasets

    vaswani = datasets.get("vaswani")
    topics, qrels = vaswani.topics(), vaswani.qrels()
    number = {q: str(i + i // 2) if renumbered else q for i, q in enumerate(sorted(topics["qid"], key=int), 1)}
    wanted = set(qrels["docno"])
    docs = [d for i, d in enumerate(vaswani.irds().docs_iter()) if d.doc_id in wanted or i < 200]
    data = root / "data"
    data.mkdir(parents=True, exist_ok=True)
    (data / "docs.tsv").write_text("".join(f"{d.doc_id}\t\t{' '.join(d.text.split())}\n" for d in docs))
    (data / "topics.tsv").write_text("".join(f"{number[q]}\t{' '.join(t.split())}\n"
                                             for q, t in zip(topics["qid"], topics["query"])))
    (data / "qrels.txt").write_text("".join(f"{q} 0 {d} {lab}\n" for q, d, lab in
                                            zip(qrels["qid"], qrels["docno"], qrels["label"])))
    return root


def test_qrels_ids_absent_from_topics_are_refused_by_name(tmp_path, caplog):
    """Topics under other numbers than the qrels (Cranfield's original query numbers): the qrels ids no topic
    has are an error naming how many and which; the matching ids would score queries against other queries'
    judgements. `allow_unjudged_qrels: true` accepts them, still named in a warning."""
    root = _cranfield_style(tmp_path, renumbered=True)
    topic_ids = {line.split("\t")[0] for line in (root / "data" / "topics.tsv").read_text().splitlines()}
    judged = {line.split()[0] for line in (root / "data" / "qrels.txt").read_text().splitlines()}
    orphans = judged - topic_ids
    assert 0 < len(orphans) < len(judged)  # some ids match, others do not: the case the old check let through
    item = {"name": "cranfield-style", "docs": "data/docs.tsv", "topics": "data/topics.tsv",
            "qrels": "data/qrels.txt"}
    exp = {"collections": [item], "datasets": ["cranfield-style"], "retrievers": ["bm25-pisa"],
           "measures": ["nDCG@10"]}
    first = sorted(orphans, key=int)[:5]
    with pytest.raises(ExperimentError) as e:
        from_dict(exp, source=str(root / "exp.yaml"))
    message = str(e.value)
    assert f"{len(orphans)} of {len(judged)} query ids judged in" in message
    assert f"qrels ids: {', '.join(first)}, ..." in message
    assert "allow_unjudged_qrels: true" in message and "numbered differently" in message
    with caplog.at_level("WARNING", logger="irgrid"):
        spec = from_dict(dict(exp, collections=[dict(item, allow_unjudged_qrels=True)]),
                         source=str(root / "exp.yaml"))
    assert spec.datasets[0].name == "cranfield-style"
    assert any(f"{len(orphans)} of {len(judged)} query ids" in r.message and "ignored" in r.message
               for r in caplog.records)


def test_qrels_and_topics_numbered_alike_load_without_a_word(tmp_path, caplog):
    root = _cranfield_style(tmp_path, renumbered=False)
    with caplog.at_level("WARNING", logger="irgrid"):
        spec = from_dict({"collections": [{"name": "vaswani-byo", "docs": "data/docs.tsv",
                                           "topics": "data/topics.tsv", "qrels": "data/qrels.txt"}],
                          "datasets": ["vaswani-byo"], "retrievers": ["bm25-pisa"], "measures": ["nDCG@10"]},
                         source=str(root / "exp.yaml"))
    assert len(spec.datasets[0].topics()) == 93
    assert not [r for r in caplog.records if "judge" in r.message]


def test_dry_run_of_a_small_byo_grid_estimates_every_cell_and_names_every_retriever(collection, tmp_path):
    """Issue 41: a small grid on brought files printed "0 GPU-hours + 0 CPU-hours" and "; 2 cells without an
    estimate" (its query count was unknown), and named no retriever. Now the topics are counted, times read in
    seconds or minutes, and each retriever (BM25 too) has a line: cells, cost, what is missing here."""
    from irgrid.runner import planning
    from irgrid.store import Store

    spec = from_dict({"collections": [{"name": "slice-plan", "docs": "data/docs.tsv", "topics": "data/topics.tsv",
                                       "qrels": "data/qrels.txt"}],
                      "datasets": ["slice-plan"], "measures": ["nDCG@10"],
                      "retrievers": ["bm25", "bm25-pisa", "all-minilm-l6-v2",
                                     {"as": "casc", "pipeline": "bm25-pisa % 20 >> all-minilm-l6-v2"}]},
                     source=str(collection / "plan.yaml"))
    plan = planning.make_plan(spec, Store(tmp_path / "cache"))
    assert {r["lacks"] for r in plan.rows} == {""} and not any("unknown" in r["source"] for r in plan.rows)
    text = planning.format_summary(plan)
    assert "without an estimate" not in text and "0 GPU-hours + 0 CPU-hours" not in text
    total = next(line for line in text.splitlines() if line.startswith("total: "))
    assert "CPU-seconds" in total or "CPU-minutes" in total, total  # finer than 0.1 h
    lines = planning.retriever_lines(plan)
    assert lines[0].split()[:2] == ["retriever", "cells"]
    by_name = {line.split()[0]: line for line in lines[1:]}
    assert list(by_name) == ["bm25", "bm25-pisa", "all-minilm-l6-v2", "casc"]
    for line in by_name.values():
        assert line.split()[1] == "1" and line.rstrip().endswith(("nothing", "costed on their lines)")), line
    bm25 = next(r for r in plan.rows if r["retriever"] == "bm25")
    assert bm25["cpu_s"] > 0 and planning._duration(bm25["cpu_s"]) in by_name["bm25"]
