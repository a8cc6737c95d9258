"""Checkpoints: resolving Hugging Face ids to local folders, strict loading, tiny random-weight architectures."""
