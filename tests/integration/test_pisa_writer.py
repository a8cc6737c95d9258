"""`PisaImpactWriter`: PISA's binary collection inverted with numpy must be pyterrier-pisa's `toks_indexer` output,
byte for byte, whatever the batching; bad input raises one clear error and leaves no index that looks complete.
The Lucene-BM25 build on top of it must not depend on its worker count or batching, and the joined analysis
must be Anserini's per-document analysis."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from irgrid.data.datasets import get as get_dataset
from irgrid.sparse import lucene_pisa
from irgrid.sparse.pisa_writer import PisaImpactWriter, write_impact_index

FILES = ["fwd.doclex", "fwd.documents", "fwd.termlex", "fwd.terms", "inv.docs", "inv.freqs", "inv.sizes",
         "pt_meta.json"]


@pytest.fixture(scope="module")
def vaswani_docs():
    return list(get_dataset("vaswani").docs())


def _toks(docs: list[dict]) -> list[dict]:
    """Term-frequency impacts of the real vaswani texts, plus the cases toks_indexer treats specially: values
    it truncates (floats, scaled), drops (zero, negative), a term seen only with dropped values, Unicode terms
    (sorted by code point), an empty document."""
    rng = np.random.default_rng(3)
    out = []
    for i, d in enumerate(docs):
        tf: dict = dict(Counter(re.findall(r"\w+", d["text"].lower())))
        if i % 7 == 0:
            tf = {t: c + float(rng.random()) for t, c in tf.items()}
        if i % 11 == 0:
            tf["zzdropped"] = 0
            tf["minus"] = -3
        if i % 13 == 0:
            tf["élan"], tf["Zeta"], tf["ßeta"] = 2, 3.9, 1
        out.append({"docno": d["docno"], "toks": tf})
    out.insert(5, {"docno": "empty-doc", "toks": {}})
    return out


def _pisa_files_equal(a: Path, b: Path) -> None:
    assert sorted(p.name for p in a.iterdir()) == sorted(p.name for p in b.iterdir()) == FILES
    for name in FILES:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


@pytest.mark.parametrize("scale", [1.0, 2.5])
def test_same_files_as_toks_indexer(tmp_path, vaswani_docs, scale):
    from pyterrier_pisa import PisaIndex

    docs = _toks(vaswani_docs)
    PisaIndex(str(tmp_path / "ref"), stemmer="none", stops="none").toks_indexer(scale=scale).index(iter(docs))
    write_impact_index(tmp_path / "ours", iter(docs), scale=scale, batch_size=1000, spill_docs=3000)
    _pisa_files_equal(tmp_path / "ref", tmp_path / "ours")
    assert not list((tmp_path / "ours").glob("inv-spill.*"))
    terms = (tmp_path / "ours" / "fwd.terms").read_text(encoding="utf-8").split("\n")[:-1]
    assert terms == sorted(terms) and "zzdropped" not in terms and "minus" not in terms and "élan" in terms
    # and PISA answers from it: the document that holds a rare term most strongly comes first
    index = PisaIndex(str(tmp_path / "ours"), stemmer="none", stops="none")
    import pandas as pd

    res = index.quantized(num_results=5).transform(pd.DataFrame({"qid": ["1"], "query_toks": [{"ßeta": 1.0}]}))
    assert len(res) == 5 and set(res["docno"]) <= {d["docno"] for d in docs if "ßeta" in d["toks"]}


def test_bad_input_is_named_and_leaves_no_index(tmp_path):
    cases = [
        ([{"docno": "a\nb", "toks": {"x": 1}}], r"document 0: docno 'a\\nb' must be a non-empty string"),
        ([{"docno": "a", "toks": {"x": 1}}, {"docno": "b", "toks": {"bad\nterm": 2}}],
         r"term 'bad\\nterm': terms must be non-empty strings"),
        ([{"docno": "a", "toks": {"x": 2.0**40}}], r"impact .* of term 'x' is over PISA's 32-bit range"),
        ([], r"no documents to index"),
    ]
    for i, (docs, message) in enumerate(cases):
        path = tmp_path / f"case{i}"
        with pytest.raises(ValueError, match=message):
            write_impact_index(path, iter(docs))
        assert not (path / "pt_meta.json").exists() and not list(path.glob("inv-spill.*"))
    write_impact_index(tmp_path / "done", iter([{"docno": "a", "toks": {"x": 1}}]))
    with pytest.raises(FileExistsError, match="a PISA index already exists"):
        PisaImpactWriter(tmp_path / "done")


def test_postings_per_term_are_document_frequencies(tmp_path, vaswani_docs):
    docs = _toks(vaswani_docs[:500])
    writer = PisaImpactWriter(tmp_path / "p", spill_docs=128)
    for i in range(0, len(docs), 100):
        writer.add([d["docno"] for d in docs[i:i + 100]], [d["toks"] for d in docs[i:i + 100]])
    df = Counter(t for d in docs for t, v in d["toks"].items() if int(v) > 0)
    got = writer.postings_per_term()
    assert {t: int(got[j]) for t, j in writer.lexicon.items()} == dict(df)
    writer.finish()


def test_joined_analysis_is_anserinis_per_document(vaswani_docs):
    texts = [d["text"] for d in vaswani_docs[:3000]] + [
        "", "the of and", f"contains {lucene_pisa._SEP} itself", f"{lucene_pisa._SEP}7 glued", "U.S.A.'s end\u200d",
        "\u0301combining start", "tab\tand\nnewline"]
    assert lucene_pisa.analyze_many(texts) == [lucene_pisa.analyze(t) for t in texts]
    assert lucene_pisa.analyze_many([]) == [] and lucene_pisa.analyze_many([""]) == [[]]


def test_lucene_bm25_index_does_not_depend_on_workers_or_batches(tmp_path, vaswani_docs):
    docs = vaswani_docs[:4000]
    one = lucene_pisa.build(tmp_path / "one", iter(docs), threads=1)
    two = lucene_pisa.build(tmp_path / "two", iter(docs), threads=2, batch_size=700)  # worker JVMs, 6 spills
    assert one == two and one["docs"] == 4000
    _pisa_files_equal(tmp_path / "one" / "pisa", tmp_path / "two" / "pisa")
