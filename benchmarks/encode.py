"""Document encoding throughput on one device, as ratios from one run.

For all-MiniLM-L6-v2 (real weights) on SciFact texts: docs/s of irgrid's engine, of sentence-transformers
`encode()` and of pyterrier-dr's SBertBiEncoder doc encoder (same model, same texts, same batch size), plus the
raw forward ceiling (pre-tokenized, fixed-shape batches, no pooling) for random-weight models of the shapes
MiniLM-L6, BERT-base, BERT-large, Qwen3-0.6B-like and Mistral-7B-like (`--shapes`).

    python benchmarks/encode.py [--docs 512] [--batch-size 32] [--device cpu|cuda] [--shapes minilm,bert-base]
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from typing import Any

import pandas as pd

import irgrid  # noqa: F401  (before pyterrier_dr, which imports ir_datasets: irgrid points it at its home)

SHAPES: dict[str, dict[str, Any]] = {
    "minilm-l6": {"cls": "BertConfig", "hidden_size": 384, "num_hidden_layers": 6, "num_attention_heads": 12,
                  "intermediate_size": 1536},
    "bert-base": {"cls": "BertConfig", "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
                  "intermediate_size": 3072},
    "bert-large": {"cls": "BertConfig", "hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 16,
                   "intermediate_size": 4096},
    "qwen3-0.6b": {"cls": "Qwen3Config", "hidden_size": 1024, "num_hidden_layers": 28, "num_attention_heads": 16,
                   "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 3072, "vocab_size": 151669},
    "mistral-7b": {"cls": "MistralConfig", "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
                   "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 32000},
}


def raw_forward(shape: str, device: str, batch: int, seq: int, seconds: float) -> float:
    import torch
    import transformers as tf

    cfg = dict(SHAPES[shape])
    config = getattr(tf, cfg.pop("cls"))(**cfg)
    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    model = tf.AutoModel.from_config(config, dtype=dtype).to(device).eval()
    ids = torch.randint(1000, 2000, (batch, seq), device=device)
    mask = torch.ones_like(ids)
    done, start = 0, time.perf_counter()
    with torch.inference_mode():
        model(input_ids=ids, attention_mask=mask)  # warm-up
        start = time.perf_counter()
        while time.perf_counter() - start < seconds:
            model(input_ids=ids, attention_mask=mask)
            done += batch
        if device.startswith("cuda"):
            torch.cuda.synchronize()
    return done / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="beir/scifact/test")
    parser.add_argument("--docs", type=int, default=512)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--device", default=None)
    parser.add_argument("--shapes", default="", help=f"comma-separated raw-forward shapes: {','.join(SHAPES)}")
    parser.add_argument("--seq", type=int, default=256)
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()

    import torch
    from pyterrier_dr import SBertBiEncoder

    from irgrid.data.datasets import get as get_dataset
    from irgrid.dense.engine import Engine, pick_device
    from irgrid.dense.spec import ENCODERS
    from irgrid.models.resolver import resolve

    device = pick_device(args.device)
    docs = list(itertools.islice(get_dataset(args.dataset).docs(), args.docs))
    texts = [d["text"] for d in docs]
    spec = ENCODERS.get("all-minilm-l6-v2")
    resolved = resolve(spec.document_model)
    engine = Engine(spec, "d", resolved, device=device, batch_size=args.batch_size)
    sbert = SBertBiEncoder(resolved.location, batch_size=args.batch_size, device=device)
    if device.startswith("cuda"):
        sbert.model.half() if spec.dtype == "fp16" else sbert.model.to(torch.bfloat16)
    engine.encode(texts[: args.batch_size])
    sbert.encode_docs(texts[: args.batch_size])

    def timed(fn: Any) -> float:
        start = time.perf_counter()
        fn()
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        return len(texts) / (time.perf_counter() - start)

    rates = {
        "irgrid engine (stream)": timed(lambda: [v for _, v in engine.stream(docs)]),
        "sentence-transformers encode()": timed(lambda: sbert.model.encode(texts, batch_size=args.batch_size)),
        "pyterrier-dr SBertBiEncoder doc_encoder": timed(lambda: sbert.doc_encoder()(pd.DataFrame(docs))),
    }
    for shape in [s for s in args.shapes.split(",") if s]:
        rates[f"raw forward {shape} (seq {args.seq}, random weights)"] = raw_forward(
            shape, device, args.batch_size, args.seq, args.seconds)
    base = rates["pyterrier-dr SBertBiEncoder doc_encoder"]
    print(f"{len(texts)} texts of {args.dataset}, batch {args.batch_size}, device {device}, engine dtype "
          f"{engine.stats.dtype}, {torch.get_num_threads()} threads")
    print(f"{'path':<58} {'docs/s':>10} {'x pyterrier-dr':>15}")
    for name, rate in rates.items():
        print(f"{name:<58} {rate:>10.1f} {rate / base:>15.3f}")
    print(json.dumps({k: round(v, 2) for k, v in rates.items()}))


if __name__ == "__main__":
    main()
