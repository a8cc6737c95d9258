"""PISA's binary collection from impact postings, inverted with numpy.

Why our own: pyterrier-pisa's `toks_indexer` inverts in pure Python (a dict lookup and two list appends per
posting, one `np.array` per term per batch), ~3k SPLADE-shaped documents/s; at MS MARCO size that is most of an
impact index's build. This writes the same files, byte for byte (tests/integration/test_pisa_writer.py compares
them with `toks_indexer(scale=...)`): `fwd.documents`/`fwd.terms` (one docno/term per line, terms sorted),
`inv.docs` (`[1, N]`, then per term `[len, docids...]`), `inv.freqs` (per term `[len, impacts...]`),
`inv.sizes` (`[N, sum of impacts per document...]`), the binary lexicons (`build_binlex`) and `pt_meta.json`, so
`PisaIndex` opens and compresses it as its own. Batches are spilled to disk, so memory follows the batch size and
the lexicon, not the corpus; the final layout is a counting sort straight into memory-mapped output files.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping
from itertools import chain
from pathlib import Path

import numpy as np

from irgrid.core.retrievers import EntryError
from irgrid.data.errors import InputError

UINT32_MAX = np.iinfo(np.uint32).max


class PisaImpactWriter:
    """Add batches of documents (`docno`, {term: value}), then `finish()` writes the index.

    Values are stored as `int(value * scale)` (what `toks_indexer` stores); postings whose stored value is not
    positive are dropped, and a term only seen with such values is not in the lexicon. `finish(impact)` may
    instead turn the stored integers into impacts once corpus statistics are known (Lucene BM25 weights from term
    frequencies): `impact(term_ids, doc_ids, values)` returns integers, of which the positive ones are kept."""

    def __init__(self, path: str | Path, scale: float = 1.0, spill_docs: int = 100_000):
        if not scale > 0:
            raise EntryError(f"scale must be positive, got {scale}")
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        if (self.path / "pt_meta.json").exists():
            raise FileExistsError(f"a PISA index already exists at {self.path}; remove it or build elsewhere")
        self.scale = float(scale)
        self.lexicon: dict[str, int] = {}
        self.n_docs = 0
        self._spill = Path(tempfile.mkdtemp(prefix="inv-spill.", dir=self.path))
        self._batches: list[Path] = []
        self._pending: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # (term ids, docids, values)
        self._pending_docs, self.spill_docs = 0, spill_docs
        self._postings = np.zeros(0, dtype=np.int64)  # per term id (insertion order), before `finish(impact)`
        self._docnos = (self.path / "fwd.documents").open("w", encoding="utf-8")

    # -- input -------------------------------------------------------------------------------------------------
    def add(self, docnos: list[str], toks: list[Mapping[str, float]]) -> None:
        """One batch of documents, each a {term: value} map (`toks_indexer`'s input)."""
        import pandas as pd

        if len(docnos) != len(toks):
            raise ValueError(f"{len(docnos)} docnos but {len(toks)} term maps")
        counts = np.fromiter(map(len, toks), dtype=np.int64, count=len(toks))
        total = int(counts.sum())
        flat = np.fromiter(chain.from_iterable(toks), dtype=object, count=total)
        values = np.fromiter(chain.from_iterable(t.values() for t in toks), dtype=np.float64, count=total)
        codes, uniques = pd.factorize(flat, use_na_sentinel=False)
        self.add_postings(docnos, counts, uniques, codes, values)

    def add_postings(self, docnos: list[str], counts: np.ndarray, terms, codes: np.ndarray,
                     values: np.ndarray) -> None:
        """One batch in columnar form: `counts[i]` postings of document i, in document order, each naming
        `terms[codes[j]]` with `values[j]` (callers that factorised their terms already, e.g. in workers)."""
        if len(docnos) != len(counts):
            raise ValueError(f"{len(docnos)} docnos but {len(counts)} posting counts")
        if not docnos:
            return
        for i, d in enumerate(docnos):
            if not isinstance(d, str) or not d or "\n" in d or "\r" in d:
                raise InputError(f"document {self.n_docs + i}: docno {d!r} must be a non-empty string without "
                                 "line breaks (PISA stores one docno per line)")
        raw = np.asarray(values, dtype=np.float64)
        with np.errstate(invalid="ignore"):
            stored = np.trunc(raw * self.scale)  # int(value * scale), as toks_indexer stores it
        keep = stored > 0
        if np.any(stored[keep] > UINT32_MAX):
            j = int(np.flatnonzero(keep & (stored > UINT32_MAX))[0])
            raise InputError(f"impact {raw[j]!r} of term {terms[codes[j]]!r} is over PISA's 32-bit range after "
                             f"scale {self.scale}; quantise with a smaller scale")
        local_doc = np.repeat(np.arange(len(counts), dtype=np.int64), counts)[keep]
        codes = np.asarray(codes)[keep]
        used = np.zeros(len(terms), dtype=bool)
        used[codes] = True  # a term whose values are all dropped stays out of the lexicon, as in toks_indexer
        term_ids = self._term_ids(terms, used)[codes]
        stored = stored[keep].astype(np.uint32)
        base = self.n_docs
        grown = np.zeros(len(self.lexicon), dtype=np.int64)
        grown[:len(self._postings)] = self._postings
        self._postings = grown + np.bincount(term_ids, minlength=len(self.lexicon))
        self._docnos.write("\n".join(docnos) + "\n")
        self.n_docs += len(docnos)
        self._pending.append((term_ids, (local_doc + base).astype(np.uint32), stored))
        self._pending_docs += len(docnos)
        if self._pending_docs >= self.spill_docs:
            self._flush()

    def _flush(self) -> None:
        if not self._pending:
            return
        term, doc, value = (np.concatenate(a) for a in zip(*self._pending))
        f = self._spill / f"b{len(self._batches)}.npz"
        np.savez(f, term=term, doc=doc, value=value)
        self._batches.append(f)
        self._pending, self._pending_docs = [], 0

    def _term_ids(self, terms, used: np.ndarray) -> np.ndarray:
        """Global ids of the batch's distinct terms (first seen, first numbered, as toks_indexer numbers them)."""
        ids = np.zeros(len(terms), dtype=np.uint32)
        lex = self.lexicon
        for i in np.flatnonzero(used).tolist():
            t = terms[i]
            j = lex.get(t)
            if j is None:
                if not isinstance(t, str) or not t or "\n" in t or "\r" in t:
                    raise InputError(f"term {t!r}: terms must be non-empty strings without line breaks "
                                     "(PISA stores one term per line)")
                j = lex[t] = len(lex)
            ids[i] = j
        return ids

    def postings_per_term(self) -> np.ndarray:
        """Postings added so far per term id (ids in first-seen order, `lexicon`): document frequencies when
        each document gives a term once."""
        return self._postings.copy()

    # -- output ------------------------------------------------------------------------------------------------
    def finish(self, impact: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray] | None = None) -> Path:
        """Write the inverted index (terms in sorted order, postings in docid order); returns its path."""
        import scipy.sparse as sp
        from pyterrier_pisa import _pisathon

        self._docnos.close()
        try:
            self._flush()
            if self.n_docs == 0:
                raise InputError(f"{self.path}: no documents to index")
            n_terms = len(self.lexicon)
            order = sorted(self.lexicon)  # PISA's lexicon is searched in sorted order
            rank = np.empty(n_terms, dtype=np.int64)
            rank[np.fromiter((self.lexicon[t] for t in order), dtype=np.int64, count=n_terms)] = \
                np.arange(n_terms)
            sizes = np.zeros(self.n_docs, dtype=np.int64)
            counts = np.zeros(n_terms, dtype=np.int64)
            batches = []
            for f in self._batches:  # pass 1: final impacts and their per-term counts
                with np.load(f) as z:
                    term, doc, value = z["term"], z["doc"], z["value"]
                if impact is not None:
                    value = np.asarray(impact(term, doc, value))
                    keep = value > 0
                    term, doc, value = term[keep], doc[keep], value[keep].astype(np.uint32)
                    np.savez(f, term=term, doc=doc, value=value)
                r = rank[term]
                counts += np.bincount(r, minlength=n_terms)
                sizes += np.bincount(doc, weights=value, minlength=self.n_docs).astype(np.int64)
                batches.append(f)
            starts = np.concatenate([[0], np.cumsum(counts)[:-1]]) + np.arange(n_terms)  # header positions
            total = int(counts.sum())
            docs_mm = np.memmap(self.path / "inv.docs", dtype=np.uint32, mode="w+", shape=(2 + n_terms + total,))
            freqs_mm = np.memmap(self.path / "inv.freqs", dtype=np.uint32, mode="w+", shape=(n_terms + total,))
            docs_mm[:2] = (1, self.n_docs)
            docs_mm[2 + starts] = counts
            freqs_mm[starts] = counts
            cursor = starts + 1  # next free data slot per (final) term
            for f in batches:  # pass 2: each batch's postings go to their terms' next free slots
                with np.load(f) as z:
                    term, doc, value = z["term"], z["doc"], z["value"]
                if not len(doc):
                    continue
                # postings come document-major with ascending docids (and batches in docid order); a CSR -> CSC
                # transpose (scipy's counting sort) makes them term-major with docids still ascending per term
                first = int(doc[0])
                indptr = np.concatenate([[0], np.cumsum(np.bincount(doc - first))])
                csc = sp.csr_matrix((value, rank[term].astype(np.int32), indptr),
                                    shape=(len(indptr) - 1, n_terms)).tocsc()
                per_term = np.diff(csc.indptr)
                pos = np.repeat(cursor - csc.indptr[:-1], per_term) + np.arange(len(csc.indices))
                docs_mm[2 + pos] = csc.indices + first
                freqs_mm[pos] = csc.data
                cursor += per_term
            docs_mm.flush()
            freqs_mm.flush()
            del docs_mm, freqs_mm
            if np.any(sizes > UINT32_MAX):
                raise InputError(f"{self.path}: a document's summed impacts exceed 32 bits; use a smaller scale")
            np.concatenate([[self.n_docs], sizes]).astype(np.uint32).tofile(self.path / "inv.sizes")
            (self.path / "fwd.terms").write_text("".join(t + "\n" for t in order), encoding="utf-8")
            _pisathon.build_binlex(str(self.path / "fwd.documents"), str(self.path / "fwd.doclex"))
            _pisathon.build_binlex(str(self.path / "fwd.terms"), str(self.path / "fwd.termlex"))
            # written last: PisaIndex.built() looks for it, so a crash above leaves no index that looks complete
            (self.path / "pt_meta.json").write_text(json.dumps(
                {"type": "sparse_index", "format": "pisa", "package_hint": "pyterrier-pisa", "stemmer": "none"}))
        finally:
            shutil.rmtree(self._spill, ignore_errors=True)
        return self.path

    def abort(self) -> None:
        self._docnos.close()
        shutil.rmtree(self._spill, ignore_errors=True)


def write_impact_index(path: str | Path, docs: Iterable[Mapping], text_field: str = "toks", scale: float = 1.0,
                       batch_size: int = 10_000, spill_docs: int = 100_000) -> Path:
    """`toks_indexer(scale=scale).index(docs)`, inverted with numpy; `docs` give `docno` and {term: impact}.
    `batch_size` documents are held as dicts at once, `spill_docs` as arrays before they go to disk."""
    import more_itertools

    writer = PisaImpactWriter(path, scale, spill_docs=spill_docs)
    try:
        for batch in more_itertools.chunked(docs, batch_size):
            writer.add([d["docno"] for d in batch], [d[text_field] for d in batch])
    except BaseException:
        writer.abort()
        raise
    return writer.finish()
