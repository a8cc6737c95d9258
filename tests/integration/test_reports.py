"""`irgrid report` and `irgrid check` on a real grid (vaswani + SciFact, Lucene and PISA BM25)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from support import SPARSE_GRID

from irgrid import grid
from irgrid.cli import main
from irgrid.runner import cell as cell_mod
from irgrid.runner.experiment import from_dict, load

ROOT = Path(__file__).resolve().parents[2]
GRID = {"name": "report-grid", **SPARSE_GRID}
EXPECTED = """expected:
  - {dataset: beir/scifact/test, system: bm25, measure: nDCG@10, value: 0.6789, tolerance: 0.0005, source: Pyserini 2CR}
  - {dataset: vaswani, system: bm25-pisa, measure: AP, value: 0.3053, tolerance: 0.0005, source: pyterrier-pisa tests}
  - {dataset: vaswani, system: bm25, measure: AP, value: 0.2856, tolerance: 0.0005, source: pyterrier-anserini tests}
"""


@pytest.fixture(scope="module")
def stored(shared_store, tmp_path_factory):
    root = tmp_path_factory.mktemp("reports")
    exp = root / "grid.yaml"
    exp.write_text(json.dumps(GRID))
    (root / "grid.expected.yaml").write_text(EXPECTED)
    out = root / "out"
    grid.run(load(exp), out=out, store=shared_store)
    return root, out


@pytest.fixture(scope="module")
def report(stored):
    _, out = stored
    assert main(["report", str(out)]) == 0
    return out / "report"


def test_outputs_are_self_contained(stored):
    _, out = stored
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["source_path"] == str((stored[0] / "grid.yaml").resolve())
    assert manifest["retrievers"]["bm25"]["paper_name"] == "BM25"
    assert manifest["retrievers"]["bm25-pisa"]["paper_name"] is None
    qrels = pd.read_csv(out / "qrels" / "vaswani.qrels", sep=" ", header=None)
    assert qrels[0].nunique() == 93


def test_report_writes_every_table_and_figure(report):
    for stem in ("main-other", "main-beir", "effect-sizes", "tableA3", "tableA5", "bootstrap", "failures",
                 "jaccard-vaswani", "jaccard-beir--scifact--test", "fusion", "win-tie-loss", "meta-analysis"):
        for ext in ("md", "tex", "html"):
            assert (report / f"{stem}.{ext}").stat().st_size > 0, (stem, ext)
    for stem in ("table2", "tableA4", "tableA6", "tableA7"):  # no column of these is filled by this grid
        assert not (report / f"{stem}.md").exists(), stem
    for png in ("figure1.png", "jaccard-vaswani.png", "jaccard-beir--scifact--test.png"):
        assert (report / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for doc in ("report.md", "report.tex", "report.html"):
        assert (report / doc).exists()
    assert (report / "report.tex").read_text().rstrip().endswith(r"\end{document}")


def test_tableA5_colours_bm25_scifact_within_two_se(report):
    md = (report / "tableA5.md").read_text()
    row = next(line for line in md.splitlines() if line.startswith("| bm25 |"))
    assert "0.679 =" in row  # blue: within 2 SE of the paper's 0.679
    assert "| _paper: BM25_ |" in md and "_0.679_" in md
    assert (report / "report.md").read_text().count("Legend of the paper's tables") == 1
    html = (report / "tableA5.html").read_text()
    assert 'title="within"' in html and "color: rgb(0, 69, 217)" in html
    tex = (report / "tableA5.tex").read_text()
    assert r"\textcolor[rgb]{0.0000,0.2700,0.8500}" in tex
    z = pd.read_csv(report / "zscores.csv")
    assert set(z[z.system == "bm25-pisa"]["class"]) == {"new"}


def test_failure_points_and_jaccard_csvs(report, stored):
    ranks = pd.read_csv(report / "failure_ranks.csv", dtype={"qid": str})
    assert len(ranks[(ranks.dataset == "vaswani") & (ranks.system == "bm25")]) == 93
    assert ranks["rank"].between(1, 1001).all()
    hard = pd.read_csv(report / "hard_queries.csv", dtype={"qid": str})
    assert hard.groupby(["dataset", "system"]).size().to_dict() == {
        ("beir/scifact/test", "bm25"): 30, ("beir/scifact/test", "bm25-pisa"): 30,
        ("vaswani", "bm25"): 10, ("vaswani", "bm25-pisa"): 10}
    jac = pd.read_csv(report / "jaccard.csv")
    for _, r in jac.iterrows():  # recomputed from the hard-query sets by hand
        a = set(hard[(hard.dataset == r.dataset) & (hard.system == r.a)].qid)
        b = set(hard[(hard.dataset == r.dataset) & (hard.system == r.b)].qid)
        assert r.jaccard == pytest.approx(len(a & b) / len(a | b))
    # the failure rank is 1 / RR@1000 of the stored run (ir_measures on the stored qrels)
    import ir_measures

    from irgrid.report.failures import qrels_dict, run_dict
    from irgrid.report.stored import load

    g = load(stored[1])
    rr = {m.query_id: m.value for m in ir_measures.iter_calc(
        [ir_measures.RR @ 1000], qrels_dict(g.qrels("vaswani")), run_dict(g.run("vaswani", "bm25")))}
    v = ranks[(ranks.dataset == "vaswani") & (ranks.system == "bm25")].set_index("qid")["rank"]
    for qid, rank in v.items():
        assert rank == (1001 if rr.get(qid, 0) == 0 else round(1 / rr[qid]))


def test_main_tables_per_group_carry_the_t_test_marks_of_results_csv(report, stored):
    results = pd.read_csv(stored[1] / "results.csv")
    for stem, dataset, n in (("main-other", "vaswani", 93), ("main-beir", "beir/scifact/test", 300)):
        md = (report / f"{stem}.md").read_text()
        assert (f"nDCG@10, AP, R@1000 on {dataset} (n = {n} queries); baseline bm25; ▲/▼: significantly "
                "better/worse than the baseline bm25 by the paired t-test, Holm correction over the 1 system "
                "compared with it") in md.splitlines()[0]
        row = next(line for line in md.splitlines() if line.startswith("| bm25-pisa |"))
        block = results[(results.dataset == dataset) & (results.system == "bm25-pisa")].set_index("measure")
        for measure, cell in zip(["nDCG@10", "AP", "R@1000"], row.strip("|").split("|")[1:]):
            sig = str(block.at[measure, "significant"]) == "True"
            assert ("▲" in cell or "▼" in cell) == sig, (dataset, measure, cell)


def test_fusion_and_cross_dataset_csvs(report):
    sugg = pd.read_csv(report / "fusion_suggestions.csv")
    assert set(sugg.dataset) == {"vaswani", "beir/scifact/test"} and not sugg.cross_family.any()
    rrf = pd.read_csv(report / "fusion_rrf.csv")
    assert len(rrf) == 2 * 3 and rrf.rrf_value.between(0, 1).all()
    wtl = pd.read_csv(report / "win_tie_loss.csv")
    assert ((wtl.win + wtl.tie + wtl.loss) == 2).all()
    meta = pd.read_csv(report / "meta_analysis.csv")
    assert (meta.k == 2).all() and (meta.ci_low <= meta.effect).all() and (meta.effect <= meta.ci_high).all()


def test_report_is_reproducible_from_stored_results_only(stored, report, tmp_path, monkeypatch):
    # no run, no index, no dataset: only the output folder
    monkeypatch.setattr(cell_mod, "build_pipeline", lambda *a, **k: pytest.fail("a pipeline was built"))
    import irgrid.data.datasets

    monkeypatch.setattr(irgrid.data.datasets.Dataset, "qrels", lambda self: pytest.fail("qrels read from the dataset"))
    assert main(["report", str(stored[1]), "--to", str(tmp_path / "again")]) == 0
    for name in ("bootstrap.csv", "zscores.csv", "jaccard.csv", "fusion_rrf.csv", "meta_analysis.csv", "tableA5.md",
                 "main-other.md", "comparisons.csv"):
        assert (tmp_path / "again" / name).read_bytes() == (report / name).read_bytes(), name


def test_check_passes_published_scores_and_fails_a_wrong_one(stored, tmp_path, capsys):
    root, out = stored
    assert main(["check", str(out)]) == 0  # grid.expected.yaml beside grid.yaml
    text = capsys.readouterr().out
    assert text.count("OK  ") == 3 and "3 OK, 0 FAIL" in text
    wrong = tmp_path / "wrong.expected.yaml"
    wrong.write_text(EXPECTED.replace("value: 0.3053", "value: 0.3153"))
    assert main(["check", str(out), "--expected", str(wrong)]) == 1
    text = capsys.readouterr().out
    assert "FAIL  vaswani  bm25-pisa  AP: 0.3053, expected 0.3153" in text and "2 OK, 1 FAIL" in text
    missing = tmp_path / "missing.expected.yaml"
    missing.write_text("expected:\n  - {dataset: vaswani, system: splade-tiny, measure: AP, value: 0.3}\n")
    assert main(["check", str(out), "--expected", str(missing)]) == 1
    assert "splade-tiny  AP: missing" in capsys.readouterr().out


def test_check_reports_a_missing_or_bad_expected_file(tmp_path, stored, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "results.csv").write_text((stored[1] / "results.csv").read_text())
    (out / "manifest.json").write_text(json.dumps({"source": str(tmp_path / "nowhere.yaml")}))
    assert main(["check", str(out)]) == 2
    assert "no expected-scores file" in capsys.readouterr().err
    bad = tmp_path / "bad.expected.yaml"
    bad.write_text("expected:\n  - {dataset: vaswani, system: bm25, value: 0.3}\n")
    assert main(["check", str(out), "--expected", str(bad)]) == 2
    assert "missing ['measure']" in capsys.readouterr().err


def test_shipped_expected_files_name_their_experiment_cells():
    from irgrid.report.check import load_expected

    for exp in ("quickstart", "vaswani"):
        spec = load(ROOT / "experiments" / f"{exp}.yaml")
        for e in load_expected(ROOT / "experiments" / f"{exp}.expected.yaml"):
            assert e.dataset in [d.name for d in spec.datasets] and e.system in [r.name for r in spec.retrievers]
            assert e.measure in [str(m) for m in spec.measures] and e.source


@pytest.mark.slow
def test_check_passes_the_published_bm25_and_minilm_scores(shared_store, tmp_path):
    """The quickstart's expected file (Pyserini 2CR BM25, MTEB MiniLM) against a real SciFact grid."""
    quick = ROOT / "experiments" / "quickstart.yaml"
    spec = from_dict({"name": "quickstart-check", "datasets": ["beir/scifact/test"],
                      "retrievers": ["bm25", "all-minilm-l6-v2"], "measures": ["nDCG@10"], "baseline": "bm25"},
                     source=str(quick))
    grid.run(spec, out=tmp_path / "out", store=shared_store)
    assert main(["check", str(tmp_path / "out")]) == 0
