"""Named, sourced configurations of one retriever: `paper` (what the paper's code ran) and `card` (the model
card / MTEB registry).

Where the paper's code and a model card disagree, irgrid offers both by name and never picks one silently. A
profile is data: option name -> `Setting(value, source)`, the source naming the file (repo path, model card,
MTEB registry module) the value comes from. Applying a profile is `Retriever.with_options(**values)`, so cache
keys follow the settings, not the profile's name: two profiles that agree on everything share every cache.

An entry registers its card values as its defaults; `profiles["card"]` holds their sources, and
`profiles["paper"]` the paper's values that differ. Light module: no heavy imports (`irgrid list` uses it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from irgrid.core.enums import NameEnum
from irgrid.util.errors import Error


class ProfileName(NameEnum):
    """The named configurations every entry runs under: what the paper's code ran, and the model card's."""

    PAPER = "paper"
    CARD = "card"


PROFILES: tuple[ProfileName, ...] = tuple(ProfileName)
DEFAULT_PROFILE = ProfileName.CARD  # experiment files without `profile:`; experiments/paper.yaml says `profile: paper`


@dataclass(frozen=True)
class Setting:
    """One value of a profile and where it comes from (e.g. 'valentinsvelev/retriever-evaluation:
    src/models/sparta.py', 'model card', 'mteb/models/bge_models.py')."""

    value: Any
    source: str
    # dataset -> the value on that dataset (irds id or catalog name; a prefix ending at '/' matches its splits),
    # from the same source: e.g. ColBERTv2's query length on ArguAna. Other datasets run with `value`.
    per_dataset: Mapping[str, Any] = field(default_factory=dict)
    # what the paper's text says where it differs from the code the value follows (shown as a note)
    text: str = ""

    def __post_init__(self) -> None:
        if not self.source or not isinstance(self.source, str):
            raise ProfileError(f"setting {self.value!r} needs a source (file, card or registry it comes from)")
        object.__setattr__(self, "per_dataset", dict(self.per_dataset))


Profile = Mapping[str, Setting]

# Settings of a profile shared by every entry that has the option (an entry's own profile settings win).
COMMON: dict[str, dict[str, Setting]] = {
    "paper": {"num_results": Setting(1001, "valentinsvelev/retriever-evaluation:src/run.py@4bedb75 run(top_k=1001): 1000 "
                                           "remain after a self-match is removed"),
              # the quirk score_dtype, on every entry that scores a dense index exactly (the option's holders)
              "score_dtype": Setting("fp32", "valentinsvelev/retriever-evaluation:src/indexing/faiss_indexer.py@4bedb75 "
                                             "FaissIndexer: faiss.IndexFlatIP over float32 copies of the vectors "
                                             "(_to_float32_numpy), for queries and documents")},
    "card": {"score_dtype": Setting("fp16", "irgrid default (quirk off): an fp16 matrix on a GPU, half the memory; "
                                            "a CPU scores in fp32 (faiss)")},
}


@dataclass(frozen=True)
class Quirk:
    """A behaviour of the paper's released code that produced its numbers but that no model card describes (a bug
    or an accident of batching): a named setting of the `paper` profile, on there, off in `card`. Its option enters
    cache keys only when on (`keyed`), so an entry whose settings leave it off keeps the keys it had before."""

    name: str
    off: Any  # the value that reproduces nothing (irgrid's own behaviour); the `card` profile's value
    what: str  # what the release does, in one sentence (shown by `irgrid list --quirks`)


QUIRKS: dict[str, Quirk] = {q.name: q for q in (
    Quirk("none_title", None,
          "dense documents of a title-less corpus get the literal title the release's f'{title} {text}' writes for "
          "a missing title ('None'); off: no title"),
    Quirk("unicoil_tail_batches", None,
          "uniCOIL's document workers drop each worker's last partial batch (up to workers x (batch - 1) documents "
          "per corpus are never indexed); the value is {workers, batch_size}; off: every document is indexed"),
    Quirk("sparta_pad_max", None,
          "SPARTA takes each term's max over every position of the padded batch, padding included, so a document's "
          "weights depend on its batch; the value is {workers, batch_size} of the release's batches; off: padding "
          "masked"),
    Quirk("left_pad_last_token", None,
          "last-token pooling at position (attended tokens - 1) of texts padded on the left, which is not the last "
          "token of a text shorter than its batch's longest, so a vector depends on its batch; the value is the "
          "release's batch size (texts in input order); off: right padding, the last attended token"),
    Quirk("score_dtype", "fp16",
          "dense scores: 'fp32' (the release's faiss IndexFlatIP) or 'fp16' (irgrid's matrix on a GPU; a CPU "
          "always scores in fp32)"),
)}
# Options added after cache keys were pinned that are not quirks: their value here stays out of every key too
# (`bidirectional`: an entry's own attention, True for the bidirectional decoders; the spec's side configuration
# carries it into the index and query keys whatever its value, so a causal setting still changes those)
LATE_DEFAULTS: dict[str, Any] = {"keep_empty_title": False, "doc_max_length": None, "st_default_prompt": False,
                                 "bidirectional": True, "keep_unk": False, "query_quantise": None, "eos": None}


def keyed(options: Mapping[str, Any]) -> dict[str, Any]:
    """`options` as cache keys see them: a quirk that is off (and a late option at its default) is left out, so
    adding one to an entry leaves the keys of every configuration that does not use it unchanged."""
    off = {**{q.name: q.off for q in QUIRKS.values()}, **LATE_DEFAULTS}
    return {k: v for k, v in options.items() if not (k in off and _same(v, off[k]))}


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


def for_entry(profile: str, own: Profile, options: Mapping[str, Any]) -> dict[str, Setting]:
    """The settings `profile` applies to an entry with these options and its own profile settings."""
    common = {k: s for k, s in COMMON.get(profile, {}).items() if k in options}
    return {**common, **own}


class ProfileError(Error, ValueError):
    pass


def check_name(name: str, where: str = "") -> str:
    """A profile name from user input: one of PROFILES, with a hint otherwise."""
    if name not in PROFILES:
        from irgrid.util.registry import did_you_mean

        raise ProfileError(f"{where}unknown profile {name!r}.{did_you_mean(str(name), list(PROFILES))} "
                           f"Profiles: {', '.join(PROFILES)}")
    return name


def values(profile: Profile) -> dict[str, Any]:
    return {k: s.value for k, s in profile.items()}


def dataset_values(profile: Profile) -> dict[str, dict[str, Any]]:
    """dataset -> {option: value} for the settings a profile gives per dataset."""
    out: dict[str, dict[str, Any]] = {}
    for key, setting in profile.items():
        for dataset, value in setting.per_dataset.items():
            out.setdefault(dataset, {})[key] = value
    return out


def matches(pattern: str, *names: str | None) -> bool:
    """Whether a dataset named by any of `names` (irds id, catalog name) is `pattern` or one of its splits:
    'beir/arguana' matches 'beir/arguana' and 'beir/arguana/test', not 'beir/arguana-x'."""
    return any(n and (n == pattern or n.startswith(pattern.rstrip("/") + "/")) for n in names)


def differences(profiles: Mapping[str, Profile], agreeing: bool = False) -> list[dict[str, Any]]:
    """Rows (setting, paper, paper_source, card, card_source, note) for every setting the profiles do not agree
    on (`agreeing`: every setting); a per-dataset value is a row of its own, 'setting [dataset]'."""
    paper, card = profiles.get("paper", {}), profiles.get("card", {})
    rows = []
    for key in sorted(set(paper) | set(card)):
        p, c = paper.get(key), card.get(key)
        note = f"the paper's text: {p.text}" if p is not None and p.text else ""
        if agreeing or not (p is not None and c is not None and p.value == c.value):
            rows.append({"setting": key,
                         "paper": p.value if p else "(default)", "paper_source": p.source if p else "",
                         "card": c.value if c else "(default)", "card_source": c.source if c else "",
                         "note": note})
        for dataset, value in (p.per_dataset.items() if p is not None else ()):
            own = c.per_dataset.get(dataset, c.value) if c is not None else "(default)"
            if agreeing or value != own:
                rows.append({"setting": f"{key} [{dataset}]", "paper": value, "paper_source": p.source,
                             "card": own, "card_source": c.source if c is not None else "", "note": ""})
    return rows
