"""The `claims:` block of an experiment file: statements of a paper (or of one's own), each with its source and a
form that `irgrid claims OUT` compiles to a statistical check over a stored grid (irgrid.report.claims).

Here only the spec: which forms exist, which keys each takes, and that every name a claim uses is one the
experiment knows (a retriever, a dataset, an aggregate), with "did you mean" otherwise. Pure data: it lives in the
lowest layer so that the experiment reader (irgrid.runner.experiment) checks claims when the file is read, before
any cell runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from irgrid.core.schema import NUMBER, Key, Schema
from irgrid.util.errors import Error
from irgrid.util.registry import did_you_mean


class ClaimError(Error, ValueError):
    pass


DEFAULT_ALPHA = 0.05
TARGET_HINT = "a dataset or aggregate name, or {dataset: NAME, measure: MEASURE}"

# form -> its keys (besides text/source/id/alpha); the docs (docs/claims.md) explain each check
FORMS: dict[str, Schema] = {
    "beats": Schema({"a": Key(str, required=True), "b": Key(str, required=True),
                     "dataset": Key(str, required=True, hint="a dataset name"), "measure": Key(str)},
                    "A beats B on a dataset: {a, b, dataset, measure}"),
    "best": Schema({"system": Key(str, required=True), "datasets": Key(list, required=True, nonempty=True, hint=TARGET_HINT
                                                                 + " per item, as a non-empty list"),
                    "at_least": Key(int, hint="a whole number >= 1 (default: all of them)"),
                    "among": Key(list, nonempty=True, hint="a non-empty list of retriever names")},
                   "A is best on at least k of these: {system, datasets: [...], at_least}"),
    "equivalent": Schema({"a": Key(str, required=True), "b": Key(str, required=True),
                          "dataset": Key((str, dict, list), required=True,
                                         hint=TARGET_HINT + ", or a list of datasets"), "measure": Key(str),
                          "delta": Key(NUMBER, required=True, hint="a number > 0 (the equivalence margin)")},
                         "A ~ B within delta: {a, b, dataset, delta}"),
    "beats_on_average": Schema({"a": Key(str, required=True), "b": Key(str, required=True),
                                "over": Key((str, list), required=True,
                                            hint="an aggregate name (BEIR, LoTTE, ...) or a list of datasets"),
                                "measure": Key(str)},
                               "A beats B on a group's aggregate: {a, b, over}"),
    "rank": Schema({"system": Key(str, required=True), "dataset": Key((str, dict), required=True, hint=TARGET_HINT),
                    "rank": Key(int, hint="a whole number >= 1: exactly this rank"),
                    "top": Key(int, hint="a whole number >= 1: this rank or better"),
                    "among": Key(list, nonempty=True, hint="a non-empty list of retriever names")},
                   "A ranks r-th (rank: r) or in the top k (top: k): {system, dataset, rank|top}"),
    "latency": Schema({"a": Key(str, required=True), "b": Key(str, required=True),
                       "at_least": Key(NUMBER, required=True, hint="a number > 0: A's latency >= this x B's"),
                       "datasets": Key((str, list), hint="a dataset, a list of datasets, or 'all' (default)")},
                      "A's median latency is >= x times B's: {a, b, at_least, datasets}"),
    "jaccard": Schema({"datasets": Key((str, list), required=True, hint="a dataset or a list of datasets"),
                       "groups": Key(dict, hint="a mapping of group names to lists of retrievers (default: the "
                                                "retrievers' families)"),
                       "fraction": Key(NUMBER, hint="the worst fraction of queries (default 0.1)"),
                       "resamples": Key(int, hint="label permutations (default 1000)")},
                      "failure-point Jaccard within groups exceeds that across: {datasets, groups}"),
}
COMMON = {"id": Key(str, nonempty=True), "text": Key(str, required=True, nonempty=True),
          "source": Key(str, required=True, nonempty=True, hint="the section or table of the paper it cites"),
          "alpha": Key(NUMBER, hint="a number in (0, 1)")}
SCHEMA = Schema({**COMMON, **{f: Key(dict, hint=f"a mapping ({FORMS[f].missing_hint})") for f in FORMS}},
                "each claim has text, source and one form: " + ", ".join(FORMS))


@dataclass(frozen=True)
class Target:
    """What a comparison is over: one dataset, one aggregate (irgrid.paper.AGGREGATES), or an equally weighted
    list of datasets; `measure` None means the dataset's first measure in the grid (the aggregate's own)."""

    names: tuple[str, ...]
    measure: str | None = None
    aggregate: bool = False

    @property
    def label(self) -> str:
        name = self.names[0] if len(self.names) == 1 else "[" + ", ".join(self.names) + "]"
        return name + (f" ({self.measure})" if self.measure else "")


@dataclass(frozen=True)
class Claim:
    id: str
    text: str
    source: str
    form: str
    args: Mapping[str, Any]
    alpha: float = DEFAULT_ALPHA
    targets: tuple[Target, ...] = field(default_factory=tuple)
    where: str = ""

    def config(self) -> dict[str, Any]:
        return {"id": self.id, "text": self.text, "source": self.source, "form": self.form,
                "alpha": self.alpha, self.form: dict(self.args)}


def parse(items: Any, systems: Sequence[str], datasets: Sequence[str], aggregates: Iterable[str],
          where: str = "<claims>") -> list[Claim]:
    """The validated claims of a `claims:` list. `systems`, `datasets` and `aggregates` are the names the claims
    may use (the experiment's); every error names the claim (`claims[i]`), the key, and how to fix it."""
    if items is None:
        return []
    if not isinstance(items, list):
        raise ClaimError(f"{where}: claims: expected a list of claims (each {{text, source, <form>: {{...}}}}), got "
                         f"{type(items).__name__}")
    names = _Names(list(systems), list(datasets), list(aggregates))
    out: list[Claim] = []
    seen: dict[str, int] = {}
    for i, item in enumerate(items):
        here = f"{where}: claims[{i}]"
        for form in FORMS:
            if isinstance(item, dict) and isinstance(item.get(form), dict) and True in item[form]:
                raise ClaimError(f"{here}: {form}: a key reads as `true`: YAML takes `on:`, `yes:` and `y:` as true; "
                                 f"name the dataset with `dataset:` (or `datasets:`)")
        SCHEMA.check(item, here, ClaimError)
        forms = [f for f in FORMS if f in item]
        if len(forms) != 1:
            raise ClaimError(f"{here}: give exactly one form ({', '.join(FORMS)}); got "
                             f"{forms or 'none'}")
        form = forms[0]
        body = FORMS[form].check(item[form], f"{here}: {form}", ClaimError)
        alpha = item.get("alpha", DEFAULT_ALPHA)
        if not 0 < float(alpha) < 1:
            raise ClaimError(f"{here}: alpha must be in (0, 1), e.g. 0.05; got {alpha!r}")
        cid = str(item.get("id") or f"claim-{i + 1}")
        if cid in seen:
            raise ClaimError(f"{here}: id {cid!r} is already claims[{seen[cid]}]'s; give each claim its own id")
        seen[cid] = i
        targets = _check_form(form, body, names, f"{here}: {form}")
        out.append(Claim(cid, str(item["text"]), str(item["source"]), form, dict(body), float(alpha),
                         tuple(targets), here))
    return out


@dataclass
class _Names:
    systems: list[str]
    datasets: list[str]
    aggregates: list[str]

    def system(self, name: Any, where: str) -> str:
        if name not in self.systems:
            raise ClaimError(f"{where}: {name!r} is not a retriever of this experiment; use one of its retrievers' "
                             f"names (their `as:` name for variants).{did_you_mean(str(name), self.systems)}")
        return str(name)

    def dataset(self, name: Any, where: str, aggregate: bool = True) -> bool:
        """Whether `name` is an aggregate (True) or a dataset (False); an error when it is neither."""
        if name in self.datasets:
            return False
        if aggregate and name in self.aggregates:
            return True
        known = self.datasets + (self.aggregates if aggregate else [])
        hint = did_you_mean(str(name), known)
        if not aggregate and name in self.aggregates:
            hint = (f" {name!r} is a group of datasets: use `beats_on_average: {{over: {name}}}` for a group, or "
                    f"name one of its datasets.")
        raise ClaimError(f"{where}: {name!r} is not a dataset of this experiment"
                         f"{' nor an aggregate' if aggregate else ''}; name one from its `datasets:`"
                         f"{' or ' + str(self.aggregates) if aggregate and self.aggregates else ''}.{hint}")

    def target(self, value: Any, where: str, measure: Any = None) -> Target:
        if isinstance(value, dict):
            unknown = sorted(str(k) for k in set(value) - {"dataset", "measure"})
            if unknown or not isinstance(value.get("dataset"), str):
                raise ClaimError(f"{where}: expected {TARGET_HINT}; got {value!r}")
            measure = value.get("measure", measure)
            value = value["dataset"]
        if not isinstance(value, str):
            raise ClaimError(f"{where}: expected {TARGET_HINT}; got {value!r}")
        if measure is not None and not isinstance(measure, str):
            raise ClaimError(f"{where}: measure must be a measure name such as nDCG@10; got {measure!r}")
        agg = self.dataset(value, where)
        if agg and measure is not None:
            raise ClaimError(f"{where}: {value!r} is an aggregate with its own measures; leave out 'measure'")
        return Target((value,), measure, agg)


def _positive_int(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ClaimError(f"{where}: expected a whole number >= 1, got {value!r}")
    return value


def _check_form(form: str, body: Mapping[str, Any], names: _Names, where: str) -> list[Target]:
    """The targets of a claim, after checking every name and number it holds."""
    for key in ("a", "b", "system"):
        if key in body:
            names.system(body[key], f"{where}: {key}")
    if "a" in body and body.get("a") == body.get("b"):
        raise ClaimError(f"{where}: a and b are both {body['a']!r}; a claim compares two different retrievers")
    for i, name in enumerate(body.get("among") or []):
        names.system(name, f"{where}: among[{i}]")
    measure = body.get("measure")
    if form == "beats":
        names.dataset(body["dataset"], f"{where}: dataset", aggregate=False)
        return [Target((body["dataset"],), measure)]
    if form == "best":
        targets = [names.target(t, f"{where}: datasets[{i}]") for i, t in enumerate(body["datasets"])]
        k = _positive_int(body.get("at_least", len(targets)), f"{where}: at_least")
        if k > len(targets):
            raise ClaimError(f"{where}: at_least {k} exceeds the {len(targets)} targets in 'datasets'")
        return targets
    if form in ("equivalent", "beats_on_average"):
        key = "dataset" if form == "equivalent" else "over"
        value = body[key]
        if form == "equivalent" and (isinstance(body["delta"], bool) or float(body["delta"]) <= 0):
            raise ClaimError(f"{where}: delta must be a number > 0 (on the measure's scale), got {body['delta']!r}")
        if isinstance(value, list):
            if not value:
                raise ClaimError(f"{where}: an empty list of datasets")
            for i, d in enumerate(value):
                names.dataset(d, f"{where}: [{i}]", aggregate=False)
            return [Target(tuple(value), measure)]
        return [names.target(value, f"{where}: {key}", measure)]
    if form == "rank":
        given = [k for k in ("rank", "top") if k in body]
        if len(given) != 1:
            raise ClaimError(f"{where}: give exactly one of 'rank' (exactly r-th) or 'top' (r-th or better)")
        _positive_int(body[given[0]], f"{where}: {given[0]}")
        return [names.target(body["dataset"], f"{where}: dataset")]
    if form == "latency":
        if isinstance(body["at_least"], bool) or float(body["at_least"]) <= 0:
            raise ClaimError(f"{where}: at_least must be a number > 0 (a ratio of latencies), got "
                             f"{body['at_least']!r}")
        on = body.get("datasets", "all")
        if on == "all":
            return []
        on = [on] if isinstance(on, str) else on
        for i, d in enumerate(on):
            names.dataset(d, f"{where}: datasets[{i}]", aggregate=False)
        return [Target(tuple(on))]
    if form == "jaccard":
        on = [body["datasets"]] if isinstance(body["datasets"], str) else body["datasets"]
        for i, d in enumerate(on):
            names.dataset(d, f"{where}: datasets[{i}]", aggregate=False)
        for g, members in (body.get("groups") or {}).items():
            if not isinstance(members, list) or len(members) < 1:
                raise ClaimError(f"{where}: groups: {g!r} must be a non-empty list of retrievers")
            for j, name in enumerate(members):
                names.system(name, f"{where}: groups: {g}[{j}]")
        if "groups" in body and len(body["groups"]) < 2:
            raise ClaimError(f"{where}: groups: give at least two groups (within vs across needs both)")
        frac = body.get("fraction", 0.1)
        if isinstance(frac, bool) or not 0 < float(frac) < 1:
            raise ClaimError(f"{where}: fraction must be in (0, 1), e.g. 0.1; got {frac!r}")
        if "resamples" in body and _positive_int(body["resamples"], f"{where}: resamples") < 100:
            raise ClaimError(f"{where}: resamples must be >= 100, got {body['resamples']!r}")
        return [Target(tuple(on))]
    raise AssertionError(form)  # FORMS and this function name the same forms
