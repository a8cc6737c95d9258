"""Datasets: thin specs over ir_datasets ids, plus the policies the paper applies per dataset.

A dataset is evaluated on `irds_id` (queries + qrels); its documents come from `corpus` (an ir_datasets id
too), so every split of one collection shares one index.
"""

from __future__ import annotations

import itertools
import logging
import os
import re
import shutil
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from irgrid import paper
from irgrid.core.enums import NameEnum
from irgrid.core.schema import SchemaError
from irgrid.data import disastqa_ir
from irgrid.data.errors import DatasetError
from irgrid.util import settings
from irgrid.util.files import slug
from irgrid.util.hashing import file_sha256
from irgrid.util.registry import Registry, UnknownNameError, did_you_mean

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Counts:
    """Published sizes of a dataset (queries of the evaluated split, documents of its corpus, qrels lines)."""

    queries: int | None = None
    docs: int | None = None
    qrels: int | None = None
    source: str = ""  # where the numbers come from (e.g. "Table A.2", "ir_datasets metadata")

    def __str__(self) -> str:
        def fmt(n: int | None) -> str:
            return "-" if n is None else f"{n:,}"

        return f"{fmt(self.queries)} q / {fmt(self.docs)} d"


class Group(NameEnum):
    """Which part of the paper a dataset belongs to (and which aggregate column it enters)."""

    MSMARCO = "msmarco"
    BEIR = "beir"
    LOTTE = "lotte"
    INSTRUCTIR = "instructir"
    FOLLOWIR = "followir"
    BYO = "byo"  # an experiment's own collection (irgrid.data.byo)
    OTHER = "other"


GROUPS: tuple[Group, ...] = tuple(Group)


