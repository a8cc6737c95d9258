"""`irgrid report` on a researcher's own grid (vaswani, not one of the paper's datasets; PISA BM25, two variants, an
RRF and a linear fusion): no paper tables, main tables with the experiment's test marks and caption facts, effect
sizes, all-pairs comparisons, the manifest's provenance, fusion suggestions, LaTeX that compiles, and the paired
tests against ranx on the same runs."""

from __future__ import annotations

import json
import math
import shutil
import subprocess

import numpy as np
import pandas as pd
import pytest

from irgrid import grid
from irgrid.cli import main
from irgrid.core.significance import PairedTest, correct
from irgrid.runner.experiment import load

PERMUTATIONS = 5000
EXPERIMENT = f"""name: own-grid
datasets: [vaswani]
retrievers:
  - {{as: pisa-top10, pipeline: "bm25-pisa % 10"}}
  - bm25-pisa
  - {{name: bm25-pisa, as: bm25-pisa-b0.1, options: {{b: 0.1}}}}
  - {{as: rrf-pisa, pipeline: "rrf(bm25-pisa, bm25-pisa-b0.1, k=60)"}}
measures: [AP, nDCG@10, R@1000]
baseline: pisa-top10
test: {{name: randomization, permutations: {PERMUTATIONS}, seed: 0}}
correction: holm
"""
SYSTEMS = ["pisa-top10", "bm25-pisa", "bm25-pisa-b0.1", "rrf-pisa"]
BASE = "pisa-top10"
MEASURES = ["AP", "nDCG@10", "R@1000"]


pytestmark = pytest.mark.slow  # two grids (one computes 2 cells) and two reports: ~40 s of CPU on 2 cores


@pytest.fixture(scope="module")
def own(shared_store, tmp_path_factory):
    """The grid with the randomization test against the baseline, and the same grid (its runs cached) with
    Student's t over all pairs, reported with the paper's tables forced."""
    root = tmp_path_factory.mktemp("own-grid")
    (root / "own.yaml").write_text(EXPERIMENT)
    (root / "pairs.yaml").write_text(EXPERIMENT.replace("name: own-grid", "name: own-grid-pairs").replace(
        f"test: {{name: randomization, permutations: {PERMUTATIONS}, seed: 0}}", "test: t\ncomparisons: all-pairs"))
    grid.run(load(root / "own.yaml"), out=root / "out", store=shared_store)
    grid.run(load(root / "pairs.yaml"), out=root / "pairs", store=shared_store)
    assert main(["report", str(root / "out"), "--vector-figures"]) == 0
    assert main(["report", str(root / "pairs"), "--paper"]) == 0
    return root


def test_manifest_and_results_record_how_the_numbers_were_made(own):
    manifest = json.loads((own / "out" / "manifest.json").read_text())
    assert manifest["experiment_text"] == EXPERIMENT
    st = manifest["statistics"]
    assert st["test"] == {"name": "randomization", "resamples": PERMUTATIONS, "seed": 0}
    assert (st["correction"], st["baseline"], st["alpha"], st["comparisons"]) == ("holm", BASE, 0.05, "baseline")
    assert manifest["datasets"]["vaswani"] == {"group": "other", "measures": MEASURES, "queries": 93}
    assert {"scipy", "statsmodels", "numpy", "ir_measures"} <= set(manifest["packages"])
    rrf = manifest["retrievers"]["rrf-pisa"]
    assert rrf["fuses"] == ["bm25-pisa", "bm25-pisa-b0.1"] and set(rrf["components"].values()) == {"sparse"}
    assert manifest["retrievers"]["pisa-top10"]["fuses"] is None
    results = pd.read_csv(own / "out" / "results.csv")
    scored = results[results.measure != "ms/query"]
    assert (scored["n"] == 93).all() and results[results.measure == "ms/query"]["n"].isna().all()


def test_results_p_values_are_the_randomization_test_on_the_stored_per_query_values(own):
    results = pd.read_csv(own / "out" / "results.csv").set_index(["system", "measure"])
    perq = pd.read_csv(own / "out" / "perquery.csv", dtype={"qid": str})
    test = PairedTest("randomization", PERMUTATIONS, 0)
    for system in SYSTEMS[1:]:
        for measure in MEASURES:
            wide = perq[perq.measure == measure].pivot_table(index="qid", columns="system", values="value")
            p = test(wide[system].to_numpy(), wide[BASE].to_numpy())[1]
            # pt.Experiment pairs the queries in its own order: the same seed flips other queries, so the two
            # agree within Monte-Carlo error
            se = math.sqrt(max(p * (1 - p), 1 / PERMUTATIONS) * 2 / PERMUTATIONS)
            assert abs(results.at[(system, measure), "p_value"] - p) <= 4 * se + 2 / PERMUTATIONS


