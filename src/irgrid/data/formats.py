"""ir_datasets components for collections ir_datasets does not ship: InstructIR, FollowIR and local files.

Each function here returns an `ir_datasets.datasets.base.Dataset`, which `datasets.py` registers with ir_datasets so that
these collections are used through the same interface as every other (`ir_datasets.load(id)`,
`pt.get_dataset("irds:<id>")`). Only formats that ir_datasets lacks are written here: ir_datasets' own
`TsvQueries`, `TrecQueries` and `TrecQrels` are used where they fit.

Query id conventions (the measures in `irgrid.measures` rely on them):
* InstructIR: `<base>_<n>` is the n-th instruction variant of MS MARCO query `<base>`.
* FollowIR: `<base>-og` (original instruction) and `<base>-changed` (changed instruction) of TREC topic `<base>`.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

from ir_datasets.datasets.base import Dataset as IrdsDataset
from ir_datasets.formats import (
    BaseDocs,
    BaseQrels,
    BaseQueries,
    GenericDoc,
    TrecQrel,
    TrecQueries,
)
from ir_datasets.util import LocalDownload

from irgrid.data.errors import DatasetError, InputError
from irgrid.util.hashing import file_sha256

QREL_DEFS = {0: "not relevant", 1: "relevant", 2: "highly relevant"}


class MissingDataError(DatasetError):
    """A staged file a dataset needs is absent; the message says which file and how to provide it."""


class InstructionQuery(NamedTuple):
    query_id: str
    text: str  # the user query
    instruction: str  # FollowIR: appended to the query; InstructIR: '<instruction> [SEP] <query>' (irgrid.paper)


class TitleTextDoc(NamedTuple):
    doc_id: str
    title: str
    text: str


def _require(path: Path, what: str, how: str) -> Path:
    if not path.is_file():
        raise MissingDataError(f"{what}: {path} does not exist. {how}")
    return path


def _open_text(path: Path) -> io.TextIOBase:
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8-sig")
    return path.open(encoding="utf-8-sig")  # a byte-order mark is not part of the first id


def _jsonl(path: Path) -> Iterator[dict[str, Any]]:
    with _open_text(path) as f:
        for n, line in enumerate(f, start=1):
            if line.strip():
                try:
                    yield json.loads(line)
                except json.JSONDecodeError as e:
                    raise InputError(f"{path}, line {n}: not valid JSON ({e.msg})") from None


FIELD_LIMIT = 2**31 - 1  # csv's default is 131,072 characters: a 5 MB document read as JSONL was refused as TSV


def _allow_long_fields() -> None:
    """Lets csv read a TSV field as long as JSON lines would (csv's limit is process-wide; only ever raised)."""
    if csv.field_size_limit() < FIELD_LIMIT:
        csv.field_size_limit(FIELD_LIMIT)


class LocalDocs(BaseDocs):
    """Documents from a local JSONL or TSV file.

    ir_datasets' TsvDocs/JsonlDocs build their docstore next to the source file (which may be read-only) and
    JsonlDocs needs a fixed field mapping; this reads BEIR-style JSONL (`_id`/`doc_id`/`docno`, `title`, `text`)
    and TSV (`id<TAB>text` or `id<TAB>title<TAB>text`) directly and never writes.
    """

    def __init__(self, path: Path, fmt: str, missing_hint: str = ""):
        self._path, self._fmt, self._hint = Path(path), fmt, missing_hint
        self._count: int | None = None

    def _file(self) -> Path:
        return _require(self._path, "documents", self._hint or "Check the collection's docs path.")

    def docs_iter(self) -> Iterator[TitleTextDoc]:
        path = self._file()
        if self._fmt == "jsonl":
            for n, rec in enumerate(_jsonl(path), start=1):
                doc_id = rec.get("_id", rec.get("doc_id", rec.get("docno")))
                if doc_id is None or "text" not in rec:
                    raise InputError(f"{path}, record {n}: needs an id ('_id', 'doc_id' or 'docno') and 'text'")
                yield TitleTextDoc(str(doc_id), str(rec.get("title") or ""), str(rec["text"]))
        else:
            _allow_long_fields()
            with _open_text(path) as f:
                for n, row in enumerate(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE), start=1):
                    if not row:
                        continue
                    if len(row) == 2:
                        yield TitleTextDoc(row[0], "", row[1])
                    elif len(row) == 3:
                        yield TitleTextDoc(row[0], row[1], row[2])
                    else:
                        raise InputError(f"{path}, line {n}: expected 'id<TAB>text' or 'id<TAB>title<TAB>text', "
                                         f"got {len(row)} columns")

    def docs_count(self) -> int:
        if self._count is None:
            self._count = sum(1 for _ in self.docs_iter())
        return self._count

    def docs_cls(self) -> type:
        return TitleTextDoc