@dataclass(frozen=True)
class Dataset:
    name: str  # the catalog name (the ir_datasets id of the evaluated split unless `irds` says otherwise)
    corpus: str  # the catalog name / ir_datasets id whose documents are indexed
    fields: tuple[str, ...] = ("title", "text")  # joined with a space: the paper's "flat" documents
    query_field: str | None = None  # the queries' text field when there are several
    drop_self_matches: bool = False  # ArguAna, Quora: a query's own document is not a valid answer
    duplicate_qids: str = ""  # why the benchmark's topics repeat query ids (refused unless declared)
    measures: tuple[str, ...] = ("nDCG@10",)
    notes: str = ""
    group: str = Group.OTHER  # a Group: which part of the paper (and which aggregate) it belongs to
    irds_name: str | None = None  # the ir_datasets id when it differs from `name` (BEIR test sets without a split)
    query_fields: tuple[str, ...] = ()  # several query fields joined with a space (instruction after the query)
    # or formatted with this template over the query fields (InstructIR: '{instruction} [SEP] {text}')
    query_template: str | None = None
    counts: Counts = Counts()
    # builds the ir_datasets Dataset for ids ir_datasets does not ship (InstructIR, FollowIR, local files)
    irds_factory: Callable[[], Any] | None = field(default=None, compare=False, repr=False)
    files: tuple[tuple[str, str], ...] = ()  # (role, sha256) of local files: their content keys the caches
    sample: tuple[int, int] | None = None  # (n, seed): a fixed random subset of the queries (CI-sized checks)
    # the corpus's own entry when it is not in the catalog (a bring-your-own collection carries it: no registration)
    corpus_entry: Dataset | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.group not in GROUPS:
            raise SchemaError(f"dataset {self.name!r}: group {self.group!r} is not one of {', '.join(GROUPS)}")

    @property
    def irds_id(self) -> str:
        return self.irds_name or self.name

    @property
    def slug(self) -> str:
        return slug(self.name)

    def config(self) -> dict[str, Any]:
        """What changes a run on this dataset (queries, documents, policies)."""
        config: dict[str, Any] = {
            "name": self.name,
            "corpus": self.corpus,
            "fields": list(self.fields),
            "query_field": self.query_field,
            "drop_self_matches": self.drop_self_matches,
        }
        # added only when set, so the cache keys of datasets that do not use them stay as they were
        if self.irds_name:
            config["irds"] = self.irds_name
        if self.query_fields:
            config["query_fields"] = list(self.query_fields)
        if self.query_template:
            config["query_template"] = self.query_template
        if self.duplicate_qids:
            config["duplicate_qids"] = "first"
        if self.files:
            config["files"] = [list(f) for f in self.files]
        if self.sample:
            config["sample"] = list(self.sample)
        return config

    def with_sample(self, n: int, seed: int = 0) -> Dataset:
        """The same dataset on `n` queries drawn with `seed` (same corpus, so indexes are shared)."""
        import dataclasses

        if isinstance(n, bool) or not isinstance(n, int) or n < 1 or isinstance(seed, bool) or not isinstance(seed, int) \
                or seed < 0:
            from irgrid.data.errors import InputError

            raise InputError(f"{self.name}@q{n}s{seed}: a query sample needs a whole number of queries >= 1 and a "
                             f"seed >= 0 (e.g. {self.name}@q20s{seed if isinstance(seed, int) and seed >= 0 else 0}"
                             f"); give the name alone for all of its queries")

        return dataclasses.replace(self, name=f"{self.name}@q{n}s{seed}", irds_name=self.irds_id,
                                   sample=(n, seed), counts=Counts())

    def _sampled(self, topics: pd.DataFrame) -> pd.DataFrame:
        dupes = topics["qid"][topics["qid"].duplicated()]
        if len(dupes) and not self.duplicate_qids:
            # pt.Experiment would merge their rankings into one query: refuse instead of scoring the merge
            raise DatasetError(
                f"dataset {self.name!r}: {dupes.nunique()} query id(s) occur more than once in its topics "
                f"({', '.join(map(repr, dupes.unique()[:5]))}{' ...' if dupes.nunique() > 5 else ''}); their "
                f"rankings would be merged into one. Fix the topics, or declare duplicate_qids with the reason "
                f"in its catalog entry if the benchmark truly has them (the first text of each id is then used)"
            )
        if len(dupes):
            topics = topics.drop_duplicates("qid").reset_index(drop=True)
        if not self.sample:
            return topics
        n, seed = self.sample
        if n > len(topics):
            raise DatasetError(f"dataset {self.name}: asked for {n} queries, it has {len(topics)}")
        return topics.sample(n=n, random_state=seed).sort_index().reset_index(drop=True)

    def irds(self):
        """The ir_datasets Dataset (registered first when irgrid provides its `irds_factory`)."""
        return irds_load(self)

    def pt_dataset(self):
        irds_load(self)
        import pyterrier as pt

        return pt.get_dataset(f"irds:{self.irds_id}")

    def topics(self) -> pd.DataFrame:
        if self.query_fields:
            return self._sampled(self._joined_topics())
        topics = self.pt_dataset().get_topics(self.query_field)
        if "query" not in topics.columns:
            raise DatasetError(
                f"dataset {self.name!r} has several query fields ({', '.join(topics.columns[1:])}); "
                f"set query_field in its catalog entry"
            )
        return self._sampled(topics[["qid", "query"]].astype({"qid": str}))

    def _joined_topics(self) -> pd.DataFrame:
        """Queries whose text is several fields joined with a space (paper 3.2: instructions appended)."""
        import pandas as pd

        ds = irds_load(self)
        names = ds.queries_cls()._fields
        missing = [f for f in self.query_fields if f not in names]
        if missing:
            raise DatasetError(f"dataset {self.name!r}: query field(s) {missing} do not exist (has {names}); "
                               f"fix query_fields in its catalog entry")
        if self.query_template:
            rows = [(q.query_id, self.query_template.format(**{f: getattr(q, f) for f in self.query_fields}))
                    for q in ds.queries_iter()]
        else:
            rows = [(q.query_id, " ".join(t for t in (getattr(q, f) for f in self.query_fields) if t))
                    for q in ds.queries_iter()]
        return pd.DataFrame(rows, columns=["qid", "query"]).astype({"qid": str})

    def qrels(self) -> pd.DataFrame:
        qrels = self.pt_dataset().get_qrels().astype({"qid": str, "docno": str})
        return qrels[qrels["qid"].isin(set(self.topics()["qid"]))] if self.sample else qrels

    def corpus_dataset(self) -> Dataset:
        if self.corpus_entry is not None:
            return self.corpus_entry
        return self if self.corpus == self.name else get(self.corpus)

    def docs_count(self) -> int:
        return irds_load(self.corpus_dataset()).docs_count()

    def docs_available(self) -> tuple[bool, str]:
        """Whether the documents are on this machine, without downloading anything (for grid plans).

        ir_datasets has no uniform "is it downloaded?" query, so: a local dataset's files, a handler's
        `docs_path`, else any non-empty file under the corpus's folder of the ir_datasets home.
        """
        corpus = self.corpus_dataset()
        try:
            ds = irds_load(corpus)
        except Exception as e:  # a factory whose staged files are missing says so when built
            return False, str(e)
        if not ds.has_docs():
            return False, f"{corpus.irds_id} has no documents in ir_datasets"
        if corpus.files or corpus.irds_factory is not None:  # local files: reading one document is cheap and safe
            try:
                next(iter(ds.docs_iter()), None)
                return True, ""
            except Exception as e:
                return False, str(e)
        handler = ds.docs_handler()
        if hasattr(handler, "docs_path"):
            try:
                path = Path(handler.docs_path(force=False))
            except Exception:  # some handlers compute the path by downloading metadata first
                path = None
            if path is not None:
                return (True, "") if path.exists() else (False, f"documents not staged: {path} is missing")
        folder = settings.irds_home() / corpus.irds_id.split("/")[0]
        for part in corpus.irds_id.split("/")[1:]:
            if (folder / part).is_dir():
                folder = folder / part
        marker = "irds_version.txt"  # ir_datasets writes this into every folder it touches, downloaded or not
        if folder.is_dir() and any(p.is_file() and p.name != marker and p.stat().st_size > 0 for p in folder.rglob("*")):
            return True, ""
        return False, f"documents of {corpus.irds_id} are not staged under {settings.irds_home()}"

    def docs(self) -> Iterator[dict[str, str]]:
        """Documents as {'docno', 'text'} with the configured fields joined ("flat", as in the paper)."""
        ds = irds_load(self.corpus_dataset())
        if not ds.has_docs():
            raise DatasetError(f"dataset {self.corpus!r} has no documents (ir_datasets provides queries/qrels only)")
        names = ds.docs_cls()._fields
        fields = [f for f in self.fields if f in names]
        if not fields:
            raise DatasetError(f"dataset {self.corpus!r}: none of the fields {self.fields} exist (has {names})")
        try:
            it = iter(ds.docs_iter())
            first = next(it, None)
        except DatasetError:  # irgrid's own readers say exactly which file is missing
            raise
        except (OSError, RuntimeError) as e:  # a download attempt on a machine that cannot reach the source
            if not is_download_failure(e):
                raise
            raise DatasetError(
                f"the documents of {self.corpus!r} are not staged and could not be downloaded ({type(e).__name__}). "
                f"Stage the collection on a connected machine with ir_datasets and copy its folder under "
                f"IR_DATASETS_HOME ({settings.irds_home()}), or set IRGRID_IRDS_STAGED to a staged home"
            ) from None
        if first is None:
            return
        for doc in itertools.chain([first], it):
            text = " ".join(t for t in (getattr(doc, f) for f in fields) if t)
            yield {"docno": doc.doc_id, "text": text}


