"""Zero-shot or not: the collections each registered checkpoint was trained on (supervised training queries), with
the source of that statement, so that every cell of a grid can be flagged in-domain or zero-shot and the paper's
claims and group aggregates can be checked twice, on all cells and on zero-shot cells only
(`irgrid claims --zero-shot`).

Sources, in order of preference: MTEB's model metadata (`training_datasets` of mteb 2.26.24,
mteb/models/model_implementations/<file>; MTEB task names mapped to the catalog's datasets by MTEB_TASKS), the
model's paper or card, the checkpoint's own name (`...-msmarco`). `complete=False` says the list may miss
collections (undisclosed data, an LLM in the pipeline): a dataset not listed is then "unknown", not zero-shot.
Training on MS MARCO's training queries makes every MS MARCO passage test set (dev, TREC-DL) in-domain.
"""

from __future__ import annotations

from dataclasses import dataclass

from irgrid.util.errors import Error
from irgrid.util.registry import Declarations

MSMARCO = "msmarco"  # every msmarco-passage/* dataset
CQADUPSTACK = "cqadupstack"  # every beir/cqadupstack/* forum
# MTEB retrieval task names -> irgrid's names for the collections (their training splits)
MTEB_TASKS: dict[str, str] = {
    "MSMARCO": MSMARCO, "MSMARCOHardNegatives": MSMARCO, "NanoMSMARCORetrieval": MSMARCO,
    "NQ": "beir/nq/test", "NQHardNegatives": "beir/nq/test", "NanoNQRetrieval": "beir/nq/test",
    "HotpotQA": "beir/hotpotqa/test", "HotPotQA": "beir/hotpotqa/test", "HotpotQAHardNegatives": "beir/hotpotqa/test",
    "FEVER": "beir/fever/test", "FEVERHardNegatives": "beir/fever/test", "FiQA2018": "beir/fiqa/test",
    "ArguAna": "beir/arguana/test", "QuoraRetrieval": "beir/quora/test", "NanoQuoraRetrieval": "beir/quora/test",
    "SciFact": "beir/scifact/test", "NFCorpus": "beir/nfcorpus/test", "TRECCOVID": "beir/trec-covid/test",
    "DBPedia": "beir/dbpedia-entity/test", "CQADupstack": CQADUPSTACK,
}


@dataclass(frozen=True)
class Training:
    collections: tuple[str, ...]  # irgrid dataset names, MSMARCO or CQADUPSTACK
    source: str
    complete: bool = True  # False: other, unnamed collections may be in it

    def in_domain(self, dataset: str) -> bool | None:
        """True: trained on this collection; False: known not to be; None: unknown."""
        name = dataset.split("@")[0]  # a query subset (`@q16s0`) is its dataset's
        for c in self.collections:
            if (c == MSMARCO and name.startswith("msmarco-passage/")) or \
                    (c == CQADUPSTACK and name.startswith("beir/cqadupstack/")) or c in (name, f"{name}/test"):
                return True
        return False if self.complete else None


class TrainingError(Error, ValueError):
    """Two different training declarations for one entry."""


def _load_entries() -> None:
    from irgrid.core import entries

    entries.load()


# entry name -> its training data, declared with the entries (pipelines/training.py; other entry packages may
# declare their own)
TRAINING: Declarations[Training] = Declarations("training data", "pipelines/training.py", TrainingError,
                                                _load_entries)


def mteb(file: str, *collections: str) -> Training:
    """The training collections MTEB's model metadata lists for a model (mteb 2.26.24)."""
    return Training(tuple(collections), f"MTEB model metadata (mteb 2.26.24, models/model_implementations/{file})")


def declare(entry: str, training: Training) -> Training:
    """Declare what entry `entry`'s checkpoints were trained on (from an entry module); one declaration per entry."""
    return TRAINING.declare(entry, training)


def of(system: str) -> Training | None:
    """The declared training data of entry `system` (None: not declared, or not a registered entry)."""
    return TRAINING.of(system)


def in_domain(system: str, dataset: str) -> bool | None:
    """Whether the system's checkpoint was trained on this dataset's collection (None: unknown, or not a
    registered entry)."""
    t = of(system)
    return None if t is None else t.in_domain(dataset)


def flag(system: str, dataset: str) -> str:
    """'in-domain', 'zero-shot' or 'unknown'."""
    v = in_domain(system, dataset)
    return "unknown" if v is None else "in-domain" if v else "zero-shot"