class MissingDocs(BaseDocs):
    """A corpus that is not staged: every access raises with the file to stage (no silent empty corpus)."""

    def __init__(self, message: str):
        self._message = message

    def docs_iter(self) -> Iterator[GenericDoc]:
        raise MissingDataError(self._message)

    def docs_count(self) -> int:
        raise MissingDataError(self._message)

    def docs_cls(self) -> type:
        return TitleTextDoc


class InstructIRQueries(BaseQueries):
    """InstructIR's `only_instruction_queries.jsonl`: `_id` `<base>_<n>`, `text` the instruction and
    `metadata.origin_query` the query (the format of kaistAI/InstructIR; no ir_datasets format reads it). Both are
    the two halves of the benchmark's `queries.jsonl` text '<instruction> [SEP] <query>' (kaistAI/InstructIR
    data_creation/format_data.after_filtering.py splits it on '[SEP]'), which the catalog rebuilds."""

    def __init__(self, path: Path, hint: str):
        self._path, self._hint = path, hint

    def queries_iter(self) -> Iterator[InstructionQuery]:
        for rec in _jsonl(_require(self._path, "InstructIR queries", self._hint)):
            yield InstructionQuery(str(rec["_id"]), rec["metadata"]["origin_query"], rec["text"])

    def queries_cls(self) -> type:
        return InstructionQuery


class _FileQrels(BaseQrels):
    """Binary TREC qrels read from one file (`self._path`): the ir_datasets interface both readers share."""

    _path: Path

    def qrels_cls(self) -> type:
        return TrecQrel

    def qrels_defs(self) -> dict[int, str]:
        return QREL_DEFS

    def qrels_path(self) -> Path:
        return self._path


class BeirTsvQrels(_FileQrels):
    """BEIR's qrels TSV (`query-id corpus-id score` with a header line); TrecQrels needs 4 (or 3) columns and
    no header."""

    def __init__(self, path: Path, hint: str):
        self._path, self._hint = path, hint

    def qrels_iter(self) -> Iterator[TrecQrel]:
        with _open_text(_require(self._path, "qrels", self._hint)) as f:
            rows = csv.reader(f, delimiter="\t")
            next(rows, None)  # header
            for row in rows:
                if row:
                    yield TrecQrel(row[0], row[1], int(row[2]), "0")



def instructir(root: Path) -> IrdsDataset:
    """InstructIR (Oh et al. 2024) from a copy of kaistAI/InstructIR's `INSTRUCTIR/` folder."""
    hint = (f"Stage kaistAI/InstructIR's INSTRUCTIR/ folder at {root} (IRGRID_SHARED/datasets/instructir/"
            f"INSTRUCTIR), or set IRGRID_SHARED to a folder that has it.")
    corpus = root / "corpus.jsonl"
    docs: BaseDocs = (LocalDocs(corpus, "jsonl") if corpus.exists() else MissingDocs(
        f"the InstructIR corpus is not staged: {corpus} does not exist (16,072 revised passages, >4 MiB, "
        f"not in the shared copy). Copy INSTRUCTIR/corpus.jsonl from kaistAI/InstructIR there to index it."))
    return IrdsDataset(docs, InstructIRQueries(root / "only_instruction_queries.jsonl", hint),
                       BeirTsvQrels(root / "qrels" / "test.tsv", hint))