DATASETS: Registry[Dataset] = Registry("dataset")


def register(ds: Dataset) -> Dataset:
    return DATASETS.register(ds.name, ds)


def _beir(name: str, splits: tuple[str, ...] = ("test",), split_ids: dict[str, str] | None = None,
          counts: Counts = Counts(), **kw: Any) -> None:
    """A BEIR corpus entry plus its splits. `split_ids` maps a split to the ir_datasets id when ir_datasets names
    the test set without a split (e.g. beir/arguana); `counts` are those of the test split."""
    kw = {"query_field": "text", "group": "beir", **kw}
    register(Dataset(f"beir/{name}", corpus=f"beir/{name}", **kw))
    for split in splits:
        register(Dataset(f"beir/{name}/{split}", corpus=f"beir/{name}", irds_name=(split_ids or {}).get(split),
                         counts=counts if split == "test" else Counts(), **kw))


def _a2(queries: int, docs: int) -> Counts:
    return Counts(queries, docs, source="Table A.2")


# The catalog: policies are declared here once (the engine has no dataset-specific branches).
register(Dataset("vaswani", corpus="vaswani", fields=("text",), measures=("AP", "nDCG@10")))

# -- MS MARCO passage and TREC-DL (paper 3.2.1; passages have no titles) --------------------------------------
# measures from irgrid.paper: TREC-DL R@1000 at relevance >= 1 (the paper's) and R(rel=2)@1000 (TREC/Pyserini)
for _name, _q in ((paper.MSMARCO_DEV, 6980), (paper.DL19, 43), (paper.DL20, 54)):
    register(Dataset(_name, corpus="msmarco-passage", fields=("text",), measures=paper.dataset_measures()[_name],
                     group="msmarco", counts=_a2(_q, 8_841_823)))

