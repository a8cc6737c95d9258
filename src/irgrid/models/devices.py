"""Which torch device a model runs on: the one asked for, else IRGRID_DEVICE, else CUDA when present, else the
CPU. The one place irgrid chooses a device."""

from __future__ import annotations


def pick_device(device: str | None = None) -> str:
    from irgrid.util import settings

    if device:
        return device
    configured = settings.device()
    if configured:
        return configured
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"
