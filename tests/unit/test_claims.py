"""Every claim form (irgrid.core.claims, irgrid.report.claims) on fixture grids with a known verdict: supported,
contradicted, and inconclusive at small n (or without per-query values); and the `claims:` block's errors."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from grid_fixtures import noisy, shifted, write_grid  # noqa: E402

from irgrid.core.claims import ClaimError, parse  # noqa: E402
from irgrid.report import claims as claims_mod  # noqa: E402
from irgrid.report.stored import load  # noqa: E402

D1, D2, D3 = "beir/scifact/test", "beir/nfcorpus/test", "beir/fiqa/test"
M = "nDCG@10"
SYSTEMS = ["bm25", "strong", "close", "weak"]


def _grid(tmp_path: Path, n: int, name: str = "g", sd: float = 0.02) -> Path:
    """bm25 0.4; strong = bm25 + 0.2 query by query; close = bm25 + 0.002; weak = bm25 − 0.15; on 3 datasets;
    `sd`: the per-query noise of each system around its shift."""
    pq = {}
    for k, d in enumerate((D1, D2, D3)):
        base = noisy(0.4, n, seed=k)
        pq[(d, "bm25", M)] = base
        pq[(d, "strong", M)] = shifted(base, 0.2, seed=10 + k, sd=sd)
        pq[(d, "close", M)] = shifted(base, 0.002, seed=20 + k, sd=sd / 2)
        pq[(d, "weak", M)] = shifted(base, -0.15, seed=30 + k, sd=sd)
    return write_grid(tmp_path / name, pq, "bm25")


def _check(out: Path, *items: dict, systems=SYSTEMS, datasets=(D1, D2, D3)) -> list[claims_mod.Verdict]:
    claims = parse(list(items), systems, list(datasets), ["BEIR"], "test.yaml")
    return claims_mod.evaluate(load(out), claims, systems)


def _claim(form: str, **body) -> dict:
    return {"text": f"a {form} claim", "source": "Section 4.1", form: body}


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    return _grid(tmp_path_factory.mktemp("claims"), 200)


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    return _grid(tmp_path_factory.mktemp("claims-small"), 3, sd=0.2)


def test_beats(big, small):
    s, c = _check(big, _claim("beats", a="strong", b="bm25", dataset=D1), _claim("beats", a="weak", b="bm25", dataset=D1))
    assert (s.verdict, c.verdict) == ("supported", "contradicted")
    assert s.effect == pytest.approx(0.2, abs=0.02) and s.ci_low < s.effect < s.ci_high and s.p < 1e-10
    assert s.n == 200 and s.basis == "per-query" and not s.lacking
    (tiny,) = _check(small, _claim("beats", a="close", b="bm25", dataset=D1))
    assert tiny.verdict == "inconclusive" and tiny.n == 3 and tiny.p > 0.05


def test_beats_without_per_query_values_names_them(big, tmp_path):
    out = tmp_path / "means"
    out.mkdir()
    res = pd.read_csv(big / "results.csv")
    res.to_csv(out / "results.csv", index=False)
    pd.DataFrame(columns=["dataset", "system", "measure", "qid", "value"]).to_csv(out / "perquery.csv", index=False)
    (out / "manifest.json").write_text((big / "manifest.json").read_text())
    (v,) = _check(out, _claim("beats", a="strong", b="bm25", dataset=D1))
    assert v.verdict == "inconclusive" and v.basis == "means" and v.p is None
    assert v.effect == pytest.approx(0.2, abs=0.02)
    assert any("per-query" in x and "strong" in x for x in v.lacking)
    (gone,) = _check(out, _claim("beats", a="strong", b="bm25", dataset=D2), datasets=(D1, D2, D3))
    res[~((res.dataset == D2) & (res.system == "strong"))].to_csv(out / "results.csv", index=False)
    (gone,) = _check(out, _claim("beats", a="strong", b="bm25", dataset=D2))
    assert gone.verdict == "inconclusive" and gone.lacking == [f"{D2} strong {M}"]


def test_best(big, small):
    sup, con = _check(big, _claim("best", system="strong", datasets=[D1, D2, D3], at_least=3),
                      _claim("best", system="close", datasets=[D1, D2, D3], at_least=1))
    assert sup.verdict == "supported" and sup.effect == 3
    assert con.verdict == "contradicted" and "beaten by strong" in con.detail
    (inc,) = _check(small, _claim("best", system="strong", datasets=[D1, D2], at_least=2))
    assert inc.verdict == "inconclusive"  # 3 queries: the corrected tests cannot separate it from 'close'


def test_best_with_a_system_the_grid_lacks_is_not_supported(big):
    (v,) = _check(big, _claim("best", system="strong", datasets=[D1], at_least=1), systems=[*SYSTEMS, "absent"])
    assert v.verdict == "inconclusive" and any("absent" in x for x in v.lacking)


def test_equivalent(big, small):
    sup, con = _check(big, _claim("equivalent", a="close", b="bm25", dataset=D1, delta=0.01),
                      _claim("equivalent", a="strong", b="bm25", dataset=D1, delta=0.01))
    assert sup.verdict == "supported" and sup.p < 0.05 and -0.01 < sup.ci_low < sup.ci_high < 0.01
    assert con.verdict == "contradicted" and con.ci_low > 0.01
    (inc,) = _check(small, _claim("equivalent", a="close", b="bm25", dataset=D1, delta=0.01))
    assert inc.verdict == "inconclusive" and inc.n == 3


def test_beats_on_average(big, small):
    sup, con = _check(big, _claim("beats_on_average", a="strong", b="bm25", over=[D1, D2, D3]),
                      _claim("beats_on_average", a="weak", b="close", over=[D1, D2]))
    assert sup.verdict == "supported" and sup.effect == pytest.approx(0.2, abs=0.02) and sup.n == 600
    assert con.verdict == "contradicted"
    (inc,) = _check(small, _claim("beats_on_average", a="close", b="bm25", over=[D1, D2, D3]))
    assert inc.verdict == "inconclusive"


def test_rank(big, small):
    first, last, wrong = _check(big, _claim("rank", system="strong", dataset=D1, rank=1),
                                _claim("rank", system="weak", dataset=D1, rank=4),
                                _claim("rank", system="weak", dataset=D1, top=2))
    assert first.verdict == "supported" and (first.ci_low, first.ci_high) == (1, 1)
    assert last.verdict == "supported" and wrong.verdict == "contradicted"
    (inc,) = _check(small, _claim("rank", system="close", dataset=D1, rank=2))
    assert inc.verdict == "inconclusive" and inc.ci_low <= 2 <= inc.ci_high and inc.ci_low < inc.ci_high


def _latency(lo_a: float, hi_a: float, lo_b: float, hi_b: float) -> pd.DataFrame:
    return pd.DataFrame([{"dataset": D1, "system": "strong", "median_ms": (lo_a + hi_a) / 2, "min_ms": lo_a,
                          "max_ms": hi_a},
                         {"dataset": D1, "system": "bm25", "median_ms": (lo_b + hi_b) / 2, "min_ms": lo_b,
                          "max_ms": hi_b}])


@pytest.mark.parametrize("spread,verdict", [((100, 120, 8, 10), "supported"), ((50, 60, 10, 12), "contradicted"),
                                            ((60, 140, 6, 12), "inconclusive")])
def test_latency_from_a_latency_pass(tmp_path, spread, verdict):
    pq = {(D1, s, M): noisy(0.5, 5, seed=i) for i, s in enumerate(["bm25", "strong"])}
    out = write_grid(tmp_path / "lat", pq, "bm25", latency=_latency(*spread))
    (v,) = _check(out, _claim("latency", a="strong", b="bm25", at_least=10, datasets=D1), systems=["bm25", "strong"])
    assert v.verdict == verdict and v.basis == "spread" and v.ci_low <= v.effect <= v.ci_high


def test_latency_from_stored_ms_per_query_is_a_point_estimate(tmp_path):
    pq = {(D1, s, M): noisy(0.5, 5, seed=i) for i, s in enumerate(["bm25", "strong"])}
    ms = pd.DataFrame([{"dataset": D1, "system": "strong", "measure": "ms/query", "value": 120.0},
                       {"dataset": D1, "system": "bm25", "measure": "ms/query", "value": 10.0}])
    out = write_grid(tmp_path / "lat", pq, "bm25", extra_results=ms)
    yes, no = _check(out, _claim("latency", a="strong", b="bm25", at_least=10),
                     _claim("latency", a="bm25", b="strong", at_least=1), systems=["bm25", "strong"])
    assert (yes.verdict, yes.basis, yes.effect) == ("supported", "point", 12.0) and no.verdict == "contradicted"
    out2 = write_grid(tmp_path / "lat2", pq, "bm25")
    (none,) = _check(out2, _claim("latency", a="strong", b="bm25", at_least=10), systems=["bm25", "strong"])
    assert none.verdict == "inconclusive" and none.lacking


def _jaccard_grid(tmp_path: Path, systems: dict[str, str], n_queries: int = 40) -> Path:
    """Each system fails (retrieves nothing relevant) on its family's queries plus a few of its own: families
    'x' fail on q0-q9, 'y' on q20-q29; the rest of the queries have the relevant document at rank 1."""
    rel = {f"q{i}": [f"d{i}"] for i in range(n_queries)}
    runs, pq = {}, {}
    for k, (s, fam) in enumerate(systems.items()):
        hard = set(range(0, 10) if fam == "x" else range(20, 30))
        hard ^= {30 + k % 8}  # one query of its own
        runs[(D1, s)] = {f"q{i}": ([f"z{i}"] if i in hard else [f"d{i}"]) for i in range(n_queries)}
        pq[(D1, s, M)] = [0.0 if i in hard else 1.0 for i in range(n_queries)]
    return write_grid(tmp_path, pq, next(iter(systems)), families=systems, runs=runs, qrels={D1: rel})


def test_jaccard(tmp_path):
    fams = {f"x{i}": "x" for i in range(4)} | {f"y{i}": "y" for i in range(4)}
    out = _jaccard_grid(tmp_path / "j", fams)
    (v,) = _check(out, _claim("jaccard", datasets=D1), systems=list(fams))
    assert v.verdict == "supported" and v.effect > 0.5 and v.p < 0.05 and v.n == 8
    swapped = {s: "x" if s in ("x0", "y0", "x1", "y1") else "y" for s in fams}  # groups that cut across
    (c,) = _check(out, _claim("jaccard", datasets=D1, groups={"g1": ["x0", "y0", "x1", "y1"],
                                                         "g2": ["x2", "y2", "x3", "y3"]}), systems=list(fams))
    assert c.verdict in ("contradicted", "inconclusive") and c.effect < 0 and swapped
    small = _jaccard_grid(tmp_path / "js", {"x0": "x", "x1": "x", "y0": "y"})
    (inc,) = _check(small, _claim("jaccard", datasets=D1), systems=["x0", "x1", "y0"])
    assert inc.verdict == "inconclusive" and inc.effect > 0 and inc.p > 0.05  # 3 systems: 3 labelings at most


def test_jaccard_without_runs_names_them(big):
    (v,) = _check(big, _claim("jaccard", datasets=D1))
    assert v.verdict == "inconclusive" and f"run {D1} strong" in v.lacking


@pytest.mark.parametrize("item,message", [
    (_claim("beats", a="stron", b="bm25", dataset=D1), "Did you mean 'strong'"),
    (_claim("beats", a="strong", b="bm25", dataset="beir/scifakt/test"), "Did you mean 'beir/scifact/test'"),
    (_claim("beats", a="strong", b="bm25", dataset="BEIR"), "beats_on_average"),
    (_claim("beats", a="strong", b="strong", dataset=D1), "two different retrievers"),
    ({"text": "t", "source": "s"}, "exactly one form"),
    ({"text": "t", "source": "s", "beats": {"a": "strong", "b": "bm25", True: D1}}, "YAML takes `on:`"),
    ({"text": "t", "source": "s", **_claim("rank", system="strong", dataset=D1, rank=1),
      **_claim("beats", a="strong", b="bm25", dataset=D1)}, "exactly one form"),
    ({"text": "t", "beats": {"a": "strong", "b": "bm25", "on": D1}}, "missing ['source']"),
    (_claim("beats", a="strong", b="bm25", dataset=D1, mesure="RR"), "Did you mean 'measure'"),
    (_claim("equivalent", a="strong", b="bm25", dataset=D1, delta=0), "delta must be a number > 0"),
    (_claim("best", system="strong", datasets=[D1], at_least=2), "exceeds the 1 targets"),
    (_claim("rank", system="strong", dataset=D1, rank=1, top=2), "exactly one of 'rank'"),
    (_claim("jaccard", datasets=D1, groups={"only": ["strong"]}), "at least two groups"),
    ({**_claim("beats", a="strong", b="bm25", dataset=D1), "alpha": 1.5}, "alpha must be in (0, 1)"),
])
def test_bad_claims_say_what_where_and_how(item, message):
    with pytest.raises(ClaimError) as e:
        parse([item], SYSTEMS, [D1, D2, D3], ["BEIR"], "exp.yaml")
    assert message in str(e.value) and "exp.yaml: claims[0]" in str(e.value)


def test_duplicate_ids_and_a_non_list():
    item = {**_claim("beats", a="strong", b="bm25", dataset=D1), "id": "x"}
    with pytest.raises(ClaimError, match=r"claims\[1\]: id 'x' is already claims\[0\]"):
        parse([item, item], SYSTEMS, [D1], [], "exp.yaml")
    with pytest.raises(ClaimError, match="expected a list of claims"):
        parse({"a": 1}, SYSTEMS, [D1], [], "exp.yaml")


def test_the_experiment_reader_checks_claims():
    from irgrid.runner.experiment import ExperimentError, from_dict

    base = {"datasets": [D1], "retrievers": ["bm25", "bm25-pisa"]}
    spec = from_dict({**base, "claims": [_claim("beats", a="bm25-pisa", b="bm25", dataset=D1, measure="nDCG@10")]})
    assert spec.claims[0].form == "beats" and spec.claims[0].id == "claim-1"
    with pytest.raises(ExperimentError, match="'nDCG@1O' is not a measure"):
        from_dict({**base, "claims": [_claim("beats", a="bm25-pisa", b="bm25", dataset=D1, measure="nDCG@1O")]})
    with pytest.raises(ExperimentError, match="Did you mean 'bm25-pisa'"):
        from_dict({**base, "claims": [_claim("beats", a="bm25-pis", b="bm25", dataset=D1)]})


def test_markdown_and_json_carry_every_verdict(big):
    vs = _check(big, _claim("beats", a="strong", b="bm25", dataset=D1), _claim("rank", system="weak", dataset=D1, rank=4))
    md = claims_mod.to_markdown(vs, "fixture")
    assert "2 supported, 0 contradicted, 0 inconclusive" in md and "| claim-1 | supported | beats |" in md
    import json

    rows = json.loads(claims_mod.to_json(vs))
    assert [r["verdict"] for r in rows] == ["supported", "supported"] and np.isfinite(rows[0]["p"])


def test_zero_shot_cli_on_a_fixture(big, capsys):
    """`irgrid claims --zero-shot` on a grid whose systems but BM25 are not registered entries: their training is
    unknown, so the zero-shot pass cannot decide a claim about them and says why."""
    (big / "exp.yaml").write_text("claims:\n  - {text: t, source: s, beats: {a: strong, b: bm25, dataset: "
                                  + D1 + "}}\n")
    from irgrid import cli

    assert cli.main(["claims", str(big), "--claims", str(big / "exp.yaml"), "--zero-shot"]) == 0
    md = capsys.readouterr().out
    assert "1 supported" in md.split("# Zero-shot cells only")[0]
    zero = md.split("# Zero-shot cells only")[1]
    assert "3 zero-shot, 0 in-domain, 9 unknown" in zero and "(training unknown)" in zero  # bm25 is registered
    assert "claim-1: supported -> inconclusive" in zero


def test_a_claims_only_file_names_an_aggregate_as_a_group(big, tmp_path):
    """A claims-only file is checked against the grid's names; results.csv's aggregate rows are not datasets."""
    extra = pd.DataFrame([{"dataset": "BEIR", "system": "strong", "measure": "nDCG@10", "value": 0.6}])
    out = write_grid(tmp_path / "agg", {(D1, s, M): noisy(0.5, 5, seed=i) for i, s in enumerate(SYSTEMS)}, "bm25",
                     extra_results=extra)
    (tmp_path / "c.yaml").write_text("claims:\n  - {text: t, source: s, beats: {a: strong, b: bm25, dataset: BEIR}}\n")
    with pytest.raises(claims_mod.ClaimsError, match="beats_on_average"):
        claims_mod.claims_of(load(out), tmp_path / "c.yaml")