class FollowIRQueries(BaseQueries):
    """FollowIR queries (`queries.jsonl`: `_id`, `text`, `instruction_og`, `instruction_changed`), expanded into
    the `<base>-og` / `<base>-changed` pairs its evaluation uses."""

    def __init__(self, path: Path, hint: str):
        self._path, self._hint = path, hint

    def queries_iter(self) -> Iterator[InstructionQuery]:
        for rec in _jsonl(_require(self._path, "FollowIR queries", self._hint)):
            base = str(rec["_id"])
            yield InstructionQuery(f"{base}-og", rec["text"], rec["instruction_og"])
            yield InstructionQuery(f"{base}-changed", rec["text"], rec["instruction_changed"])

    def queries_cls(self) -> type:
        return InstructionQuery


class FollowIRQrels(BaseQrels):
    """`qrels/og.tsv` and `qrels/changed.tsv` (BEIR TSV) under the `-og` / `-changed` query ids."""

    def __init__(self, root: Path, hint: str):
        self._root, self._hint = root, hint

    def qrels_iter(self) -> Iterator[TrecQrel]:
        for variant in ("og", "changed"):
            for q in BeirTsvQrels(self._root / "qrels" / f"{variant}.tsv", self._hint).qrels_iter():
                yield q._replace(query_id=f"{q.query_id}-{variant}")

    def qrels_cls(self) -> type:
        return TrecQrel

    def qrels_defs(self) -> dict[int, str]:
        return QREL_DEFS

    def qrels_path(self) -> Path:
        return self._root / "qrels"


FOLLOWIR_SOURCES = {"robust04": "jhu-clsp/robust04-instructions", "news21": "jhu-clsp/news21-instructions",
                    "core17": "jhu-clsp/core17-instructions"}


def followir(root: Path, name: str) -> IrdsDataset:
    """FollowIR (Weller et al. 2025) from `<root>`: corpus.jsonl, queries.jsonl, qrels/og.tsv, qrels/changed.tsv."""
    hint = (f"FollowIR's {name} split is not staged. Export {FOLLOWIR_SOURCES[name]} (Hugging Face) on a connected "
            f"machine into {root}/ as corpus.jsonl (_id, title, text), queries.jsonl (_id, text, instruction_og, "
            f"instruction_changed) and qrels/og.tsv, qrels/changed.tsv (BEIR TSV), or set IRGRID_SHARED to a "
            f"folder with datasets/followir/{name}/.")
    return IrdsDataset(LocalDocs(root / "corpus.jsonl", "jsonl", hint), FollowIRQueries(root / "queries.jsonl", hint),
                       FollowIRQrels(root, hint))


def _unchanged(path: Path, expected: str | None, role: str) -> None:
    """Refuse a file whose bytes differ from those hashed when the experiment was loaded: its cached index or
    run would otherwise be stored under the old content's key."""
    if expected is None:
        return
    actual = file_sha256(path, 16)
    if actual != expected:
        raise InputError(f"{role} file {path} changed since the experiment was loaded (content {expected} -> "
                         f"{actual}); nothing was cached from it. Run the experiment again to use the new file")


def _text_lines(path: Path, raw: bytes | None = None) -> Iterator[tuple[int, str]]:
    """(line number, line) of a UTF-8 text file (.gz ok), a byte-order mark stripped; bad bytes name the line."""
    data = raw if raw is not None else (gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes())
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    for n, line in enumerate(data.split(b"\n"), start=1):
        try:
            yield n, line.decode("utf-8").rstrip("\r")
        except UnicodeDecodeError as e:
            raise InputError(f"{path}, line {n}: not UTF-8 (byte {e.start} of the line); save the file as UTF-8") from None


