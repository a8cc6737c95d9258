"""irgrid's side of the oracle comparison: the `paper` profile of an entry on its tiny weights, encoding the same
inputs as the fixture, and the comparison that fills docs/fidelity.md (tests/integration/test_oracles.py and
`make_oracles.py table` share it)."""

from __future__ import annotations

import gc
import gzip
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

FIXTURES = Path(__file__).resolve().parent / "fixtures"
TOL = 1e-5
GROUPS = ("titled", "non-ascii", "long", "empty-title", "no-title")


def top10_of(q: np.ndarray, s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    from release import top10

    return top10(q, s)


def _engine(name: str, side: str) -> Any:
    from irgrid.core.retrievers import RETRIEVERS
    from irgrid.dense.engine import Engine
    from irgrid.dense.spec import spec_of
    from irgrid.models.resolver import resolve

    spec = spec_of(RETRIEVERS.get(name).with_profile("paper"), side)
    # batches of 8: the engine pads a batch to its longest text, and Jina's 8,192 tokens x 32 texts in eager
    # attention took 11 GB; right-padded vectors do not depend on the batch (to float rounding)
    return Engine(spec, side, resolve(spec.model(side).as_tiny()), "cpu", batch_size=8)


def encode_entry(name: str, data: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Query vectors, probe-document vectors and slice vectors from irgrid's paper profile (fp32, CPU)."""
    q = _engine(name, "q").encode(data["queries"])
    docs = _engine(name, "d")

    def stream(records: list[dict[str, Any]]) -> np.ndarray:
        recs = [{k: v for k, v in r.items() if k != "group"} for r in records]
        return np.concatenate([v for _, v in docs.stream(recs)])
    return q.astype(np.float32), stream(data["docs"]), stream(data["slice"])


@dataclass
class Row:
    entry: str
    oracle: str
    dq: float | None = float("nan")  # None: queries not compared
    dd: dict[str, float] = field(default_factory=dict)
    top10_same: int = 0
    top10_total: int = 0
    near_ties: int = 0  # queries whose top-10 differs only where the oracle's scores are within TOL
    note: str = ""  # why the comparison could not be made
    info: str = ""  # what else the table should say

    @property
    def within(self) -> bool:
        core = max(self.dd.get(g, 0.0) for g in ("titled", "non-ascii", "long"))
        return (self.dq is None or self.dq <= TOL) and core <= TOL and self.top10_same + self.near_ties == self.top10_total


def inputs() -> dict[str, Any]:
    with gzip.open(FIXTURES / "inputs.json.gz", "rt", encoding="utf-8") as f:
        return json.load(f)


def compare(name: str, data: dict[str, Any] | None = None) -> Row:
    """irgrid's paper profile against the stored fixture of `name`."""
    from make_oracles import GOLDEN, LIBRARY, ORACLE_INFO, ORACLES

    data = data or inputs()
    fx = np.load(FIXTURES / f"{name}.npz")
    env = ORACLES.get(name, {}).get("env", "")
    versions = json.loads((FIXTURES / f"versions{'-' + env if env else ''}.json").read_text())
    oracle = (f"golden: irgrid's own output ({GOLDEN[name]})" if name in GOLDEN
              else LIBRARY[ORACLES[name]["library"]].format(**versions))
    if name in ORACLES and ORACLES[name]["library"] == "splade":
        return compare_splade(name, data, fx, oracle)
    if name in ORACLES and ORACLES[name]["library"] == "colbert":
        return compare_colbert(name, data, fx, oracle)
    q, d, s = encode_entry(name, data)
    gc.collect()
    row = Row(name, oracle, info=ORACLE_INFO.get(name, ""))
    if q.shape != fx["q"].shape or d.shape != fx["d"].shape:
        row.note = f"shapes differ: irgrid q{q.shape} d{d.shape}, oracle q{fx['q'].shape} d{fx['d'].shape}"
        return row
    row.dq = float(np.abs(q - fx["q"]).max())
    groups = np.array([r["group"] for r in data["docs"]])
    for g in GROUPS:
        sel = groups == g
        if sel.any():
            row.dd[g] = float(np.abs(d[sel] - fx["d"][sel]).max())
    top, my_scores = top10_of(q, s)
    row.top10_total = len(top)
    for mine, mine_s, theirs, scores in zip(top[:, :10], my_scores, fx["top10"], fx["top10_scores"]):
        if list(mine) == list(theirs[:10]):
            row.top10_same += 1
        elif tie_equivalent(list(mine), mine_s, list(theirs), scores):
            row.near_ties += 1
    return row


def tie_equivalent(mine: list[int], mine_scores: np.ndarray, theirs: list[int], scores: np.ndarray) -> bool:
    """irgrid's top 10 differs from the oracle's only by documents whose scores are equal within 1e-5 (relative
    above 1): each of irgrid's documents at rank i is in the oracle's top 20 with an oracle score that close to
    the oracle's score at rank i, or, outside the oracle's top 20, the oracle's scores from rank i to 20 are all
    that close (a tie longer than the stored ranks) and irgrid's score for it is too. Random tiny weights give
    near-equal [CLS] vectors across documents, hence such ties."""
    for i, doc in enumerate(mine):
        tol = TOL * max(1.0, abs(float(scores[i])))
        if doc in theirs:
            if abs(float(scores[theirs.index(doc)]) - float(scores[i])) > tol:
                return False
        elif float(scores[i]) - float(scores[-1]) > tol or abs(float(mine_scores[i]) - float(scores[i])) > tol:
            return False
    return True


def _fmt(x: float | None) -> str:
    return "—" if x is None else f"{x:.1e}"


def render_table(rows: list[Row], notes: dict[str, str] | None = None,
                 uncovered: dict[str, str] | None = None) -> str:
    """The docs/fidelity.md table: one row per compared entry (`notes`: the cause of a known difference), then one
    per paper entry without an oracle (`uncovered`: why)."""
    notes = notes or {}
    out = ["| entry | oracle (library, version) | max abs diff, queries | max abs diff, documents "
           "(titled / non-ASCII / long) | empty title | no title | top-10 identical | status |",
           "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        core = max((r.dd.get(g, 0.0) for g in ("titled", "non-ascii", "long")), default=None)
        status = "within 1e-5" if r.within else "differs" + (f": {notes[r.entry]}" if r.entry in notes else "")
        status += "".join(f"; {x}" for x in (r.note, r.info) if x)
        top = f"{r.top10_same}/{r.top10_total}" + (f" (+{r.near_ties} within ties)" if r.near_ties else "")
        top = top if r.top10_total else "not checked"
        out.append(f"| `{r.entry}` | {r.oracle} | {_fmt(r.dq)} | {_fmt(core)} | {_fmt(r.dd.get('empty-title'))} | "
                   f"{_fmt(r.dd.get('no-title'))} | {top} | {status} |")
    for name, why in sorted((uncovered or {}).items()):
        out.append(f"| `{name}` | none | — | — | — | — | — | not covered: {why} |")
    return "\n".join(out)


def splade_weights(name: str, texts: list[str]) -> tuple[Any, Any, dict[str, Any]]:
    """irgrid's SPLADE document weights (unscaled floats, [n, vocab]) under the paper profile, its loaded model and
    the profile's parameters."""
    from irgrid.core.retrievers import get
    from irgrid.pipelines.learned_sparse import _splade
    from irgrid.runner.cell import resolve_models
    from irgrid.sparse.splade import doc_max_length, encode_max_first

    entry = get(name, tiny=True).with_profile("paper")
    params = dict(entry.index.stage.params)
    models = resolve_models(entry.index.stage.models)
    # the document stage's length (learned_sparse.splade_stage): the profile's doc_max_length rule over max_length
    params["max_length"] = doc_max_length(params.get("doc_max_length"), int(params["max_length"]),
                                          models["encoder"].location)
    splade = _splade(models, params, "cpu")
    return encode_max_first(splade, texts, int(params["batch_size"]), 1.0), splade, params


def compare_splade(name: str, data: dict[str, Any], fx: Any, oracle: str) -> Row:
    """Documents only (the release encodes queries with Pyserini's SpladeQueryEncoder, not in the reference
    environment): raw weights at the oracle's 256 largest terms, and the quantised impacts per document."""
    from irgrid.sparse.splade import to_toks

    texts = [" ".join(t for t in (d.get("title"), d["text"]) if t) for d in data["docs"]]
    reps, splade, params = splade_weights(name, texts)
    row = Row(name, oracle + "; queries: Pyserini SpladeQueryEncoder, not run")
    groups = np.array([r["group"] for r in data["docs"]])
    ids, raw = fx["d_ids"], fx["d_w"]
    diffs = np.array([np.abs(reps[i, ids[i][ids[i] >= 0]].numpy() - raw[i][ids[i] >= 0]).max()
                      for i in range(len(texts))])
    for g in GROUPS:
        if (groups == g).any():
            row.dd[g] = float(diffs[groups == g].max())
    reverse = {v: k for k, v in splade.tokenizer.get_vocab().items()}
    toks = to_toks(reps * float(params["scale"]), reverse, True, params["rounding"], params["top_k"])
    vocab = splade.tokenizer.get_vocab()
    same = 0
    for mine, q in zip(toks, fx["d_quant"]):
        pairs = q[q >= 0].reshape(-1, 2) if (q >= 0).any() else np.zeros((0, 2), dtype=int)
        same += {vocab[t]: w for t, w in mine.items()} == {int(a): int(b) for a, b in pairs}
    row.dq = None
    row.info = f"quantised impacts identical for {same}/{len(toks)} documents; release max_seq_length " \
               f"{int(fx['max_seq_length'])}, irgrid max_length {params['max_length']}"
    return row


def compare_colbert(name: str, data: dict[str, Any], fx: Any, oracle: str) -> Row:
    """Per-token vectors: the 20 queries ([MASK]-augmented to 32) and 14 probe documents (punctuation skipped)."""
    from release import colbert_docs

    row = Row(name, oracle)
    q = np.stack(_engine(name, "q").encode(data["queries"]))
    picked = colbert_docs(data["docs"])
    recs = [{k: v for k, v in data["docs"][i].items() if k != "group"} for i in picked]
    mine = [v for _, vecs in _engine(name, "d").stream(recs) for v in vecs]
    theirs = np.split(fx["d_flat"], np.cumsum(fx["d_lens"])[:-1])
    if q.shape != fx["q"].shape:
        row.note = f"query shapes differ: irgrid {q.shape}, oracle {fx['q'].shape}"
        return row
    row.dq = float(np.abs(q - fx["q"]).max())
    lens = [(len(a), len(b)) for a, b in zip(mine, theirs)]
    if any(a != b for a, b in lens):
        row.note = "document token counts differ (irgrid, oracle): " + \
            ", ".join(f"{data['docs'][i]['group']} {a}/{b}" for i, (a, b) in zip(picked, lens) if a != b)
        return row
    groups = [data["docs"][i]["group"] for i in picked]
    for g in GROUPS:
        vals = [float(np.abs(a - b).max()) for a, b, gg in zip(mine, theirs, groups) if gg == g]
        if vals:
            row.dd[g] = max(vals)
    row.info = "per-token vectors of 14 probe documents; top-10 not checked (PLAID search not run)"
    return row