def test_a_non_paper_grid_has_no_paper_table_and_no_legend(own):
    report = own / "out" / "report"
    assert not list(report.glob("table*")) and not (report / "zscores.csv").exists()
    md = (report / "report.md").read_text()
    assert "Legend" not in md and "No dataset of this grid maps" not in md and "paper:" not in md
    assert md.index("### other datasets:") < md.index("### Effect sizes")  # the main table comes first


def test_paper_tables_when_forced_carry_one_legend(own):
    report = own / "pairs" / "report"
    md = (report / "report.md").read_text()
    assert (report / "table2.md").exists() and (report / "tableA5.md").exists()
    assert md.count("Legend of the paper's tables") == 1 and md.count("blue = within 2 SE") == 1


def _row(md: str, system: str) -> list[str]:
    line = next(x for x in md.splitlines() if x.startswith((f"| {system} |", f"| {system} (baseline) |")))
    return [c.strip() for c in line.strip("|").split("|")][1:]


def test_main_table_marks_and_bold_follow_the_experiment_test_and_caption_names_it(own):
    report = own / "out" / "report"
    md = (report / "main-other.md").read_text()
    title = md.splitlines()[0]
    for fact in ("AP, nDCG@10, R@1000", "on vaswani", "n = 93 queries", f"baseline {BASE}",
                 f"paired randomization test ({PERMUTATIONS:,} sign-flip permutations, seed 0)",
                 "Holm correction over the 3 systems compared with it", "α = 0.05"):
        assert fact in title, fact
    results = pd.read_csv(own / "out" / "results.csv")
    value = results.set_index(["system", "measure"])["value"]
    boot = pd.read_csv(report / "bootstrap.csv").set_index(["system", "measure"])
    marks = bold = 0
    for system in SYSTEMS:
        for measure, cell in zip(MEASURES, _row(md, system)):
            r = results[(results.system == system) & (results.measure == measure)].iloc[0]
            sig = str(r["significant"]) == "True"
            better = value[(system, measure)] > value[(BASE, measure)]
            assert ("▲" in cell) == (sig and better) and ("▼" in cell) == (sig and not better), (system, measure)
            marks += sig
            lo, hi = boot.at[(system, measure), "ci_low"], boot.at[(system, measure), "ci_high"]
            assert f"[{lo:.3f}, {hi:.3f}]" in cell and lo <= value[(system, measure)] <= hi
            best = value[(system, measure)] == max(value[(s, measure)] for s in SYSTEMS)
            alone = _alone(results, system, measure)
            assert cell.startswith("**") == (best and sig and better and alone), (system, measure)
            bold += cell.startswith("**")
            lo, hi = int(r["rank_low"]), int(r["rank_high"])  # the rank interval and tie group (runner.limits)
            assert f"({lo}{'' if lo == hi else f'–{hi}'} {r['tie_group']})" in cell
    # the top-10 cut loses R@1000 and AP everywhere, and leaves nDCG@10 of bm25-pisa exactly as it was
    assert marks == 6 and "▲" not in _row(md, "bm25-pisa")[1]
    assert bold == sum(_alone(results, "bm25-pisa", m) for m in ("AP", "R@1000"))
    # † as results.md has it (issue 41): the 10-deep cut's AP and R@1000 look deeper than it returns
    deep = results.set_index(["system", "measure"])["beyond_depth"].astype(str) == "True"
    for system in SYSTEMS:
        for measure, cell in zip(MEASURES, _row(md, system)):
            assert ("†" in cell) == deep[(system, measure)], (system, measure)
    assert [m for m, c in zip(MEASURES, _row(md, BASE)) if "†" in c] == ["AP", "R@1000"]
    assert "†: the measure looks deeper than the system returns" in md
    tex = (report / "report.tex").read_text()
    assert r"\ensuremath{\dagger}: the measure looks deeper" in tex and "?:" not in tex


def _alone(results: pd.DataFrame, system: str, measure: str) -> bool:
    """No other system shares a tie group with `system` (results.csv's tie_group letters)."""
    groups = results[results.measure == measure].set_index("system")["tie_group"].astype(str)
    return not any(set(groups[system]) & set(g) for s, g in groups.items() if s != system)


def test_effect_sizes_are_computed_from_the_per_query_values(own):
    comp = pd.read_csv(own / "out" / "report" / "comparisons.csv")
    perq = pd.read_csv(own / "out" / "perquery.csv", dtype={"qid": str})
    results = pd.read_csv(own / "out" / "results.csv").set_index(["system", "measure"])
    assert len(comp) == 3 * 3 and set(comp.against) == {BASE} and (comp.p_from == "results.csv").all()
    for _, r in comp.iterrows():
        wide = perq[perq.measure == r.measure].pivot_table(index="qid", columns="system", values="value")
        d = (wide[r.system] - wide[r.against]).to_numpy()
        assert r.n == len(d) == 93 and r["diff"] == pytest.approx(d.mean())
        if d.std() > 0:
            assert r.effect_d == pytest.approx(d.mean() / d.std(ddof=1))
        assert r.ci_low <= r["diff"] <= r.ci_high
        assert r.p == results.at[(r.system, r.measure), "p_value"]
        assert r.p_corrected == results.at[(r.system, r.measure), "p_value_corrected"]