# -- BEIR, the 14 public datasets (paper 3.2.2): title + text, nDCG@10 --------------------------------------------
_SELF = "queries are documents of the corpus; their own document is dropped (BEIR issue 14, Pyserini --remove-query)"
_beir("trec-covid", splits=("test",), split_ids={"test": "beir/trec-covid"}, counts=_a2(50, 171_332))
_beir("nfcorpus", splits=("test", "dev", "train"), counts=_a2(323, 3_633))
_beir("nq", splits=("test",), split_ids={"test": "beir/nq"}, counts=_a2(3_452, 2_681_468))
_beir("hotpotqa", splits=("test", "dev", "train"), counts=_a2(7_405, 5_233_329))
_beir("fiqa", splits=("test", "dev", "train"), counts=_a2(648, 57_638))
_beir("arguana", split_ids={"test": "beir/arguana"}, drop_self_matches=True, notes=_SELF,
      counts=_a2(1_406, 8_674))
register(Dataset("beir/webis-touche2020/v2", corpus="beir/webis-touche2020/v2", query_field="text", group="beir",
                 counts=_a2(49, 382_545), notes="Touché-2020 v2 (the paper's choice), not v1"))
CQADUPSTACK_FORUMS = paper.CQADUPSTACK_FORUMS
for _forum in CQADUPSTACK_FORUMS:  # Table A.2 gives only the totals (13,145 queries, 457,199 documents)
    register(Dataset(f"beir/cqadupstack/{_forum}", corpus=f"beir/cqadupstack/{_forum}", query_field="text",
                     group="beir", notes="one of 12 forums; CQADupStack is their macro mean"))
_beir("quora", splits=("test", "dev"), drop_self_matches=True, notes=_SELF, counts=_a2(10_000, 522_931))
_beir("dbpedia-entity", splits=("test", "dev"), counts=_a2(400, 4_635_922))
_beir("scidocs", split_ids={"test": "beir/scidocs"}, counts=_a2(1_000, 25_657))
_beir("fever", splits=("test", "dev", "train"), counts=_a2(6_666, 5_416_568))
# Table A.2 prints 5,416,535 documents (BEIR paper); the distributed corpus that ir_datasets serves has 5,416,593
_beir("climate-fever", split_ids={"test": "beir/climate-fever"}, counts=_a2(1_535, 5_416_593))
_beir("scifact", splits=("test", "train"), counts=_a2(300, 5_183))

# The paper's BEIR columns (Table A.5) -> the catalog datasets averaged into each: see irgrid.paper
BEIR_PAPER: dict[str, tuple[str, ...]] = paper.BEIR

# -- LoTTE pooled test (paper 3.2.3): Success@5; documents have no titles -----------------------------------------
LOTTE_PAPER = tuple(paper.LOTTE.values())
for _name, _q in zip(LOTTE_PAPER, (3_869, 10_025)):
    register(Dataset(_name, corpus="lotte/pooled/test", fields=("text",), measures=("Success@5",), group="lotte",
                     counts=_a2(_q, 2_819_103)))


