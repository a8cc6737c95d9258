"""Which torch device a model runs on: the one asked for, else CUDA when present, else the CPU."""

from __future__ import annotations


def pick_device(device: str | None) -> str:
    import torch

    if device:
        return device
    return "cuda" if torch.cuda.is_available() else "cpu"
