"""The reproduction card's measures (irgrid.report.repro) equal the `repro-eval` package's (Breuer et al., SIGIR
2020) on fixtures, |Δ| <= 1e-9: ER, ΔRI, RMSE on per-topic scores; KTU and RBO on runs with score ties (trec_eval
order); and the cards on stored grids: against the published tables (ER/ΔRI vs BM25) and grid against grid."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from grid_fixtures import noisy, shifted, write_grid  # noqa: E402

from irgrid import cli  # noqa: E402
from irgrid.report import repro  # noqa: E402
from irgrid.report.stored import load  # noqa: E402

repro_eval = pytest.importorskip("repro_eval", reason="the `dev` extra installs repro-eval, the reference")
from repro_eval.measure import document_order, effectiveness, overall_effects  # noqa: E402
from repro_eval.util import load_run  # noqa: E402

TOL = 1e-9


def _scores(seed: int, n: int = 30) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    return {f"t{i}": float(v) for i, v in enumerate(rng.beta(2, 3, n))}


@pytest.mark.parametrize("seed", range(5))
def test_er_delta_ri_rmse_equal_repro_eval(seed):
    ob, oa, rb, ra = (_scores(seed * 10 + k) for k in range(4))
    nested = [{t: {"ndcg": v} for t, v in s.items()} for s in (oa, ob, ra, rb)]
    mean = [float(np.mean(list(s.values()))) for s in (oa, ob, ra, rb)]
    assert abs(repro.effect_ratio(*mean) - overall_effects.ER(*nested)["ndcg"]) <= TOL
    assert abs(repro.delta_ri(*mean) - overall_effects.DRI(*nested)["ndcg"]) <= TOL
    assert abs(repro.rmse(oa, ra) - effectiveness.RMSE(nested[0], nested[2])["ndcg"]) <= TOL


def _run(seed: int, topics: int = 6, length: int = 60, pool: int = 90) -> pd.DataFrame:
    """A run with score ties (scores rounded to 1 decimal), written in score order like a TREC run file."""
    rng = np.random.default_rng(seed)
    rows = []
    for t in range(topics):
        docs = rng.choice(pool, size=length, replace=False)
        scores = np.round(rng.uniform(0, 3, length), 1)
        rows += [{"qid": f"t{t}", "docno": f"d{d}", "score": float(s)} for d, s in zip(docs, scores)]
    frame = pd.DataFrame(rows)
    return frame.sort_values(["qid", "score"], ascending=[True, False], kind="mergesort").reset_index(drop=True)


def _write(run: pd.DataFrame, path: Path) -> Path:
    path.write_text("".join(f"{r.qid} Q0 {r.docno} {i} {r.score} x\n" for i, r in enumerate(run.itertuples())))
    return path


@pytest.mark.parametrize("seed,depth", [(0, 1000), (1, 1000), (2, 20), (3, 5)])
def test_ktu_and_rbo_equal_repro_eval(tmp_path, seed, depth):
    orig, rep = _run(seed), _run(seed + 100)
    ro, rr = load_run(str(_write(orig, tmp_path / "o.run"))), load_run(str(_write(rep, tmp_path / "r.run")))
    ktu_ref = document_order.KTU(ro, rr, trim_thresh=depth)
    ro, rr = load_run(str(tmp_path / "o.run")), load_run(str(tmp_path / "r.run"))
    rbo_ref = document_order.RBO(ro, rr, p=0.95, depth=depth, pbar=False, per_topic=False)
    assert abs(repro.ktu(orig, rep, depth) - ktu_ref) <= TOL
    assert abs(repro.rbo(orig, rep, 0.95, depth) - rbo_ref) <= TOL
    assert repro.ktu(orig, orig, depth) == pytest.approx(1.0) and repro.rbo(orig, orig, 0.95, depth) < 1.0 + TOL


def test_rmse_names_missing_topics():
    with pytest.raises(repro.ReproError, match="no score for 1 topic"):
        repro.rmse({"a": 1.0, "b": 0.5}, {"a": 1.0})


D = "beir/scifact/test"


def _grid(out: Path, shift: float) -> Path:
    base = noisy(0.4, 40, seed=0)
    pq = {(D, "bm25", "nDCG@10"): base, (D, "bm25-pisa", "nDCG@10"): shifted(base, shift, seed=1)}
    runs = {(D, s): {f"q{i}": [f"d{(i + j + k) % 50}" for j in range(10)] for i in range(40)}
            for k, s in enumerate(["bm25", "bm25-pisa"])}
    return write_grid(out, pq, "bm25", runs=runs)


def test_run_card_against_an_earlier_grid(tmp_path, capsys):
    a, b = _grid(tmp_path / "a", 0.1), _grid(tmp_path / "b", 0.05)
    card = repro.run_card(load(a), load(b)).set_index("system")
    assert card.at["bm25", "rmse"] == 0 and card.at["bm25", "ktu"] == 1 and np.isnan(card.at["bm25", "er"])
    er = card.at["bm25-pisa", "er"]
    assert 0.3 < er < 0.7 and card.at["bm25-pisa", "topics"] == 40 and card.at["bm25-pisa", "ktu"] == 1
    assert cli.main(["card", str(b), "--against", str(a), "--format", "csv"]) == 0
    printed = pd.read_csv(__import__("io").StringIO(capsys.readouterr().out))
    assert printed.set_index("system").at["bm25-pisa", "er"] == pytest.approx(er)


def test_published_card_and_cli_bad_inputs(tmp_path, capsys):
    sys.path.insert(0, str(Path(__file__).parent))
    from test_paper_claims import write_published_grid

    out = write_published_grid(tmp_path / "pub", per_query=False)
    card = repro.published_card(load(out))
    a5 = card[card["table"] == "A.5"].dropna(subset=["er"])  # single datasets: ours are the published means
    assert len(a5) > 400 and (a5["er"] - 1).abs().max() < 1e-9 and a5["delta_ri"].abs().max() < 1e-9
    assert cli.main(["card", str(out)]) == 0
    assert "ER and ΔRI against the paper" in capsys.readouterr().out
    assert cli.main(["card", str(tmp_path / "nope")]) == 2
    assert "not an irgrid output folder" in capsys.readouterr().err
    assert cli.main(["card", str(out), "--against", str(tmp_path / "nope")]) == 2