# -- Instruction following (paper 3.2.4-5): not in ir_datasets; irgrid's readers of staged files -------------------------
def _staged(*parts: str) -> Path:
    root = settings.shared_root()
    if root is None:
        raise DatasetError(
            f"no shared data folder: set IRGRID_SHARED to the folder holding datasets/{'/'.join(parts)} "
            f"(a checkout next to ../shared finds it automatically)"
        )
    return root.joinpath("datasets", *parts)


def _instructir_irds() -> Any:
    from irgrid.data import formats

    return formats.instructir(_staged("instructir", "INSTRUCTIR"))


register(Dataset(
    paper.INSTRUCTIR, corpus="instructir", fields=("title", "text"), query_fields=("instruction", "text"),
    query_template=paper.INSTRUCTIR_QUERY_TEMPLATE, measures=paper.dataset_measures()[paper.INSTRUCTIR],
    group="instructir", irds_factory=_instructir_irds, counts=Counts(9_906, 16_072, 9_906, source="Table A.2"),
    notes="'<instruction> [SEP] <query>' as the benchmark's queries.jsonl (kaistAI/InstructIR); qid <base>_<n> "
          "(n-th instruction of MS MARCO query <base>); corpus not staged",
))

FOLLOWIR_PAPER: dict[str, str] = {  # dataset -> the measure the paper's Score takes from it (changed instructions)
    d: paper.dataset_measures()[d][0] for d in paper.FOLLOWIR.values()}


def _followir_irds(split: str) -> Callable[[], Any]:
    def load() -> Any:
        from irgrid.data import formats

        return formats.followir(_staged("followir", split), split)

    load.__qualname__ = f"followir_loader_{split}"
    return load


for (_name, _measure), (_q, _d) in zip(FOLLOWIR_PAPER.items(), ((52, 47_500), (32, 30_900), (20, 19_900))):
    register(Dataset(
        _name, corpus=_name, query_fields=paper.FOLLOWIR_QUERY_FIELDS, measures=paper.dataset_measures()[_name],
        group="followir",
        irds_factory=_followir_irds(_name.split("/")[1]), counts=Counts(_q, _d, source="Table A.2 (base queries)"),
        notes="query + instruction; qids <base>-og / <base>-changed (each base query twice); changed:/og: = the "
              "paper's / FollowIR's Score measures, p-MRR-paper / p-MRR = the paper's / MTEB's; not staged",
    ))


# -- DisastQA's derived retrieval collection and DisastIR (irgrid.data.disastqa_ir) -------------------------------
for _entry in disastqa_ir.entries():
    register(Dataset(**_entry))


def get(name: str) -> Dataset:
    """A catalog dataset, or any other ir_datasets id with default policies; `NAME@q40s3` is NAME's 40-query
    sample with seed 3 (the name `Dataset.with_sample` gives, as grids and stored runs show it)."""
    sampled = re.fullmatch(r"(.+)@q(\d+)s(\d+)", name)
    if sampled and name not in DATASETS:
        return get(sampled.group(1)).with_sample(int(sampled.group(2)), int(sampled.group(3)))
    if name in DATASETS:
        return DATASETS.get(name)
    ensure_irds_home()
    import ir_datasets

    if name in ir_datasets.registry:
        return Dataset(name, corpus=name)
    known = DATASETS.names()
    raise UnknownNameError(
        f"unknown dataset {name!r}: neither in irgrid's catalog nor an ir_datasets id.{did_you_mean(name, known)} "
        f"See `irgrid datasets` for the catalog."
    )


