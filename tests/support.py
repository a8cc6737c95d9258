"""Helpers the test tiers share (a plain module: `conftest` is a different module in each tier folder)."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def session_irds_home() -> Path:
    """The session's writable ir_datasets home (tests/conftest.py points IR_DATASETS_HOME at a fresh folder)."""
    return Path(os.environ["IR_DATASETS_HOME"])


def unit_tier_leaks() -> list[str]:
    """What a unit test must not have done: start the JVM, or seed the ir_datasets home from staged data (seen by
    the manifest irgrid writes when it copies the staged home: the home itself appears whenever ir_datasets is
    imported, by pyterrier-dr for one, which reads no data)."""
    from irgrid.data.datasets import STAGED_MANIFEST

    leaks = []
    if "jnius" in sys.modules:
        leaks.append("started the JVM (jnius imported)")
    if (session_irds_home() / STAGED_MANIFEST).exists():
        leaks.append(f"read staged data (the ir_datasets home {session_irds_home()} was seeded)")
    return leaks


def write_scifact_slice(root: Path, n_queries: int, n_docs: int, all_formats: bool = False) -> dict[str, str]:
    """A small real collection in bring-your-own files: SciFact test queries, their relevant abstracts and
    other abstracts up to `n_docs`. Returns a `collections:` entry (paths relative to `root`). `all_formats`
    also writes docs.jsonl (BEIR layout, raw text) and topics.trec."""
    from irgrid.data import datasets

    scifact = datasets.get("beir/scifact/test")
    topics, qrels = scifact.topics().head(n_queries), scifact.qrels()
    qrels = qrels[qrels["qid"].isin(topics["qid"])]
    wanted = set(qrels["docno"])
    docs = []
    for doc in datasets.get("beir/scifact").irds().docs_iter():
        if doc.doc_id in wanted or len(docs) < n_docs - len(wanted):
            docs.append(doc)
        if len(docs) == n_docs:
            break
    clean = lambda t: " ".join(t.split())  # noqa: E731
    data = root / "data"
    data.mkdir(parents=True, exist_ok=True)
    (data / "docs.tsv").write_text("".join(f"{d.doc_id}\t{clean(d.title)}\t{clean(d.text)}\n" for d in docs))
    (data / "topics.tsv").write_text("".join(f"{q}\t{clean(t)}\n" for q, t in zip(topics["qid"], topics["query"])))
    (data / "qrels.txt").write_text("".join(f"{q} 0 {d} {lab}\n" for q, d, lab in
                                            zip(qrels["qid"], qrels["docno"], qrels["label"])))
    if all_formats:
        import json

        (data / "docs.jsonl").write_text("".join(
            json.dumps({"_id": d.doc_id, "title": d.title, "text": d.text}) + "\n" for d in docs))
        (data / "topics.trec").write_text("".join(
            f"<top>\n<num> Number: {q}\n<title> {clean(t)}\n<desc> Description:\n\n<narr> Narrative:\n\n</top>\n\n"
            for q, t in zip(topics["qid"], topics["query"])))
    return {"docs": "data/docs.tsv", "topics": "data/topics.tsv", "qrels": "data/qrels.txt"}


# a small real grid shared by the analysis and report tests (vaswani + SciFact, Lucene and PISA BM25)
SPARSE_GRID = {
    "datasets": ["vaswani", "beir/scifact/test"],
    "retrievers": ["bm25-pisa", "bm25"],
    "measures": ["nDCG@10", "AP", "R@1000"],
    "baseline": "bm25",
    "test": "t",
    "correction": "holm",
}


def irds_metadata() -> dict:
    """ir_datasets' own metadata.json (shipped with the package): its record counts per dataset id."""
    import json

    import ir_datasets

    return json.loads((Path(ir_datasets.__file__).parent / "etc" / "metadata.json").read_text())


def irds_count(meta: dict, irds_id: str, kind: str) -> int | None:
    """The count of `kind` (docs, queries, qrels) for `irds_id`, following the metadata's `_ref` links."""
    entry = meta.get(irds_id, {}).get(kind)
    while entry and "_ref" in entry:
        entry = meta.get(entry["_ref"], {}).get(kind)
    return entry.get("count") if entry else None


def experiment_yaml(root: Path, name: str | None = None, retrievers: str = "[bm25-pisa]", extra: str = "",
                    datasets: str | None = None) -> Path:
    """`root/exp.yaml` over a bring-your-own collection in `root/data` (docs.tsv, topics.tsv, qrels.txt)."""
    name = name or root.name.replace("_", "-")[-40:].strip("-")  # one name per test: one registry per process
    exp = root / "exp.yaml"
    exp.write_text(f"""\
name: rel
collections:
  - {{name: {name}, docs: data/docs.tsv, topics: data/topics.tsv, qrels: data/qrels.txt}}
datasets: {datasets or f'[{name}]'}
retrievers: {retrievers}
measures: [AP, nDCG@10]
{extra}""")
    return exp


def _paper_datasets() -> list[str]:
    from irgrid.data.datasets import BEIR_PAPER, FOLLOWIR_PAPER, LOTTE_PAPER

    return (["msmarco-passage/dev/small", "msmarco-passage/trec-dl-2019/judged", "msmarco-passage/trec-dl-2020/judged"]
            + [d for members in BEIR_PAPER.values() for d in members] + list(LOTTE_PAPER) + ["instructir"]
            + list(FOLLOWIR_PAPER))


PAPER_DATASETS = _paper_datasets()  # every dataset of the paper's grid (Table A.2), CQADupStack as its 12 forums


def docs_render():
    """docs/gen/render.py, the generator of the docs site's generated pages (not a package: loaded by path)."""
    import importlib.util
    import sys

    name = "irgrid_docs_render"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).resolve().parents[1] / "docs" / "gen"
                                                      / "render.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


# A third-party entry package as a user installs one: a module that registers entries when imported, declared by its
# distribution in the `irgrid.entries` entry-point group (irgrid.core.entries).
BM25_PISA_K12 = '''"""A third-party entry package: BM25 over PISA with k1=1.2 (irgrid's bm25-pisa: 0.9)."""
from irgrid.core.retrievers import Retriever, register
from irgrid.pipelines.sparse import PISA_PORTER2, bm25_query

register(Retriever(name="bm25-pisa-k1.2", family="sparse", architecture="lexical", index=PISA_PORTER2,
                   query=bm25_query, options={"k1": 1.2, "b": 0.4, "num_results": 1000},
                   reference="a third-party entry (irgrid's tests)"))
'''


def install_entry_package(site: Path, distribution: str, module: str, source: str) -> dict[str, str]:
    """Write `module` and the dist-info of `distribution` declaring it in the `irgrid.entries` group under `site`
    (what `pip install` leaves in site-packages); returns an environment whose PYTHONPATH holds `site`."""
    site.mkdir(parents=True, exist_ok=True)
    (site / f"{module}.py").write_text(source)
    info = site / f"{distribution.replace('-', '_')}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {distribution}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[irgrid.entries]\n{distribution} = {module}\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(site), *filter(None, [env.get("PYTHONPATH")])])
    return env
