"""`irgrid diff A B` on fixture grids: one planted effect reversal and one planted rank swap are reported exactly
(precision = recall = 1), two identical grids give nothing; and the `irgrid claims` / `irgrid diff` command lines
with their bad inputs."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from grid_fixtures import noisy, shifted, write_grid  # noqa: E402

from irgrid import cli  # noqa: E402
from irgrid.report import diff as diff_mod  # noqa: E402

D1, D2 = "beir/scifact/test", "beir/nfcorpus/test"
M = "nDCG@10"
N = 100
EXPERIMENT = f"""
name: fixture
datasets: [{D1}, {D2}]
retrievers: [bm25, bm25-pisa, all-minilm-l6-v2, splade-tiny, contriever]
baseline: bm25
claims:
  - id: reversal
    text: all-minilm-l6-v2 beats BM25 on SciFact
    source: Section 4.1
    beats: {{a: all-minilm-l6-v2, b: bm25, dataset: {D1}}}
  - id: steady
    text: splade-tiny beats BM25 on NFCorpus
    source: Table 2
    beats: {{a: splade-tiny, b: bm25, dataset: {D2}}}
"""
# fixture systems (registry names, so that the experiment text parses): bm25 is the baseline
ALPHA, BETA, DELTA, GAMMA = "all-minilm-l6-v2", "splade-tiny", "bm25-pisa", "contriever"


def _perquery(reversed_effect: bool, swapped_ranks: bool) -> dict:
    pq = {}
    for k, d in enumerate((D1, D2)):
        base = noisy(0.4, N, seed=k)
        pq[(d, "bm25", M)] = base
        pq[(d, ALPHA, M)] = shifted(base, 0.15, seed=10 + k)
        pq[(d, BETA, M)] = shifted(base, 0.08, seed=20 + k)
        pq[(d, DELTA, M)] = shifted(base, 0.04, seed=30 + k)
        pq[(d, GAMMA, M)] = shifted(base, -0.1, seed=40 + k)
    if reversed_effect:  # on D1, ALPHA falls significantly below the baseline
        pq[(D1, ALPHA, M)] = shifted(pq[(D1, "bm25", M)], -0.15, seed=99)
    if swapped_ranks:  # on D2, BETA and DELTA exchange their per-query values (both stay significantly above)
        pq[(D2, BETA, M)], pq[(D2, DELTA, M)] = pq[(D2, DELTA, M)], pq[(D2, BETA, M)]
    return pq


@pytest.fixture(scope="module")
def grids(tmp_path_factory):
    root = tmp_path_factory.mktemp("diff")
    a = write_grid(root / "a", _perquery(False, False), "bm25", experiment_text=EXPERIMENT)
    b = write_grid(root / "b", _perquery(True, True), "bm25", experiment_text=EXPERIMENT)
    same = root / "same"
    shutil.copytree(a, same)
    return a, b, same


def test_planted_reversal_and_swap_are_reported_exactly(grids):
    a, b, _ = grids
    d = diff_mod.run(a, b)
    assert [(c["id"], c["a"], c["b"]) for c in d.claims] == [("reversal", "supported", "contradicted")]
    assert [(s["dataset"], s["system"], s["a"], s["b"]) for s in d.significance] == [(D1, ALPHA, "▲", "▼")]
    assert [(r["dataset"], r["measure"]) for r in d.ranks] == [(D2, M), (D1, M)]
    ranks = {r["dataset"]: r for r in d.ranks}
    assert ranks[D2]["swapped"] == [f"{BETA} > {DELTA} became {DELTA} > {BETA}"]
    assert ranks[D1]["b"] == [BETA, DELTA, "bm25", GAMMA, ALPHA] and ranks[D1]["a"][0] == ALPHA
    assert [(x["dataset"], x["a"], x["b"]) for x in d.best] == [(D1, ALPHA, BETA)]
    assert sorted((c["dataset"], c["system"]) for c in d.cells) == sorted([(D1, ALPHA), (D2, BETA), (D2, DELTA)])
    assert all(abs(c["difference"]) > c["se"] and c["se_kind"] == "paired" for c in d.cells)
    assert d.compared == {"cells": 10, "rankings": 2, "claims": 2} and not d.untested


def test_identical_grids_report_nothing(grids, capsys):
    a, _, same = grids
    d = diff_mod.run(a, same)
    assert d.empty() and not d.only_in["a"] and not d.only_in["b"]
    assert cli.main(["diff", str(a), str(same)]) == 0
    assert "Nothing changed" in capsys.readouterr().out


def test_diff_cli_exits_1_when_a_claim_flips_and_writes_both_formats(grids, tmp_path, capsys):
    a, b, _ = grids
    assert cli.main(["diff", str(a), str(b), "--format", "json", "--to", str(tmp_path / "d")]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["claims"][0]["id"] == "reversal" and len(out["cells"]) == 3
    md = (tmp_path / "d" / "diff.md").read_text()
    assert "## Claims whose verdict changed (1)" in md and "became" in md
    assert json.loads((tmp_path / "d" / "diff.json").read_text()) == out


def test_claims_cli_markdown_and_json(grids, capsys):
    a, b, _ = grids
    assert cli.main(["claims", str(a)]) == 0
    md = capsys.readouterr().out
    assert "2 supported, 0 contradicted, 0 inconclusive (of 2)" in md and "| reversal | supported |" in md
    assert cli.main(["claims", str(b), "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["id"]: r["verdict"] for r in rows} == {"reversal": "contradicted", "steady": "supported"}
    assert all(r["n"] == N and np.isfinite(r["p"]) for r in rows)


def test_claims_cli_bad_inputs(grids, tmp_path, capsys):
    a, _, _ = grids
    assert cli.main(["claims", str(tmp_path / "nope")]) == 2
    assert "not an irgrid output folder" in capsys.readouterr().err
    bare = tmp_path / "bare"
    shutil.copytree(a, bare)
    manifest = json.loads((bare / "manifest.json").read_text())
    manifest["experiment_text"] = None
    (bare / "manifest.json").write_text(json.dumps(manifest))
    assert cli.main(["claims", str(bare)]) == 2
    assert "pass --claims EXPERIMENT.yaml" in capsys.readouterr().err
    assert cli.main(["claims", str(a), "--claims", str(tmp_path / "missing.yaml")]) == 2
    assert "claims file" in capsys.readouterr().err
    no_claims = tmp_path / "none.yaml"
    no_claims.write_text(f"datasets: [{D1}]\nretrievers: [bm25]\n")
    assert cli.main(["claims", str(a), "--claims", str(no_claims)]) == 2
    assert "no `claims:` block" in capsys.readouterr().err
    typo = tmp_path / "typo.yaml"
    typo.write_text(EXPERIMENT.replace("a: splade-tiny", "a: splade-tiyn"))
    assert cli.main(["claims", str(a), "--claims", str(typo)]) == 2
    err = capsys.readouterr().err
    assert "claims[1]: beats: a" in err and "Did you mean 'splade-tiny'" in err
    only = tmp_path / "only.yaml"  # a claims-only file is checked against the grid's names
    only.write_text("claims:\n  - {text: t, source: s, beats: {a: bm25, b: contriver, dataset: " + D1 + "}}\n")
    assert cli.main(["claims", str(a), "--claims", str(only)]) == 2
    assert "Did you mean 'contriever'" in capsys.readouterr().err
    assert cli.main(["claims", str(a), "--bootstrap", "0"]) == 2
    assert "--bootstrap" in capsys.readouterr().err


def test_diff_cli_bad_inputs(grids, tmp_path, capsys):
    a, _, _ = grids
    assert cli.main(["diff", str(a), str(tmp_path / "nope")]) == 2
    assert "not an irgrid output folder" in capsys.readouterr().err
    assert cli.main(["diff", str(a), str(a), "--claims", str(tmp_path / "missing.yaml")]) == 2
    assert "claims file" in capsys.readouterr().err


def test_the_report_checks_the_recorded_claims(grids, tmp_path):
    """`irgrid report` writes claims.md when the grid's experiment has claims (the same table as `irgrid claims`)."""
    _, b, _ = grids
    assert cli.main(["report", str(b), "--to", str(tmp_path / "r"), "--bootstrap", "200"]) == 0
    md = (tmp_path / "r" / "claims.md").read_text()
    assert "1 supported, 1 contradicted, 0 inconclusive (of 2)" in md and "| reversal | contradicted |" in md
    card = pd.read_csv(tmp_path / "r" / "card.csv")  # SciFact and NFCorpus fill Table A.5's columns ...
    assert card.empty  # ... but none of these systems ran as the paper's configuration (no paper name recorded)
    report = (tmp_path / "r" / "report.md").read_text()  # the report itself shows both (issue 42 item 5)
    assert "## Claims" in report and "| reversal | contradicted |" in report
    assert "## Reproduction card" in report and "No cell of this grid ran as the paper's configuration" in report


def test_the_report_shows_a_filled_reproduction_card(tmp_path):
    from irgrid.report.write import _claims_and_card_md

    card = tmp_path / "card.csv"
    pd.DataFrame({"dataset": ["beir/scifact"], "system": ["splade-v3"], "ER": [0.987654], "dRI": [-0.0123]}).to_csv(
        card, index=False)
    lines = _claims_and_card_md([card])
    text = "\n".join(lines)
    assert lines[0] == "## Reproduction card" and "| beir/scifact | splade-v3 | 0.9877 | -0.0123 |" in text