@cache
def ensure_irds_home() -> Path:
    """Point ir_datasets at a writable home, seeded from the staged copy when one is configured.

    ir_datasets writes into its home (and fixes paths at import), so a read-only staged folder is copied once,
    file by file, into the cache before ir_datasets is first imported.
    """
    home = settings.irds_home()
    staged = settings.staged_irds_home()
    if "ir_datasets" in sys.modules and settings.variable("IR_DATASETS_HOME") != str(home):
        current = settings.variable("IR_DATASETS_HOME") or "~/.ir_datasets"
        if staged is not None:
            raise DatasetError(
                f"ir_datasets was imported before irgrid configured its home ({current}): set "
                f"IR_DATASETS_HOME={home} before starting Python, or run or build with irgrid before anything "
                f"else imports ir_datasets (pt.get_dataset('irds:...'), for one)"
            )
        return Path(current).expanduser()
    if staged is not None:
        if not staged.is_dir():
            raise DatasetError(f"IRGRID_IRDS_STAGED={staged} is not a directory")
        if staged.resolve() == home.resolve():
            raise DatasetError(
                f"IR_DATASETS_HOME and IRGRID_IRDS_STAGED are both {home}: ir_datasets writes into its home, "
                f"so point IR_DATASETS_HOME (or IRGRID_CACHE) elsewhere"
            )
        _seed(staged, home)
    home.mkdir(parents=True, exist_ok=True)
    settings.export("IR_DATASETS_HOME", str(home))
    return home


STAGED_MANIFEST = ".irgrid-staged.json"