def read_tsv_topics(path: Path) -> list[tuple[str, str]]:
    """`qid<TAB>text` lines: BOM stripped; empty files, wrong column counts, empty or duplicate qids refused."""
    out, seen = [], {}
    for n, line in _text_lines(path):
        if not line.strip():
            continue
        cols = line.split("\t")
        if len(cols) != 2:
            raise InputError(f"{path}, line {n}: expected 'qid<TAB>query text', got {len(cols)} column(s)")
        qid, text = cols[0].strip(), cols[1]
        if not qid:
            raise InputError(f"{path}, line {n}: empty query id")
        if qid in seen:
            raise InputError(f"{path}, line {n}: query id {qid!r} already on line {seen[qid]} (query ids must be "
                             f"unique; give the second one another id)")
        seen[qid] = n
        out.append((qid, text))
    if not out:
        raise InputError(f"{path}: the topics file is empty (expected 'qid<TAB>query text' lines)")
    return out


def read_trec_qrels(path: Path) -> list[tuple[str, str, int]]:
    """TREC qrels (`qid iteration docno label`): column count, integer labels, duplicate pairs checked."""
    out, seen = [], {}
    for n, line in _text_lines(path):
        if not line.strip():
            continue
        cols = line.split()
        if len(cols) != 4:
            hint = " (TREC qrels have 4: qid 0 docno label; a BEIR qrels TSV has 3 and a header)" if len(cols) == 3 else ""
            raise InputError(f"{path}, line {n}: expected 4 columns 'qid iteration docno label', got {len(cols)}{hint}")
        qid, _, docno, label = cols
        try:
            value = int(label)
        except ValueError:
            raise InputError(f"{path}, line {n}: relevance label {label!r} is not a whole number") from None
        if (qid, docno) in seen:
            raise InputError(f"{path}, line {n}: query {qid!r} and document {docno!r} already judged on line "
                             f"{seen[(qid, docno)]}")
        seen[(qid, docno)] = n
        out.append((qid, docno, value))
    if not out:
        raise InputError(f"{path}: the qrels file is empty (expected 'qid 0 docno label' lines)")
    return out


class VerifiedDocs(LocalDocs):
    """LocalDocs that refuse duplicate document ids and a file changed since it was hashed (checked before and
    after each full read, so an index is never stored under another content's key)."""

    def __init__(self, path: Path, fmt: str, expected: str | None):
        super().__init__(path, fmt)
        self._expected = expected

    def docs_iter(self) -> Iterator[TitleTextDoc]:
        path = self._file()
        _unchanged(path, self._expected, "docs")
        seen: set[str] = set()
        n, texts = 0, 0
        try:
            for n, doc in enumerate(super().docs_iter(), start=1):
                if doc.doc_id in seen:
                    raise InputError(f"{path}, record {n}: document id {doc.doc_id!r} appears twice (ids must be unique)")
                seen.add(doc.doc_id)
                texts += bool(doc.title.strip() or doc.text.strip())
                yield doc
        except UnicodeDecodeError as e:
            raise InputError(f"{path}, after record {n}: not UTF-8 ({e.reason}); save the file as UTF-8") from None
        except csv.Error as e:
            raise InputError(f"{path}, after record {n}: {e}") from None
        if not n:
            raise InputError(f"{path}: the docs file is empty (no documents)")
        if not texts:  # found when the corpus is counted, before any builder (PISA aborted on an all-empty corpus)
            raise InputError(f"{path}: all {n} documents are empty (no title or text in any of them), so there is "
                             f"nothing to index; give each document its text ('id<TAB>text' or "
                             f"'id<TAB>title<TAB>text' lines, or a 'text' field in JSON lines)")
        _unchanged(path, self._expected, "docs")


