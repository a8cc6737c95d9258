"""Datasets: thin specs over ir_datasets ids, plus the policies the paper applies per dataset.

A dataset is evaluated on `irds_id` (queries + qrels); its documents come from `corpus` (an ir_datasets id
too), so every split of one collection shares one index.
"""

from __future__ import annotations

import itertools
import os
import shutil
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from irgrid import settings
from irgrid.registry import Registry, UnknownNameError, did_you_mean

if TYPE_CHECKING:
    import pandas as pd


class DatasetError(RuntimeError):
    pass


@dataclass(frozen=True)
class Dataset:
    name: str  # the ir_datasets id of the evaluated split
    corpus: str  # the ir_datasets id whose documents are indexed
    fields: tuple[str, ...] = ("title", "text")  # joined with a space: the paper's "flat" documents
    query_field: str | None = None  # the queries' text field when there are several
    drop_self_matches: bool = False  # ArguAna, Quora: a query's own document is not a valid answer
    measures: tuple[str, ...] = ("nDCG@10",)
    notes: str = ""

    @property
    def irds_id(self) -> str:
        return self.name

    @property
    def slug(self) -> str:
        return self.name.replace("/", "--")

    def config(self) -> dict[str, Any]:
        """What changes a run on this dataset (queries, documents, policies)."""
        return {
            "name": self.name,
            "corpus": self.corpus,
            "fields": list(self.fields),
            "query_field": self.query_field,
            "drop_self_matches": self.drop_self_matches,
        }

    def irds(self):
        ensure_irds_home()
        import ir_datasets

        return ir_datasets.load(self.name)

    def pt_dataset(self):
        ensure_irds_home()
        import pyterrier as pt

        return pt.get_dataset(f"irds:{self.name}")

    def topics(self) -> pd.DataFrame:
        topics = self.pt_dataset().get_topics(self.query_field)
        if "query" not in topics.columns:
            raise DatasetError(
                f"dataset {self.name!r} has several query fields ({', '.join(topics.columns[1:])}); "
                f"set query_field in its catalog entry"
            )
        return topics[["qid", "query"]].astype({"qid": str})

    def qrels(self) -> pd.DataFrame:
        return self.pt_dataset().get_qrels().astype({"qid": str, "docno": str})

    def corpus_dataset(self) -> Dataset:
        return self if self.corpus == self.name else get(self.corpus)

    def docs_count(self) -> int:
        ensure_irds_home()
        import ir_datasets

        return ir_datasets.load(self.corpus).docs_count()

    def docs(self) -> Iterator[dict[str, str]]:
        """Documents as {'docno', 'text'} with the configured fields joined ("flat", as in the paper)."""
        ensure_irds_home()
        import ir_datasets

        ds = ir_datasets.load(self.corpus)
        if not ds.has_docs():
            raise DatasetError(f"dataset {self.corpus!r} has no documents (ir_datasets provides queries/qrels only)")
        names = ds.docs_cls()._fields
        fields = [f for f in self.fields if f in names]
        if not fields:
            raise DatasetError(f"dataset {self.corpus!r}: none of the fields {self.fields} exist (has {names})")
        try:
            it = iter(ds.docs_iter())
            first = next(it, None)
        except OSError as e:  # a download attempt on a machine that cannot reach the source
            raise DatasetError(
                f"the documents of {self.corpus!r} are not staged and could not be downloaded ({e}). "
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


def _beir(name: str, splits: tuple[str, ...] = ("test",), **kw: Any) -> None:
    register(Dataset(f"beir/{name}", corpus=f"beir/{name}", query_field="text", **kw))
    for split in splits:
        register(Dataset(f"beir/{name}/{split}", corpus=f"beir/{name}", query_field="text", **kw))


# The catalog: policies are declared here once (the engine has no dataset-specific branches).
register(Dataset("vaswani", corpus="vaswani", fields=("text",), measures=("AP", "nDCG@10")))
_beir("scifact", splits=("test", "train"))
_beir("nfcorpus", splits=("test", "dev", "train"))
_beir("arguana", drop_self_matches=True, notes="queries are documents of the corpus; BEIR drops self-matches")
_beir("quora", splits=("test", "dev"), drop_self_matches=True, notes="duplicate-question pairs; self-matches dropped")
_beir("fiqa", splits=("test", "dev", "train"))
_beir("scidocs")
for _split, _m in (("dev/small", ("RR@10", "R@1000")),
                   ("trec-dl-2019/judged", ("nDCG@10", "R@1000")),
                   ("trec-dl-2020/judged", ("nDCG@10", "R@1000"))):
    register(Dataset(f"msmarco-passage/{_split}", corpus="msmarco-passage", fields=("text",), measures=_m))


def get(name: str) -> Dataset:
    """A catalog dataset, or any other ir_datasets id with default policies."""
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
    if "ir_datasets" in sys.modules and os.environ.get("IR_DATASETS_HOME") != str(home):
        current = os.environ.get("IR_DATASETS_HOME", "~/.ir_datasets")
        if staged is not None:
            raise DatasetError(
                f"ir_datasets was imported before irgrid configured its home ({current}); import irgrid first "
                f"or set IR_DATASETS_HOME={home} before starting Python"
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
    os.environ["IR_DATASETS_HOME"] = str(home)
    return home


def _seed(src: Path, dst: Path) -> None:
    for path in src.rglob("*"):
        if path.is_file():
            target = dst / path.relative_to(src)
            if not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
                shutil.copyfile(path, tmp)
                os.replace(tmp, target)


def catalog() -> list[Dataset]:
    return list(DATASETS)


