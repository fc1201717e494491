"""The probe, end to end: datasets → assistant → verify → user turn → classify → aggregate → outputs.

``run_probe`` is the only function here with side effects worth knowing: it loads models, reads
and writes the store, and writes ``samples.jsonl``, ``summary.json`` and ``run.json`` in the run
directory. Each stage is a function in ``userturn.stages`` over plain records.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import logging
import os
import shutil
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from userturn import __version__, crashpoints
from userturn.analysis import add_rate_details, conditional_rows, effect_rows, effects_table, reference_rows
from userturn.backends import Backend, load_backend
from userturn.classifiers import Classifier, ClassifyInput, load_classifier
from userturn.config import RunConfig
from userturn.datasets import LoadOptions, load_items
from userturn.errors import ConfigError, OutputError, RunInterrupted, UserturnError
from userturn.models import resolve_model
from userturn.output import write_atomic, write_json, write_jsonl
from userturn.perturbations import check_all_options
from userturn.progress import Reporter
from userturn.records import Item, LabeledTurn, SamplingParams
from userturn.responses import apply_responses, read_responses
from userturn.stages.aggregate import markdown_table, summarize
from userturn.stages.assistant import run_assistant_stage
from userturn.stages.classify import run_classify_stage
from userturn.stages.user_turn import build_contexts, plan_samples, run_user_turn_stage
from userturn.stages.verify import run_verify_stage
from userturn.store import Store
from userturn.templates import user_header

log = logging.getLogger("userturn")


@dataclass
class RunResult:
    out: Path
    rows: list[dict[str, Any]]
    labeled: list[LabeledTurn]
    generated: int
    timings: dict[str, dict[str, float]] = field(default_factory=dict)
    retries: int = 0
    samples: int | None = None  # set when the run was already complete and nothing was loaded
    nothing_to_do: bool = False
    summary: dict[str, Any] = field(default_factory=dict)

    @property
    def sample_count(self) -> int:
        return self.samples if self.samples is not None else len(self.labeled)


def completion_check(config: RunConfig, items: list[Item]) -> dict[str, Any] | None:
    """What must be unchanged for a finished run to be finished for ``config`` too, found without loading a model.

    Returns None when that cannot be known cheaply (a hub model, a non-local backend, a GPU that
    ``device=auto`` might pick): the run then goes through the stages, reading the store.
    """
    if config.backend != "transformers":
        return None
    if config.device == "auto" and any(Path(p).exists() for p in ("/dev/nvidiactl", "/dev/kfd", "/dev/dxg")):
        return None
    revisions = {}
    for name in dict.fromkeys([config.model, config.effective_user_model]):
        try:
            revision = resolve_model(name).revision
        except UserturnError:
            return None
        if revision == "hub":
            return None
        revisions[name] = revision
    items_json = json.dumps([i.to_dict() for i in items], sort_keys=True, default=str, ensure_ascii=False)
    return {"items": hashlib.sha256(items_json.encode("utf-8")).hexdigest(), "models": revisions,
            "code": _code_digest()}


def _code_digest() -> str:
    """A hash of userturn's own source, so that a changed classifier or verifier is never skipped."""
    digest = hashlib.sha256()
    root = Path(__file__).resolve().parent
    for path in sorted(root.rglob("*")):
        if path.suffix in {".py", ".json", ".jsonl"} and path.is_file():
            digest.update(str(path.relative_to(root)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def finished_run(config: RunConfig, items: list[Item], out: Path) -> RunResult | None:
    """The result of the complete run of ``config`` in ``out``, or None when anything is missing or changed."""
    try:
        meta = json.loads((out / "run.json").read_text(encoding="utf-8"))
        summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    if meta.get("status") != "complete" or meta.get("fingerprint") != config.fingerprint():
        return None
    if not all((out / name).is_file() for name in ("samples.jsonl", "summary.md")) or not meta.get("completion"):
        return None
    if meta["completion"] != completion_check(config, items):
        return None
    if summary.get("generated") != 0:  # what this run generated, as a full pass over the store would say
        summary["generated"] = 0
        write_json(out / "summary.json", summary)
    return RunResult(out=out, rows=summary.get("rows", []), labeled=[], generated=0,
                     samples=int(meta.get("samples", 0)), nothing_to_do=True, summary=summary)


def choose_run_dir(config: RunConfig, runs_root: Path = Path("runs")) -> tuple[Path, bool]:
    """The run directory: ``--out`` if given, else an earlier run of the same configuration, else a new one.

    Returns ``(path, reused)``. Reusing a same-fingerprint run is what makes "run the same command
    again" resume a killed run without the user having to find its folder.
    """
    if config.out is not None:
        return config.out, (config.out / "run.json").is_file()
    fingerprint = config.fingerprint()
    if runs_root.is_dir():
        for candidate in sorted(runs_root.iterdir(), reverse=True):
            meta = candidate / "run.json"
            if meta.is_file():
                try:
                    if json.loads(meta.read_text()).get("fingerprint") == fingerprint:
                        return candidate, True
                except (OSError, json.JSONDecodeError):
                    continue
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    path = runs_root / stamp
    suffix = 1
    while path.exists():
        suffix += 1
        path = runs_root / f"{stamp}-{suffix}"
    return path, False


MIN_FREE_BYTES = 8 * 1024 * 1024
"""Below this much free space on the output filesystem a run refuses to start (checked before any work)."""


def _check_writable(out: Path) -> None:
    try:
        out.mkdir(parents=True, exist_ok=True)
        # A unique name: two processes sharing one output directory must not remove each other's probe.
        with tempfile.NamedTemporaryFile(dir=out, prefix=".write-test-"):
            pass
        free = shutil.disk_usage(out).free
    except OSError as exc:
        raise OutputError(f"cannot write to the output directory {out}: {exc.strerror or exc}") from exc
    if free < MIN_FREE_BYTES:
        raise OutputError(f"only {free // 1024} KiB free on the filesystem of the output directory {out}; "
                          f"userturn needs at least {MIN_FREE_BYTES // (1024 * 1024)} MiB: free space or use another --out")


def backend_options(config: RunConfig) -> dict[str, Any]:
    """Keyword options for the chosen backend: the transformers engine takes the local-compute flags."""
    options: dict[str, Any] = {}
    if config.backend == "transformers":
        options.update(device=config.device, dtype=config.dtype, batch_size=config.batch_size,
                       threads=config.threads, trust_remote_code=config.trust_remote_code)
    elif config.backend == "llamacpp" and config.threads:
        options.update(threads=config.threads)
    options.update(config.backend_options)
    return options


def load_run_items(config: RunConfig) -> list[Item]:
    """Every item of every configured dataset, ``limit`` per dataset."""
    items: list[Item] = []
    for name in config.datasets:
        options = LoadOptions(data_dir=config.data_dir, path=config.dataset_path, fields=dict(config.fields),
                              extra={"cut": config.cut})
        loaded = load_items(name, options, limit=config.limit)
        ids = [i.id for i in loaded]
        if len(ids) != len(set(ids)):
            dup = next(i for i in ids if ids.count(i) > 1)
            raise ConfigError(f"dataset '{name}' has duplicate item id '{dup}'; ids must be unique")
        items.extend(loaded)
    return items


def _thinking(config: RunConfig) -> bool | None:
    return {"auto": None, "on": True, "off": False}[config.thinking]


class _LogFileHandler(logging.FileHandler):
    """A log file that stops quietly when it cannot be written (full disk): the run's own errors say why."""

    def handleError(self, record: logging.LogRecord) -> None:  # noqa: N802 (logging's name)
        self.setLevel(logging.CRITICAL + 1)


def _setup_log(out: Path) -> logging.Handler:
    handler = _LogFileHandler(out / "userturn.log", encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.setLevel(logging.INFO)
    root = logging.getLogger()
    root.addHandler(handler)
    if root.level > logging.INFO or root.level == logging.NOTSET:
        root.setLevel(logging.INFO)
    logging.captureWarnings(True)
    return handler


def run_probe(config: RunConfig, reporter: Reporter | None = None, runs_root: Path = Path("runs")) -> RunResult:
    """Run the whole probe for ``config`` and write the outputs; returns the summary rows and samples."""
    reporter = reporter or Reporter(quiet=True)
    check_all_options(config.perturbations, config.perturbation_options)  # typos fail before any model loads
    load_classifier(config.classifier)
    items = load_run_items(config)
    if not items:
        raise ConfigError("no items to run: the dataset is empty or --limit is 0")
    if config.responses is not None:
        items, missing = apply_responses(items, read_responses(config.responses), config.responses)
        if missing:
            reporter.info(f"{len(missing)} item(s) have no response in {config.responses} and are left out "
                          f"(first: {missing[0].dataset}/{missing[0].id})")
    out, reused = choose_run_dir(config, runs_root)
    if reused:
        finished = finished_run(config, items, out)
        if finished is not None:
            reporter.info(f"nothing to do: {out} already holds the complete results of this configuration")
            return finished
    assistant_backend, user_backend = load_backends(config, reporter)
    # A template that cannot open a user turn fails here, before any generation, not after the assistant stage.
    user_header(user_backend.tokenizer, thinking=_thinking(config), model_name=user_backend.identity.name)
    _check_writable(out)
    try:
        handler = _setup_log(out)
    except OSError as exc:
        raise OutputError(f"cannot write the log file in {out}: {exc.strerror or exc}") from exc
    try:
        return _run(config, items, out, reused, reporter, assistant_backend, user_backend)
    except KeyboardInterrupt as exc:
        raise RunInterrupted(out) from exc
    finally:
        logging.getLogger().removeHandler(handler)
        handler.close()


def load_backends(config: RunConfig, reporter: Reporter) -> tuple[Backend, Backend]:
    """The assistant model's backend and the user model's (the same object when the models are the same)."""
    options = backend_options(config)
    reporter.info(f"loading model {config.model} ({config.backend})")
    assistant_backend: Backend = load_backend(config.backend, config.model, **options)
    user_backend = assistant_backend
    if config.user_model and config.user_model != config.model:
        reporter.info(f"loading user model {config.user_model}")
        user_backend = load_backend(config.backend, config.user_model, **options)
    return assistant_backend, user_backend


def _run(config: RunConfig, items: list[Item], out: Path, reused: bool, reporter: Reporter,
         assistant_backend: Backend, user_backend: Backend) -> RunResult:
    if reused:
        reporter.info(f"resuming in {out} (same configuration); stored generations are reused")
    store = Store(out / "store.sqlite")  # before anything is written: a store we cannot use stops the run here
    meta = {"userturn_version": __version__, "fingerprint": config.fingerprint(),
            "config": config.model_dump(mode="json"), "status": "running",
            "started": _dt.datetime.now().isoformat(timespec="seconds")}
    try:
        write_json(out / "run.json", meta)
        return _stages(config, items, out, reporter, assistant_backend, user_backend, store, meta)
    except KeyboardInterrupt:
        meta.update(status="interrupted", stopped=_dt.datetime.now().isoformat(timespec="seconds"))
        try:
            write_json(out / "run.json", meta)
        except OutputError:
            pass
        raise
    finally:
        store.close()


def _stages(config: RunConfig, items: list[Item], out: Path, reporter: Reporter, assistant_backend: Backend,
            user_backend: Backend, store: Store, meta: dict[str, Any]) -> RunResult:
    classifier = load_classifier(config.classifier)
    thinking = _thinking(config)
    chunk = config.batch_size if config.batch_size > 0 else 64  # rows per commit; also the largest batch
    log.info("run %s: %d items, model %s, user model %s", out, len(items), config.model,
             config.effective_user_model)

    params = SamplingParams(temperature=config.assistant_temperature, top_p=config.top_p,
                            max_tokens=config.assistant_max_new_tokens, seed=config.seed)
    with reporter.stage("assistant", len([i for i in items if i.given_response is None])) as hook:
        turns = run_assistant_stage(items, assistant_backend, store, params=params, thinking=thinking,
                                    chunk_rows=chunk, progress=hook)
    with reporter.stage("verify", len(turns)) as hook:
        scored = run_verify_stage(turns)
        hook(len(scored), 0)
    if config.responses is not None:  # the assistant is the file, not the loaded model
        label = f"file:{config.responses.name}"
        scored = [replace(s, turn=replace(s.turn, model=label)) if not s.turn.generated else s for s in scored]
    contexts = build_contexts(scored, config.perturbations, config.perturbation_options, config.seed)
    planned = len(contexts) * len(plan_samples(config.temperatures, config.samples))
    with reporter.stage("user turn", planned, unit="turns") as hook:
        user_turns = run_user_turn_stage(
            contexts, user_backend, store, temperatures=config.temperatures, samples=config.samples,
            top_p=config.top_p, max_new_tokens=config.user_max_new_tokens, run_seed=config.seed,
            thinking=thinking, chunk_rows=chunk, progress=hook)
    special = list(getattr(user_backend.tokenizer, "all_special_tokens", []) or [])
    with reporter.stage("classify", len(user_turns), unit="turns") as hook:
        labeled = run_classify_stage(user_turns, classifier, special)
        hook(len(labeled), 0)
    crashpoints.reached("classify", len(labeled))
    samples = [lt.to_sample() for lt in labeled]
    attach_reference_labels(samples, labeled, classifier, special)
    rows = add_rate_details(summarize(labeled), samples, seed=config.seed)
    write_jsonl(out / "samples.jsonl", samples)
    crashpoints.reached("samples.jsonl")
    retries = sum(int(getattr(b, "retries", 0) or 0) for b in {id(assistant_backend): assistant_backend,
                                                                 id(user_backend): user_backend}.values())
    if retries:
        reporter.info(f"the backend retried {retries} failed request(s); every sample is accounted for")
    summary = {"userturn_version": __version__, "config": config.model_dump(mode="json"), "rows": rows,
               **analysis_tables(samples, seed=config.seed),
               "generated": store.inserted, "backend_retries": retries, "timing": reporter.timings}
    write_json(out / "summary.json", summary)
    crashpoints.reached("summary.json")
    meta.update(status="complete", finished=_dt.datetime.now().isoformat(timespec="seconds"),
                generated=store.inserted, samples=len(labeled), backend_retries=retries,
                completion=completion_check(config, items))
    write_json(out / "run.json", meta)
    markdown = markdown_table(rows) + "\n"
    if summary["effects"]:
        markdown += "\n" + effects_table(summary["effects"]) + "\n"
    write_atomic(out / "summary.md", markdown)
    log.info("run complete: %d samples, %d new generations", len(labeled), store.inserted)
    generated = store.inserted
    if os.environ.get("USERTURN_KEEP_MODELS") != "1":
        for backend in {id(assistant_backend): assistant_backend, id(user_backend): user_backend}.values():
            backend.close()
    return RunResult(out=out, rows=rows, labeled=labeled, generated=generated, timings=reporter.timings,
                     retries=retries, summary=summary)


def attach_reference_labels(samples: list[dict[str, Any]], labeled: list[LabeledTurn], classifier: Classifier,
                            special: list[str]) -> None:
    """Add ``reference_label`` to every sample: the run's classifier's label of the item's human next
    turn in the control context (None where the dataset has no reference turn). One call per item."""
    wanted: dict[tuple[str, str], ClassifyInput] = {}
    for lt in labeled:
        turn = lt.user_turn.context.scored.turn
        reference = turn.item.reference_user_turn
        if reference and (turn.item.dataset, turn.item.id) not in wanted:
            wanted[(turn.item.dataset, turn.item.id)] = ClassifyInput(
                query=turn.item.query, response=turn.response_visible, user_turn=reference,
                special_tokens=tuple(special))
    keys = list(wanted)
    labels = dict(zip(keys, classifier.classify([wanted[k] for k in keys]), strict=True)) if keys else {}
    for sample in samples:
        label = labels.get((sample["dataset"], sample["item_id"]))
        sample["reference_label"] = label.label if label else None


def analysis_tables(samples: list[dict[str, Any]], *, seed: int) -> dict[str, list[dict[str, Any]]]:
    """The tables summary.json carries next to ``rows``: perturbation effects, follow-up rate by
    correctness, and agreement with the human reference (empty lists where they do not apply)."""
    embed = None
    if any(s.get("reference_user_turn") for s in samples):
        from userturn.embeddings import load_embedder

        embed = load_embedder()
    return {
        "effects": effect_rows(samples, seed=seed),
        "conditional": conditional_rows(samples, seed=seed),
        "reference": reference_rows(samples, embed=embed, seed=seed),
    }