def test_all_pairs_are_tested_and_corrected_together_and_bold_needs_every_pair(own):
    from scipy.stats import ttest_rel

    comp = pd.read_csv(own / "pairs" / "report" / "comparisons.csv")
    results = pd.read_csv(own / "pairs" / "results.csv").set_index(["system", "measure"])
    perq = pd.read_csv(own / "pairs" / "perquery.csv", dtype={"qid": str})
    for measure, block in comp.groupby("measure"):
        assert len(block) == 6  # 4 systems: every pair once
        wide = perq[perq.measure == measure].pivot_table(index="qid", columns="system", values="value")
        for _, r in block.iterrows():
            if r.against == BASE:  # with the baseline: results.csv's (pt.Experiment's) p
                assert r.p == results.at[(r.system, measure), "p_value"] and r.p_from == "results.csv"
            else:
                same = (wide[r.system] == wide[r.against]).all()  # scipy: NaN; irgrid: p = 1 (issue 40)
                p = 1.0 if same else ttest_rel(wide[r.system], wide[r.against]).pvalue
                assert r.p == pytest.approx(p, rel=1e-9)
        assert np.allclose(block.p_corrected, correct(block.p.to_numpy(), "holm"), equal_nan=True)
    md = (own / "pairs" / "report" / "main-other.md").read_text()
    assert "paired t-test, Holm correction over all 6 pairs of the 4 systems" in md.splitlines()[0]
    value = results["value"]
    for system in SYSTEMS:
        for measure, cell in zip(MEASURES, _row(md, system)):
            mine = comp[(comp.measure == measure) & ((comp.system == system) | (comp.against == system))]
            better = all(r.significant and (r["diff"] > 0) == (r.system == system) for _, r in mine.iterrows())
            best = value[(system, measure)] == max(value[(s, measure)] for s in SYSTEMS)
            alone = _alone(results.reset_index(), system, measure)
            assert cell.startswith("**") == (best and better and alone), (system, measure)
    # bm25-pisa is bold against the baseline alone (where its tie group holds no other), not against every system
    assert not any(c.startswith("**") for c in _row(md, "bm25-pisa"))
    out_results = pd.read_csv(own / "out" / "results.csv")
    assert _row((own / "out" / "report" / "main-other.md").read_text(), "bm25-pisa")[0].startswith("**") == \
        _alone(out_results, "bm25-pisa", "AP")


def test_fusion_suggestions_skip_what_the_grid_fuses_and_say_where_they_were_chosen(own):
    from irgrid.report import failures
    from irgrid.report.analyses import first_measure_values
    from irgrid.report.stored import load as load_grid

    report = own / "out" / "report"
    sugg = pd.read_csv(report / "fusion_suggestions.csv")
    g = load_grid(own / "out")
    fused = g.fused_pairs()
    assert fused == {frozenset(p) for p in [("bm25-pisa", "bm25-pisa-b0.1"), ("rrf-pisa", "bm25-pisa"),
                                            ("rrf-pisa", "bm25-pisa-b0.1")]}
    jac = pd.read_csv(report / "jaccard.csv")
    # on vaswani the worst 10% are queries none of these finds anything for: the same hard queries everywhere
    # (Jaccard 1), so nothing to gain by fusing and nothing is suggested
    assert (jac.jaccard == 1).all() and sugg.empty
    # were the hard queries to differ, the suggestions would be every pair but the ones the grid fuses; without
    # the grid's fusions they would be exactly those (the top-10 cut is below 0.8 x the best AP)
    differing = jac.assign(jaccard=0.5)
    first = first_measure_values(g)
    kept = failures.fusion_suggestions(differing, g.families(), first, components=g.component_families(), fused=fused)
    assert kept.empty
    unfiltered = failures.fusion_suggestions(differing, g.families(), first, components=g.component_families())
    assert {frozenset((a, b)) for a, b in zip(unfiltered.a, unfiltered.b)} == fused
    assert not unfiltered.cross_family.any()  # every system is built from sparse entries
    assert "optimistic" in (report / "fusion.md").read_text()
    assert "confirm on held-out queries" in (report / "fusion_pipelines.yaml").read_text()