class VerifiedTsvQueries(BaseQueries):
    def __init__(self, path: Path, expected: str | None):
        self._path, self._expected = path, expected

    def queries_iter(self) -> Iterator[Any]:
        from ir_datasets.formats import GenericQuery

        _unchanged(self._path, self._expected, "topics")
        for qid, text in read_tsv_topics(self._path):
            yield GenericQuery(qid, text)

    def queries_cls(self) -> type:
        from ir_datasets.formats import GenericQuery

        return GenericQuery


class VerifiedTrecQueries(TrecQueries):
    def __init__(self, path: Path, expected: str | None):
        super().__init__(LocalDownload(path, mkdir=False), encoding="utf8")
        self._path, self._expected = path, expected

    def queries_iter(self) -> Iterator[Any]:
        """ir_datasets' TrecQueries field tags, parsed here with line numbers: its own loop asserts every field
        (a `<title>`-only topic ended in an AssertionError) and drops a topic with no `</top>` (a file cut
        mid-topic lost its last topics silently). Missing `<desc>`/`<narr>` are empty; a topic without
        `<num>`/`<title>`, or not closed, is refused with its line."""
        import re

        from ir_datasets.formats import TrecQuery

        _unchanged(self._path, self._expected, "topics")
        seen: dict[str, int] = {}
        fields: dict[str, str] | None = None
        start, reading = 0, None
        for n, line in _text_lines(self._path):
            if line.startswith("<top>"):
                if fields is not None:
                    raise InputError(f"{self._path}, line {n}: <top> before the topic of line {start} was closed "
                                     f"with </top>; close it")
                fields, start, reading = {}, n, None
                continue
            if line.startswith("</top>"):
                if fields is None:
                    raise InputError(f"{self._path}, line {n}: </top> without its <top>")
                for tag in ("query_id", "title"):
                    if not fields.get(tag, "").strip():
                        raise InputError(f"{self._path}, topic of line {start}: no "
                                         f"{'<num>' if tag == 'query_id' else '<title>'} (each topic needs one)")
                qid = fields["query_id"].strip()
                if qid in seen:
                    raise InputError(f"{self._path}, line {start}: query id {qid!r} already on line {seen[qid]} "
                                     f"(query ids must be unique)")
                seen[qid] = start
                cleaned = {k: v.replace("</title>", "").strip() for k, v in fields.items()}
                yield TrecQuery(qid, cleaned["title"], cleaned.get("description", ""), cleaned.get("narrative", ""))
                fields = None
                continue
            if fields is None:
                continue
            for tag, target in self._qtype_map.items():
                match = re.match(tag, line)
                if match:
                    fields[target], reading = line[match.end():], target
                    break
            else:
                if reading and not line.startswith("<"):
                    fields[reading] += "\n" + line
        if fields is not None:
            raise InputError(f"{self._path}: the topic opened on line {start} has no </top> (the file is cut "
                             f"mid-topic?); complete or remove it")


class VerifiedQrels(_FileQrels):
    def __init__(self, path: Path, expected: str | None):
        self._path, self._expected = path, expected

    def qrels_iter(self) -> Iterator[TrecQrel]:
        _unchanged(self._path, self._expected, "qrels")
        for qid, docno, label in read_trec_qrels(self._path):
            yield TrecQrel(qid, docno, label, "0")



def local_collection(docs: Path, docs_format: str, topics: Path, topics_format: str,
                     qrels: Path, hashes: dict[str, str] | None = None) -> IrdsDataset:
    """A bring-your-own collection from local files (formats: docs jsonl|tsv, topics tsv|trec, qrels trec).
    `hashes` (role -> content key) makes every read check that the file is still the one that was hashed."""
    hashes = hashes or {}
    docs_part = VerifiedDocs(docs, docs_format, hashes.get("docs"))
    if topics_format == "tsv":
        queries: BaseQueries = VerifiedTsvQueries(topics, hashes.get("topics"))
    else:
        queries = VerifiedTrecQueries(topics, hashes.get("topics"))
    return IrdsDataset(docs_part, queries, VerifiedQrels(qrels, hashes.get("qrels")))