def _seed(src: Path, dst: Path) -> None:
    """Copy the staged home into the writable one, keyed by content: a staged file whose bytes changed since it
    was copied is copied again, and files ir_datasets derived beside the old copy (docstores) are removed.
    `staged_fingerprint` turns the recorded hashes into cache keys, so indexes and runs follow the data."""
    import json

    manifest_path = dst / STAGED_MANIFEST
    try:
        manifest = json.loads(manifest_path.read_text())
    except (OSError, ValueError):
        manifest = {}
    changed_dirs: set[Path] = set()
    staged: set[str] = set()
    for path in src.rglob("*"):
        if not path.is_file():
            continue
        rel = str(path.relative_to(src))
        staged.add(rel)
        st = path.stat()
        target = dst / rel
        old = manifest.get(rel)
        if old and old[:2] == [st.st_size, st.st_mtime_ns] and target.exists():
            continue  # unchanged since it was hashed and copied
        sha = file_sha256(path, 16)
        if not (old and old[2] == sha and target.exists()):
            if target.exists():
                changed_dirs.add(target.parent)
            sha = _copy_hashed(path, target)  # the hash of the bytes copied (the source may change meanwhile)
            _VERIFIED[(str(dst), rel)] = (target.stat().st_size, target.stat().st_mtime_ns)
        manifest[rel] = [st.st_size, st.st_mtime_ns, sha]
    for folder in changed_dirs:  # what ir_datasets built from the old copy is stale
        _remove_derived(dst, folder, staged)
    dst.mkdir(parents=True, exist_ok=True)
    tmp = manifest_path.with_name(f".{manifest_path.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(manifest, indent=1, sort_keys=True))
    os.replace(tmp, manifest_path)


def staged_fingerprint(irds_id: str) -> str | None:
    """A hash of the staged files under this id's folder (None when nothing is staged for it): part of cache
    keys, so changed staged data never reuses an index or a run of the old data. The cache's copies of those
    files are verified against it first (`verify_staged_copy`): a key always names the bytes ir_datasets reads."""
    import json

    if settings.staged_irds_home() is None:
        return None
    try:
        path = ensure_irds_home() / STAGED_MANIFEST
    except DatasetError:
        return None
    verify_staged_copy(irds_id)  # its errors are the user's to see: a key without its data would be wrong
    try:
        stamp = (str(path), path.stat().st_mtime_ns, irds_id)
        if stamp in _FINGERPRINTS:
            return _FINGERPRINTS[stamp]
        manifest = json.loads(path.read_text())
    except (OSError, ValueError, DatasetError):
        return None
    _FINGERPRINTS[stamp] = _fingerprint(manifest, irds_id)
    return _FINGERPRINTS[stamp]


_FINGERPRINTS: dict[tuple[str, int, str], str | None] = {}
# (home, relative path) -> (size, mtime_ns) of a copy whose content was hashed and matched in this process
_VERIFIED: dict[tuple[str, str], tuple[int, int]] = {}


def verify_staged_copy(irds_id: str) -> None:
    """Check the cache's copies of the staged files this id reads (the folder its key hashes) against the hashes
    recorded when they were copied: hashed once per process, then only re-hashed when a copy's size or mtime
    changes (an edit, a notebook writing into it). A copy that differs or is gone is copied again from the staged
    home, named in a warning, and what ir_datasets derived beside it is removed; a staged source that itself
    changed gets its new hash recorded, so keys follow it. Without this a corrupted copy was read as it is and
    its runs stored under the key of the correct data (issue 32)."""
    import json
    import time

    staged = settings.staged_irds_home()
    if staged is None:
        return
    home = ensure_irds_home()
    recent = _CHECKED.get((str(home), irds_id))
    if recent is not None and time.monotonic() - recent < RECHECK_SECONDS:
        return  # a grid's plan asks for every cell's key: thousands of calls a second need no new stat
    manifest_path = home / STAGED_MANIFEST
    try:
        manifest = json.loads(manifest_path.read_text())
    except (OSError, ValueError):  # the cache folder was deleted (or damaged) while this process ran: seed again
        log.warning("staged data: the cache's ir_datasets home %s lost its copy of the staged data (deleted while "
                    "running?); copying it again from %s", home, staged)
        _seed(staged, home)
        manifest = json.loads(manifest_path.read_text())
    prefix = _staged_prefix(manifest, irds_id)
    if prefix is None:
        _CHECKED[(str(home), irds_id)] = time.monotonic()
        return
    changed = False
    for rel, entry in sorted(manifest.items()):
        if not rel.startswith(prefix):
            continue
        target = home / rel
        try:
            st = target.stat()
            seen = (st.st_size, st.st_mtime_ns)
        except OSError:
            seen = None
        if seen is not None and _VERIFIED.get((str(home), rel)) == seen:
            continue
        if seen is not None and file_sha256(target, 16) == entry[2]:
            _VERIFIED[(str(home), rel)] = seen
            continue
        source = staged / rel
        if not source.is_file():
            raise DatasetError(f"the cache's copy {target} of staged data differs from what was copied, and the "
                               f"staged source {source} is gone: restore IRGRID_IRDS_STAGED ({staged}) or unset it")
        log.warning("staged data: the cache's copy %s %s; copied again from %s", target,
                    "is missing" if seen is None else "does not match the staged file (changed after it was copied)",
                    source)
        sha = _copy_hashed(source, target)
        _remove_derived(home, target.parent, set(manifest))
        st_src, st = source.stat(), target.stat()
        if sha != entry[2]:  # the staged file itself changed (same size and mtime): record its real content
            manifest[rel] = [st_src.st_size, st_src.st_mtime_ns, sha]
            changed = True
        _VERIFIED[(str(home), rel)] = (st.st_size, st.st_mtime_ns)
    if changed:
        tmp = manifest_path.with_name(f".{manifest_path.name}.tmp-{os.getpid()}")
        tmp.write_text(json.dumps(manifest, indent=1, sort_keys=True))
        os.replace(tmp, manifest_path)
    _CHECKED[(str(home), irds_id)] = time.monotonic()


RECHECK_SECONDS = 2.0
_CHECKED: dict[tuple[str, str], float] = {}  # (home, id) -> when its copies were last found intact


def _copy_hashed(source: Path, target: Path) -> str:
    """Copy through a temporary name (never a half-written copy under the real one); the hash of what was written."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    shutil.copyfile(source, tmp)
    sha = file_sha256(tmp, 16)
    os.replace(tmp, target)
    return sha


def _remove_derived(home: Path, folder: Path, staged: set[str]) -> None:
    """What ir_datasets built beside a copy (docstores, extracted files) came from the old bytes: removed."""
    for derived in folder.iterdir():
        rel = str(derived.relative_to(home))
        if derived.is_file() and rel not in staged and derived.name != STAGED_MANIFEST \
                and not derived.name.startswith("."):
            derived.unlink()
        elif derived.is_dir() and not any(r.startswith(rel + "/") for r in staged):
            shutil.rmtree(derived, ignore_errors=True)


def _staged_prefix(manifest: dict, irds_id: str) -> str | None:
    """The deepest staged folder of the id (beir/scifact/ for beir/scifact/test): what its key hashes."""
    parts = irds_id.split("/")
    for i in range(len(parts), 0, -1):
        candidate = "/".join(parts[:i]) + "/"
        if any(rel.startswith(candidate) for rel in manifest):
            return candidate
    return None


def _fingerprint(manifest: dict, irds_id: str) -> str | None:
    import hashlib
    import json

    prefix = _staged_prefix(manifest, irds_id)
    if prefix is None:
        return None
    entries = sorted((rel, v[2]) for rel, v in manifest.items() if rel.startswith(prefix))
    return hashlib.sha256(json.dumps(entries).encode()).hexdigest()[:12]


def catalog() -> list[Dataset]:
    return list(DATASETS)


# ir_datasets ids that irgrid registered from its own factories -> the files they read (ir_datasets' registry is
# process-wide: a second collection under one id with other files would silently read the first one's)
_REGISTERED: dict[str, tuple[tuple[str, str], ...]] = {}


def registered_by_irgrid(irds_id: str) -> bool:
    """Whether irgrid itself put `irds_id` into ir_datasets' registry (not an id ir_datasets ships)."""
    return irds_id in _REGISTERED


@cache
def _quiet_download_logs(ir_datasets: Any) -> None:
    """ir_datasets gives each module's logger its own handler and level INFO on first use, so a level set on the
    `ir_datasets` logger never applies: on a machine without downloads its retries ("download error", "Download
    failed") were printed before irgrid's own staging hint. Unless verbose (`irgrid -v`), only its errors show."""
    import logging

    from irgrid.util.console import verbose

    original = ir_datasets.log.Logger.logger

    def logger(self: Any) -> logging.Logger:
        found = original(self)
        if not verbose() and found.level < logging.ERROR:
            found.setLevel(logging.ERROR)
        return found

    ir_datasets.log.Logger.logger = logger


def is_download_failure(e: BaseException) -> bool:
    """Whether ir_datasets tried to download (the data is not staged): a network OSError, or its RuntimeError
    'All download sources failed' when a file has several mirrors."""
    import errno

    if isinstance(e, RuntimeError):
        return bool(e.args) and e.args[0] == "All download sources failed"
    return isinstance(e, OSError) and not isinstance(e, (FileNotFoundError, PermissionError)) \
        and e.errno not in (errno.ENOSPC, errno.EROFS, errno.EACCES, errno.EPERM, errno.EDQUOT)  # local, not network


def irds_load(ds: Dataset | str) -> Any:
    """ir_datasets.load for a catalog dataset, registering irgrid's factory with ir_datasets first when it has one
    (so `pt.get_dataset("irds:<id>")` serves it like any other)."""
    ensure_irds_home()
    import ir_datasets

    _quiet_download_logs(ir_datasets)
    ds = get(ds) if isinstance(ds, str) else ds
    verify_staged_copy(ds.irds_id)
    if ds.irds_factory is not None and ds.irds_id in _REGISTERED and _REGISTERED[ds.irds_id] != ds.files:
        # a collection's files edited in a notebook (or another collection under the name): the id is ours, so
        # its registration is replaced by this dataset's factory; every read still checks the files' hashes
        log.info("dataset %r: its files changed in this process; reading the new ones", ds.irds_id)
        ir_datasets.registry._registered.pop(ds.irds_id, None)
        _REGISTERED.pop(ds.irds_id)
    if ds.irds_factory is not None and ds.irds_id not in ir_datasets.registry:
        try:
            ir_datasets.registry.register(ds.irds_id, ds.irds_factory())
            _REGISTERED[ds.irds_id] = ds.files
        except RuntimeError as e:  # registered meanwhile under the same id (the registry refuses duplicates)
            if ds.irds_id not in ir_datasets.registry:
                raise DatasetError(f"could not register {ds.irds_id!r} with ir_datasets: {e}") from None
    return ir_datasets.load(ds.irds_id)
