"""Where irgrid keeps its caches and where staged (air-gapped) data lives. Environment variables only, so
scripts, notebooks, the CLI and cluster jobs all see the same settings."""

from __future__ import annotations

import os
from pathlib import Path

from irgrid.core.errors import Error


def cache_root() -> Path:
    """Indexes and cached runs (IRGRID_CACHE, default ~/.cache/irgrid)."""
    return Path(os.environ.get("IRGRID_CACHE", Path.home() / ".cache" / "irgrid")).expanduser()


def staged_irds_home() -> Path | None:
    """A read-only IR_DATASETS_HOME to copy from (IRGRID_IRDS_STAGED), for machines with no downloads."""
    value = os.environ.get("IRGRID_IRDS_STAGED")
    return Path(value).expanduser() if value else None


def irds_home() -> Path:
    """The writable ir_datasets home irgrid uses: IR_DATASETS_HOME if set, else one inside the cache."""
    value = os.environ.get("IR_DATASETS_HOME")
    return Path(value).expanduser() if value else cache_root() / "irds"


def use_irds_home() -> Path:
    """Point ir_datasets at irgrid's home on first real use (a grid run, a pipeline built, a dataset opened), not at
    `import irgrid`: ir_datasets reads IR_DATASETS_HOME once, when first imported, so it is set here (when unset and
    before that import); a grid's cluster jobs inherit it. Copying a staged home happens when a dataset is opened."""
    import sys

    home = irds_home()
    if "IR_DATASETS_HOME" not in os.environ and "ir_datasets" not in sys.modules:
        os.environ["IR_DATASETS_HOME"] = str(home)
    return home


class SettingsError(Error, ValueError):
    """An IRGRID_* environment variable has a value irgrid cannot use."""


def device() -> str | None:
    """IRGRID_DEVICE ('cpu', 'cuda', 'cuda:1', 'mps'); None lets each library pick (a GPU when present).
    Checked here, once, so a typo is one clear error instead of a failure deep inside a model library."""
    import re

    value = (os.environ.get("IRGRID_DEVICE") or "").strip()
    if not value:
        return None
    if not re.fullmatch(r"cpu|mps|cuda(:\d+)?", value):
        raise SettingsError(f"IRGRID_DEVICE={value!r} is not a device: use cpu, cuda, cuda:N or mps "
                            f"(or unset it to use a GPU when present)")
    if value != "cpu":
        problem = _device_missing(value)
        if problem:  # every cell failed after its model loaded, without naming the setting (issue 32)
            raise SettingsError(f"IRGRID_DEVICE={value}: {problem}; set IRGRID_DEVICE=cpu or unset it (a GPU is "
                                f"then used when present)")
    return value


_DEVICES: dict[str, str | None] = {}


def _device_missing(value: str) -> str | None:
    """Why the requested accelerator is not there (None: it is). torch is imported only here, only when an
    accelerator is asked for, and asked once per process."""
    if value not in _DEVICES:
        import torch

        if value == "mps":
            ok = torch.backends.mps.is_available()
            _DEVICES[value] = None if ok else "this machine has no MPS device (Apple GPU)"
        elif not torch.cuda.is_available():
            _DEVICES[value] = "CUDA is not available here (no GPU, or a CPU-only torch)"
        else:
            index, count = int(value.partition(":")[2] or 0), torch.cuda.device_count()
            _DEVICES[value] = None if index < count else f"there is no GPU {index} (this machine has {count})"
    return _DEVICES[value]


def max_models() -> int:
    """IRGRID_MAX_MODELS (default 3): how many loaded models a process keeps at once (irgrid.models.cache); the
    least recently used one is released first. Three covers the largest cell (HyDE: query and document encoders
    and the generator); a grid also releases every model after each retriever's cells."""
    value = (os.environ.get("IRGRID_MAX_MODELS") or "").strip()
    if not value:
        return 3
    if not value.isdigit() or int(value) < 1:
        raise SettingsError(f"IRGRID_MAX_MODELS={value!r} is not a whole number >= 1 (how many loaded models a "
                            f"process keeps; unset it for 3)")
    return int(value)


def shared_root() -> Path | None:
    """The team's read-only shared folder (IRGRID_SHARED, else ../shared beside a source checkout when present).

    Staged data for datasets ir_datasets lacks lives under `<shared>/datasets/` (e.g. `instructir/`). irgrid never
    writes there.
    """
    value = os.environ.get("IRGRID_SHARED")
    if value:
        return Path(value).expanduser()
    candidate = Path(__file__).resolve().parents[3].parent / "shared"  # src/irgrid/core/settings.py
    return candidate if candidate.is_dir() else None


def tiny_models() -> bool:
    """IRGRID_TINY_MODELS=1: every checkpoint that declares its architecture is replaced by a tiny random-weight
    model of that architecture (wiring checks on a CPU; never results). Read where entries are looked up
    (`irgrid.core.retrievers.get`), which marks their checkpoints (`ModelRef.stand_in`): keys never read it."""
    return os.environ.get("IRGRID_TINY_MODELS", "").lower() in ("1", "true", "yes")
