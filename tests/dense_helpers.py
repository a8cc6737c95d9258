"""A small real collection for end-to-end checks of dense entries: a slice of BEIR SciFact (test) with the
relevant documents of its first queries plus the first corpus documents, indexed and searched through an entry's
own recipe and query builder, then evaluated with ir_measures."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pandas as pd


def scifact_slice(n_queries: int = 20, n_docs: int = 200) -> tuple[list[dict[str, str]], pd.DataFrame, pd.DataFrame]:
    from irgrid.data.datasets import get

    ds = get("beir/scifact/test")
    topics = ds.topics().head(n_queries)
    qrels = ds.qrels()
    qrels = qrels[qrels["qid"].isin(topics["qid"])]
    wanted = set(qrels["docno"])
    docs, seen = [], set()
    for d in ds.docs():
        if d["docno"] in wanted or len(docs) < n_docs:
            if d["docno"] not in seen:
                docs.append(d)
                seen.add(d["docno"])
        if len(docs) >= n_docs and wanted <= seen:
            break
    return docs, topics, qrels


def run_entry(name: str, docs: list[dict[str, str]], topics: pd.DataFrame, path: Path,
              device: str = "cpu") -> tuple[pd.DataFrame, Any]:
    """Index `docs` with the entry's recipe at `path`, then run its query pipeline on `topics`."""
    from irgrid.core.retrievers import BuildContext, QueryContext, get
    from irgrid.runner.cell import resolve_models

    entry = get(name)
    recipe = entry.index
    models = resolve_models(recipe.models)
    ctx = BuildContext(path=path, params=recipe.params, models=models, docs=lambda: iter(docs),
                       docs_count=len(docs), device=device)
    recipe.build(ctx)
    artifact = recipe.open(path, recipe.params, models)
    qctx = QueryContext(options=entry.options, models=resolve_models(entry.models), device=device,
                        encoder=entry.encoder)
    pipeline = qctx and entry.query(artifact, qctx)
    return pipeline.transform(topics), pipeline


def ndcg10(res: pd.DataFrame, qrels: pd.DataFrame) -> float:
    import ir_measures

    q = qrels.rename(columns={"qid": "query_id", "docno": "doc_id", "label": "relevance"})
    r = res.rename(columns={"qid": "query_id", "docno": "doc_id"})[["query_id", "doc_id", "score"]]
    return float(ir_measures.calc_aggregate([ir_measures.nDCG @ 10], q, r)[ir_measures.nDCG @ 10])


def take(it: Any, n: int) -> list[Any]:
    return list(itertools.islice(it, n))
