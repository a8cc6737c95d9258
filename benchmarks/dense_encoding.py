"""Dense document encoding throughput (docs/s) for `all-minilm-l6-v2` through pyterrier-dr, with the
sentence-transformers `encode()` call on the same texts as the in-process baseline.

    python benchmarks/dense_encoding.py [--dataset beir/scifact/test] [--docs 512] [--batch-size 32]
"""

from __future__ import annotations

import argparse
import itertools
import time

import pandas as pd
from irgrid.pipelines.dense_encoder import MINILM, load_sbert

from irgrid import models, settings
from irgrid.datasets import get as get_dataset


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="beir/scifact/test")
    parser.add_argument("--docs", type=int, default=512)
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()
    docs = list(itertools.islice(get_dataset(args.dataset).docs(), args.docs))
    frame = pd.DataFrame(docs)
    resolved = models.resolve(MINILM)
    encoder = load_sbert(resolved.location, settings.device(), args.batch_size)
    texts = frame["text"].tolist()
    encoder.model.encode(texts[: args.batch_size], batch_size=args.batch_size)  # warm-up

    start = time.perf_counter()
    encoder.model.encode(texts, batch_size=args.batch_size)
    st_rate = len(texts) / (time.perf_counter() - start)

    doc_encoder = encoder.doc_encoder()
    start = time.perf_counter()
    out = doc_encoder(frame)
    dr_rate = len(texts) / (time.perf_counter() - start)
    assert len(out) == len(texts) and out["doc_vec"].iloc[0].shape == (384,)

    print(f"{len(texts)} documents of {args.dataset}, batch {args.batch_size}, device {encoder.device}")
    print(f"{'path':<40} {'docs/s':>10} {'ratio':>7}")
    print(f"{'sentence-transformers encode (baseline)':<40} {st_rate:>10.1f} {1.0:>7.3f}")
    print(f"{'irgrid all-minilm-l6-v2 doc encoder':<40} {dr_rate:>10.1f} {dr_rate / st_rate:>7.3f}")


if __name__ == "__main__":
    main()
