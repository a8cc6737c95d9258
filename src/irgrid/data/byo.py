"""Bring-your-own collections: datasets declared in an experiment file from local files.

```yaml
collections:
  - name: my-collection              # then usable in `datasets:` like any catalog entry
    docs: data/docs.jsonl            # JSONL (_id/doc_id/docno, title, text) or TSV (id, [title,] text); .gz ok
    topics: data/topics.tsv          # TSV (qid<TAB>text) or TREC (<top><num><title>...)
    qrels: data/qrels.txt            # TREC format: qid 0 docid label
    fields: [title, text]            # optional: document fields joined (default title + text)
    drop_self_matches: false         # optional: the same policies as the catalog
    measures: [nDCG@10]              # optional: listed by `irgrid datasets`
    allow_unjudged_qrels: false      # optional: true accepts qrels whose query ids no topic has (named anyway)
```

Paths are relative to the experiment file. Reading an entry changes no global state: the experiment's spec
carries the collection (and its corpus entry); irgrid's catalog never holds it. It is registered with ir_datasets
under its name on first use of its data (so `pt.get_dataset("irds:<name>")` works then). Its corpus id carries a
hash of the documents file, and the run cache key hashes of all three files, so editing a file can never reuse a
stale index or run.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from irgrid.core.schema import Key, Schema
from irgrid.data import datasets as ds_mod
from irgrid.util.errors import Error
from irgrid.util.hashing import file_sha256

SCHEMA = Schema({
    "name": Key(required=True), "docs": Key(required=True), "topics": Key(required=True),
    "qrels": Key(required=True), "docs_format": Key(), "topics_format": Key(),
    "fields": Key(list, hint="a list of document fields (title, text)"), "query_field": Key(str),
    "drop_self_matches": Key(bool), "measures": Key(list, hint="a list of measures"), "notes": Key(),
    "allow_unjudged_qrels": Key(bool),
}, missing_hint="a collection needs name, docs, topics and qrels")
DOCS_FORMATS = {".jsonl": "jsonl", ".json": "jsonl", ".tsv": "tsv", ".txt": "tsv"}
TOPICS_FORMATS = {".tsv": "tsv", ".txt": "trec", ".trec": "trec", ".topics": "trec"}


class CollectionError(Error, ValueError):
    pass


def _format(path: Path, given: Any, table: dict[str, str], role: str, where: str) -> str:
    allowed = sorted(set(table.values()))
    if given is not None:
        if given not in allowed:
            raise CollectionError(f"{where}: {role}_format {given!r} is not one of {allowed}")
        return str(given)
    suffixes = [s for s in path.suffixes if s != ".gz"]
    fmt = table.get(suffixes[-1].lower()) if suffixes else None
    if fmt is None:
        raise CollectionError(f"{where}: cannot tell the format of {role} file {path.name!r} from its extension; "
                              f"set {role}_format to one of {allowed}")
    return fmt


SCAN_DOCS_BYTES = 512 << 20  # docs files up to this size are read through at load (ids, format, encoding)


def _examples(ids: set[str], n: int = 5) -> str:
    """A few ids in natural order (numeric ids as numbers: 2 before 10), for a message."""
    ordered = sorted(ids, key=lambda i: (0, int(i), "") if i.isdigit() else (1, 0, i))
    return ", ".join(ordered[:n]) + (", ..." if len(ordered) > n else "")


def _validate(paths: dict[str, Path], docs_format: str, topics_format: str, hashes: dict[str, str],
              where: str, allow_unjudged_qrels: bool = False) -> None:
    """Check the files at the edge, before any cell runs: each error names the file and line. Qrels whose query
    ids no topic has are an error (unless allowed): they are the sign of topics and qrels numbered differently
    (Cranfield's original query numbers against its sequential qrels), where the matching ids score queries
    against other queries' judgements. Qrels that match no document are warned about."""
    import logging

    from irgrid.data import formats
    from irgrid.data.errors import InputError

    log = logging.getLogger("irgrid")
    try:
        if paths["docs"].stat().st_size == 0:
            raise InputError(f"{paths['docs']}: the docs file is empty (0 bytes)")
        if topics_format == "tsv":
            qids = {q for q, _ in formats.read_tsv_topics(paths["topics"])}
        else:
            qids = {q.query_id for q in formats.VerifiedTrecQueries(paths["topics"], hashes["topics"]).queries_iter()}
            if not qids:
                raise InputError(f"{paths['topics']}: no topics found (expected <top><num>...<title>...)")
        qrels = formats.read_trec_qrels(paths["qrels"])
        docnos = None
        empty: list[str] = []
        if paths["docs"].stat().st_size <= SCAN_DOCS_BYTES:
            docnos = set()
            for d in formats.VerifiedDocs(paths["docs"], docs_format, hashes["docs"]).docs_iter():
                docnos.add(d.doc_id)
                if not any(str(v).strip() for k, v in d._asdict().items() if k != "doc_id" and isinstance(v, str)):
                    empty.append(d.doc_id)
    except (InputError, ValueError) as e:
        raise CollectionError(f"{where}: {e}") from None
    judged = {q for q, _, _ in qrels}
    if not judged & qids:
        raise CollectionError(f"{where}: no query id of {paths['qrels']} occurs in {paths['topics']} (e.g. "
                              f"{sorted(judged)[:3]} vs {sorted(qids)[:3]}); every score would be 0")
    orphans = judged - qids
    if orphans:
        what = (f"{len(orphans)} of {len(judged)} query ids judged in {paths['qrels']} are not in {paths['topics']} "
                f"(qrels ids: {_examples(orphans)}; topic ids without judgements: {_examples(qids - judged) or 'none'})")
        if not allow_unjudged_qrels:
            raise CollectionError(
                f"{where}: {what}. Topics and qrels may be numbered differently (e.g. original query numbers vs "
                f"sequential ones): then the ids that do match score queries against other queries' judgements. "
                f"Renumber one file to match the other, or set `allow_unjudged_qrels: true` on the collection if "
                f"the extra judgements are intended (they are ignored)")
        log.warning("%s: %s; ignored (allow_unjudged_qrels: true)", where, what)
    if empty:
        log.warning("%s: %d of %d documents in %s have no text (e.g. %s): they are indexed empty, no query retrieves "
                    "them, and document expansion (doct5query) leaves them empty", where, len(empty), len(docnos or ()),
                    paths["docs"].name, _examples(set(empty)))
    if docnos is not None:
        relevant = {d for _, d, label in qrels if label > 0}
        if relevant and not relevant & docnos:
            log.warning("%s: no relevant document of %s is in %s (e.g. %s); every score will be 0", where,
                        paths["qrels"], paths["docs"], sorted(relevant)[:3])
        elif relevant - docnos:
            log.warning("%s: %d of %d relevant documents in %s are not in %s", where, len(relevant - docnos),
                        len(relevant), paths["qrels"].name, paths["docs"].name)
    unjudged = qids - judged
    if unjudged:
        log.warning("%s: %d of %d queries have no judgements in %s (they are not evaluated): %s", where,
                    len(unjudged), len(qids), paths["qrels"].name, _examples(unjudged))


def build(item: Any, base: Path, where: str) -> ds_mod.Dataset:
    """One validated `collections:` entry as a Dataset that carries its corpus entry. Nothing is registered:
    the name is only checked against irgrid's catalog and ir_datasets' ids, which it must not shadow."""
    SCHEMA.check(item, where, CollectionError)
    name = str(item["name"])
    if not name.replace("-", "").replace("_", "").replace("/", "").replace(".", "").isalnum():
        raise CollectionError(f"{where}: name {name!r} may only use letters, digits, '-', '_', '.', '/'")
    paths: dict[str, Path] = {}
    for role in ("docs", "topics", "qrels"):
        path = Path(str(item[role])).expanduser()
        path = path if path.is_absolute() else (base / path)
        if not path.is_file():
            raise CollectionError(f"{where}: {role} file {path} does not exist (paths are relative to {base})")
        paths[role] = path.resolve()
    docs_format = _format(paths["docs"], item.get("docs_format"), DOCS_FORMATS, "docs", where)
    topics_format = _format(paths["topics"], item.get("topics_format"), TOPICS_FORMATS, "topics", where)
    fields = tuple(item.get("fields") or ("title", "text"))
    bad = [f for f in fields if f not in ("title", "text")]
    if bad:
        raise CollectionError(f"{where}: fields {bad} are not document fields; use title and/or text")
    measures = tuple(str(m) for m in (item.get("measures") or ("nDCG@10",)))
    hashes = {role: file_sha256(path, 16) for role, path in paths.items()}
    _validate(paths, docs_format, topics_format, hashes, where, bool(item.get("allow_unjudged_qrels", False)))
    corpus = f"{name}@{hashes['docs'][:12]}"

    def irds_factory() -> Any:
        from irgrid.data import formats

        return formats.local_collection(paths["docs"], docs_format, paths["topics"], topics_format, paths["qrels"],
                                        hashes=hashes)

    irds_factory.__qualname__ = f"byo_loader_{name}"
    query_field = item.get("query_field") or ("text" if topics_format == "tsv" else "title")
    dataset = ds_mod.Dataset(
        name, corpus=corpus, fields=fields, query_field=str(query_field),
        drop_self_matches=bool(item.get("drop_self_matches", False)), measures=measures, group="byo",
        irds_factory=irds_factory, files=tuple(sorted(hashes.items())), notes=str(item.get("notes") or f"local files: {base}"),
    )
    corpus_entry = ds_mod.Dataset(corpus, corpus=corpus, fields=fields, group="byo", irds_factory=irds_factory,
                                  files=(("docs", hashes["docs"]),), notes=f"documents of {name}")
    for entry in (dataset, corpus_entry):
        if entry.name in ds_mod.DATASETS:
            existing = ds_mod.DATASETS.get(entry.name)
            if existing.config() != entry.config():
                raise CollectionError(
                    f"{where}: dataset name {entry.name!r} is already registered "
                    f"({'a catalog dataset' if existing.group != 'byo' else 'with other files or policies'}); "
                    f"give the collection another name"
                )
            continue
        ds_mod.ensure_irds_home()
        import ir_datasets

        if entry.name in ir_datasets.registry and not ds_mod.registered_by_irgrid(entry.name):
            raise CollectionError(f"{where}: {entry.name!r} is an ir_datasets id; give the collection another name")
    return dataclasses.replace(dataset, corpus_entry=corpus_entry)
