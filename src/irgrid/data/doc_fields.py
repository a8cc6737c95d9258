"""Documents with their fields kept apart ({'docno', 'title', 'text'}), for entries whose document text is not
the flat title + text join that `Dataset.docs()` yields (e.g. text only, or `title [SEP] text`).

Which fields exist follows the dataset's own policy (`Dataset.fields`): a corpus without titles yields text only.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


def fielded_docs(dataset: Any) -> Iterator[dict[str, str]]:
    corpus = dataset.corpus_dataset()
    ds = corpus.irds()
    names = ds.docs_cls()._fields
    fields = [f for f in corpus.fields if f in names]
    if not fields:
        from irgrid.data.errors import DatasetError

        raise DatasetError(f"dataset {corpus.name!r}: none of the fields {corpus.fields} exist (has {names})")
    for doc in ds.docs_iter():
        yield {"docno": doc.doc_id, **{f: getattr(doc, f) or "" for f in fields}}
