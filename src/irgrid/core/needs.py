"""What loading a real checkpoint needs beyond irgrid's own install, declared by the entries (pipelines/) per
checkpoint id: remote code and the hub repositories it imports, the transformers range that code was written for,
extra packages, licence gates, and the size that sets its GPU memory. `irgrid doctor` shows it; `irgrid run` refuses
an uncached cell whose checkpoint needs a package or remote code that is not here, before any GPU work.

Light module: no torch, no transformers (`irgrid doctor` and `irgrid list` import it cheaply).
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import Any

from irgrid.util.errors import Error
from irgrid.util.registry import Declarations

BYTES = {"fp32": 4, "fp16": 2, "bf16": 2, "fp16-autocast": 4}  # weights on the GPU per dtype (autocast keeps fp32)


class CheckpointNeedsError(Error, RuntimeError):
    """A checkpoint a cell loads needs a package or remote code that is not installed or staged here."""


@dataclass(frozen=True)
class Needs:
    """One checkpoint's loading requirements (see module docstring). `params` counts every weight loaded;
    `hidden` and `layers` size the activations of the memory estimate."""

    params: float
    hidden: int
    layers: int
    # hub repositories whose Python code loading the checkpoint imports (trust_remote_code): the checkpoint's own
    # repository and any its config.json auto_map names ('repo--module.Class'); () when irgrid's code loads it
    remote_code: tuple[str, ...] = ()
    transformers: str = ""  # the transformers range the checkpoint's (remote) code was written for
    packages: tuple[str, ...] = ()  # import names irgrid's loading of it needs beyond irgrid's extras
    gated: str = ""  # what to accept on the hub before the weights download (licence gate); "" when open
    licence: str = ""
    # the batch size the release encodes this checkpoint with (src/encoders/dense_encoder.py@4bedb75 encode() and its
    # workers); 0: not declared, the entry's own batch size is used
    paper_batch: int = 0
    note: str = ""

    def __post_init__(self) -> None:
        if self.params <= 0 or self.hidden <= 0 or self.layers <= 0:
            raise CheckpointNeedsError(f"Needs: params, hidden and layers must be positive, got {self}")

    def vram_gib(self, dtype: str, batch_size: int, length: int) -> float:
        """A coarse upper estimate of GPU memory for inference: the weights in `dtype`, plus one layer's
        activations for a full batch (~16 hidden-sized fp32 tensors per token). Not a measurement."""
        weights = self.params * BYTES.get(dtype, 4)
        activations = batch_size * length * self.hidden * 4 * 16
        return (weights * 1.1 + activations) / 2**30


def _load_entries() -> None:
    from irgrid.core import entries

    entries.load()


NEEDS: Declarations[Needs] = Declarations("checkpoint loading needs", "pipelines/checkpoints.py",
                                          CheckpointNeedsError, _load_entries)


def declare(model_id: str, needs: Needs) -> Needs:
    """Declare what loading `model_id` needs (from an entry module); one declaration per id."""
    return NEEDS.declare(model_id, needs)


def of(model_id: str) -> Needs | None:
    return NEEDS.of(model_id)


def missing_packages(needs: Needs) -> list[str]:
    return [p for p in needs.packages if importlib.util.find_spec(p) is None]


def problems(model_id: str, resolve_repo: Any = None) -> list[str]:
    """What is not here for loading `model_id`: each missing package, each remote-code repository that
    `resolve_repo(repo_id)` cannot find (raises); [] when nothing is declared missing."""
    needs = of(model_id)
    if needs is None:
        return []
    out = [f"pip install {p}" for p in missing_packages(needs)]
    for repo in needs.remote_code:
        if resolve_repo is None:
            continue
        try:
            resolve_repo(repo)
        except Exception as e:  # noqa: BLE001  (the resolver's own error says where it looked)
            out.append(f"stage the remote code {repo} ({type(e).__name__}: {str(e).splitlines()[0][:160]})")
    return out


def check(models: dict[str, Any], resolve_repo: Any) -> None:
    """Raise CheckpointNeedsError naming every problem of these (role -> ModelRef) checkpoints; tiny stand-ins
    need nothing."""
    found = []
    for role, ref in models.items():
        if getattr(ref, "stand_in", False):
            continue
        for p in problems(ref.id, resolve_repo):
            found.append(f"{ref.id} ({role}): {p}")
    if found:
        raise CheckpointNeedsError("checkpoints need what is not here: " + "; ".join(found) +
                                   ". `irgrid doctor EXP.yaml` lists what every checkpoint needs")