def test_fusion_families_come_from_the_entries_a_system_is_built_from():
    from irgrid.report import failures

    jac = pd.DataFrame([{"dataset": "d", "a": "cascade", "b": "minilm", "jaccard": 0.2},
                        {"dataset": "d", "a": "bm25", "b": "minilm", "jaccard": 0.5}])
    components = {"cascade": {"sparse", "dense"}, "minilm": {"dense"}, "bm25": {"sparse"}}
    families = {"cascade": "pipeline", "minilm": "dense", "bm25": "sparse"}
    out = failures.fusion_suggestions(jac, families, components=components).set_index(["a", "b"])
    assert not out.at[("cascade", "minilm"), "cross_family"]  # both contain MiniLM
    assert out.at[("bm25", "minilm"), "cross_family"]
    assert list(out.index)[0] == ("bm25", "minilm")  # cross-family first


def test_one_dataset_meta_analysis_prints_no_heterogeneity(own):
    meta = pd.read_csv(own / "out" / "report" / "meta_analysis.csv")
    assert (meta.k == 1).all() and meta.i2.isna().all() and meta.tau2.isna().all()
    md = (own / "out" / "report" / "meta-analysis.md").read_text()
    assert "| 1.00 |" not in md and "no heterogeneity" in md


def test_latex_report_is_ascii_and_compiles(own, tmp_path):
    """Both reports (the second with the paper's coloured tables and the legend's arrows) through pdflatex."""
    engine = shutil.which("pdflatex")
    for folder in ("out", "pairs"):
        report = own / folder / "report"
        tex = (report / "report.tex").read_text()
        assert tex.isascii() and r"\usepackage{booktabs}" in tex and r"\toprule" in tex
        assert rf"\caption{{other datasets: AP, nDCG@10, R@1000 on vaswani (n = 93 queries); baseline {BASE}" in tex
        if engine is None:
            pytest.skip("no TeX engine (pdflatex) installed: `apt-get install texlive-latex-base "
                        "texlive-latex-recommended` to compile the report here")
        work = tmp_path / folder
        shutil.copytree(report, work)
        done = subprocess.run([engine, "-interaction=nonstopmode", "-halt-on-error", "report.tex"], cwd=work,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout[-3000:]
        assert (work / "report.pdf").read_bytes()[:5] == b"%PDF-"


def test_paired_tests_agree_with_ranx_on_the_same_runs(own):
    """ranx (an independent IR evaluation library) on the same per-query values: its Student's t equals results.csv's
    (pt.Experiment's) t-test p; its Fisher randomization agrees with ours within the Monte-Carlo error of both."""
    ranx_tests = pytest.importorskip("ranx.statistical_tests", reason="ranx is in the dev extra: pip install ranx")
    perq = pd.read_csv(own / "out" / "perquery.csv", dtype={"qid": str})
    t_results = pd.read_csv(own / "pairs" / "results.csv").set_index(["system", "measure"])
    ours = pd.read_csv(own / "out" / "results.csv").set_index(["system", "measure"])
    n_perm = 10_000
    checked = 0
    for measure in MEASURES:
        wide = perq[perq.measure == measure].pivot_table(index="qid", columns="system", values="value")
        base = wide[BASE].to_numpy()
        for system in SYSTEMS[1:]:
            x = wide[system].to_numpy()
            if np.all(x == base):
                continue  # no difference at all: scipy's t is undefined (NaN), ours and ranx's p = 1
            p_t, _ = ranx_tests.paired_student_t_test(base, x)
            assert t_results.at[(system, measure), "p_value"] == pytest.approx(p_t, rel=1e-9, abs=1e-15)
            p_fisher, _ = ranx_tests.fisher_randomization_test(base, x, n_perm, 0.05, 42)
            p_ours = ours.at[(system, measure), "p_value"]
            se = math.sqrt(max(p_fisher * (1 - p_fisher), 1 / n_perm) * (1 / n_perm + 1 / PERMUTATIONS))
            assert abs(p_ours - p_fisher) <= 4 * se + 2 / PERMUTATIONS, (system, measure, p_ours, p_fisher)
            checked += 1
    assert checked == 8


def test_figures_come_as_png_svg_and_pdf_with_per_query_differences_to_the_baseline(own):
    """Issue 41 (9): PNG only before; papers take vector figures. And a per-query difference plot against the
    baseline (a mean change: a few large wins, or a broad shift?)."""
    report = own / "out" / "report"
    for stem in ("jaccard-vaswani", "delta-vaswani"):
        assert (report / f"{stem}.png").read_bytes()[:4] == b"\x89PNG"
        assert (report / f"{stem}.pdf").read_bytes()[:5] == b"%PDF-"
        assert "<svg" in (report / f"{stem}.svg").read_text()[:2000]
    assert "![delta-vaswani](delta-vaswani.png)" in (report / "report.md").read_text()
    assert not list((own / "pairs" / "report").glob("*.pdf"))  # PNG only without --vector-figures
