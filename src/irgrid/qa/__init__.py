"""Retrieval-augmented question answering on DisastQA (Chen et al., 2026) under its evidence settings.

Submodules: `data` (loaders for the staged release), `collection` (the derived retrieval collection, registered
with ir_datasets and irgrid's catalog; importing irgrid.data.datasets registers it), `evidence` (Base / Golden / Mix /
Retrieved as PyTerrier transformers), `prompts` (Appendix H/I templates as data), `readers` (reader registry and
the generation transformer over pyterrier-rag backends), `measures` and `grid` (`irgrid qa run EXP.yaml`).
"""
