"""Analysis tables over ``samples.jsonl`` rows: pure functions over plain dicts.

The pipeline calls them on the samples it just wrote, and ``userturn compare`` / ``userturn sweep``
call them on files, so that every number in a table can be recomputed from the samples alone.
A *sample* is one dict as written by :meth:`userturn.records.LabeledTurn.to_sample`; the fields
used here are ``model``, ``user_model``, ``dataset``, ``perturbation``, ``temperature``,
``item_id``, ``label``, ``correct`` and, for the reference table, ``reference_user_turn``,
``reference_label`` and ``user_turn``.

Turns without one of the seven labels (a judge that failed) are left out of every rate, as in
the summary rows. Every bootstrap is seeded from the run seed and the row's own key, so a row's interval does not
depend on which other rows are in the table.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import combinations
from typing import Any

from userturn.perturbations import expected_direction
from userturn.records import LABELS
from userturn.stats import (
    DEFAULT_BOOTSTRAP,
    any_in_k_rate,
    clustered_rate_interval,
    correlation_interval,
    effect_verdict,
    group_difference,
    lexical_similarity,
    mean_interval,
    paired_difference,
    pearson,
    spearman,
)

Sample = Mapping[str, Any]
GroupKey = tuple[str, str, str, str, float]
CONTROL = "none"
FOLLOW_UP = "follow_up"


def row_seed(seed: int, *parts: object) -> int:
    """A bootstrap seed for one row: stable across runs and independent of the other rows."""
    text = "|".join([str(seed), *(str(p) for p in parts)])
    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)


def labelled(samples: Iterable[Sample]) -> list[Sample]:
    """The samples that carry one of the seven labels (not a judge failure)."""
    return [s for s in samples if s["label"] in LABELS]


def group_key(sample: Sample) -> GroupKey:
    return (sample["model"], sample.get("user_model") or sample["model"], sample["dataset"],
            sample["perturbation"], float(sample["temperature"]))


def item_counts(samples: Iterable[Sample], success: Callable[[Sample], bool] | None = None
                ) -> dict[GroupKey, dict[str, tuple[int, int]]]:
    """Per group (model, user model, dataset, perturbation, temperature), per item id:
    ``(successes, samples)``, where a success is a ``follow_up`` label unless ``success`` says otherwise."""
    is_success = success or (lambda s: s["label"] == FOLLOW_UP)
    groups: dict[GroupKey, dict[str, list[int]]] = {}
    for s in labelled(samples):
        counts = groups.setdefault(group_key(s), {}).setdefault(str(s["item_id"]), [0, 0])
        counts[0] += int(bool(is_success(s)))
        counts[1] += 1
    return {k: {i: (c[0], c[1]) for i, c in v.items()} for k, v in groups.items()}


def k_values(samples_per_item: int) -> list[int]:
    """The k of the "any follow-up in k" rows: 1, the powers of two below n, and n itself."""
    ks = {1, samples_per_item}
    power = 2
    while power < samples_per_item:
        ks.add(power)
        power *= 2
    return sorted(k for k in ks if k >= 1)


def rate_details(samples: Sequence[Sample], *, n_boot: int = DEFAULT_BOOTSTRAP, seed: int = 0
                 ) -> dict[GroupKey, dict[str, Any]]:
    """Per group: the item-clustered bootstrap interval of the follow-up rate and, where items have
    more than one sample, the unbiased "any follow-up in k" rates for :func:`k_values` of the
    smallest per-item sample count."""
    details: dict[GroupKey, dict[str, Any]] = {}
    for key, items in item_counts(samples).items():
        counts = list(items.values())
        estimate = clustered_rate_interval(counts, n_boot=n_boot, seed=row_seed(seed, *key))
        entry: dict[str, Any] = {"item_ci_low": estimate.low, "item_ci_high": estimate.high}
        smallest = min(n for _, n in counts)
        if smallest > 1:
            entry["any_follow_up"] = [
                {"k": k, **any_in_k_rate(counts, k, n_boot=n_boot, seed=row_seed(seed, *key, k)).as_dict("")}
                for k in k_values(smallest)
            ]
        details[key] = entry
    return details


def add_rate_details(rows: Sequence[dict[str, Any]], samples: Sequence[Sample], *,
                     n_boot: int = DEFAULT_BOOTSTRAP, seed: int = 0) -> list[dict[str, Any]]:
    """Summary rows (as built by the aggregate stage) with :func:`rate_details` merged in."""
    details = rate_details(samples, n_boot=n_boot, seed=seed)
    merged = []
    for row in rows:
        key = (row["model"], row["user_model"], row["dataset"], row["perturbation"], float(row["temperature"]))
        merged.append({**row, **details.get(key, {})})
    return merged


def effect_rows(samples: Sequence[Sample], *, expected: Callable[[str], str] = expected_direction,
                n_boot: int = DEFAULT_BOOTSTRAP, seed: int = 0) -> list[dict[str, Any]]:
    """Each perturbation's effect on the follow-up rate against the control ``none``.

    One row per model × user model × dataset × temperature × perturbation (other than ``none``)
    whose group also has a control. The effect is the pooled follow-up rate under the
    perturbation minus the control's, on the items both arms have, with a paired item bootstrap
    interval; ``verdict`` checks the interval against the declared direction.
    """
    counts = item_counts(samples)
    rows = []
    for key, treated in counts.items():
        model, user_model, dataset, perturbation, temperature = key
        if perturbation == CONTROL:
            continue
        control = counts.get((model, user_model, dataset, CONTROL, temperature))
        if control is None:
            continue
        shared = sorted(set(control) & set(treated))
        if not shared:
            continue
        estimate = paired_difference([control[i] for i in shared], [treated[i] for i in shared], n_boot=n_boot,
                                     seed=row_seed(seed, *key))
        direction = expected(perturbation)
        control_rate = sum(control[i][0] for i in shared) / max(1, sum(control[i][1] for i in shared))
        rate = sum(treated[i][0] for i in shared) / max(1, sum(treated[i][1] for i in shared))
        rows.append({
            "model": model, "user_model": user_model, "dataset": dataset, "temperature": temperature,
            "perturbation": perturbation, "expected": direction, "effect": estimate.value,
            "ci_low": estimate.low, "ci_high": estimate.high,
            "verdict": effect_verdict(direction, estimate.low, estimate.high),
            "control_rate": control_rate, "rate": rate, "n_items": len(shared),
        })
    rows.sort(key=lambda r: (r["model"], r["user_model"], r["dataset"], r["temperature"], r["perturbation"]))
    return rows


def conditional_rows(samples: Sequence[Sample], *, n_boot: int = DEFAULT_BOOTSTRAP, seed: int = 0
                     ) -> list[dict[str, Any]]:
    """Follow-up rate conditional on the assistant answer being correct vs wrong.

    One row per group that has at least one verified item; items without a verdict are left out.
    ``difference`` is rate(correct) − rate(wrong) with a bootstrap that resamples items within each
    group; it is None unless both groups have items.
    """
    correctness: dict[tuple[GroupKey, str], bool] = {}
    for s in samples:
        if s.get("correct") is not None:
            correctness[(group_key(s), str(s["item_id"]))] = bool(s["correct"])
    rows = []
    for key, items in item_counts(samples).items():
        right = [c for i, c in items.items() if correctness.get((key, i)) is True]
        wrong = [c for i, c in items.items() if correctness.get((key, i)) is False]
        if not right and not wrong:
            continue
        rate_right = clustered_rate_interval(right, n_boot=n_boot, seed=row_seed(seed, *key, "correct"))
        rate_wrong = clustered_rate_interval(wrong, n_boot=n_boot, seed=row_seed(seed, *key, "wrong"))
        difference = group_difference(right, wrong, n_boot=n_boot, seed=row_seed(seed, *key, "difference")) \
            if right and wrong else None
        model, user_model, dataset, perturbation, temperature = key
        rows.append({
            "model": model, "user_model": user_model, "dataset": dataset, "perturbation": perturbation,
            "temperature": temperature,
            "correct_rate": rate_right.value, "correct_ci_low": rate_right.low, "correct_ci_high": rate_right.high,
            "correct_items": len(right),
            "wrong_rate": rate_wrong.value, "wrong_ci_low": rate_wrong.low, "wrong_ci_high": rate_wrong.high,
            "wrong_items": len(wrong),
            "difference": difference.value if difference else None,
            "difference_ci_low": difference.low if difference else None,
            "difference_ci_high": difference.high if difference else None,
        })
    rows.sort(key=lambda r: (r["model"], r["user_model"], r["dataset"], r["perturbation"], r["temperature"]))
    return rows


Embedder = Callable[[Sequence[str]], Sequence[Sequence[float]]]


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    na = sum(x * x for x in a) ** 0.5
    nb = sum(y * y for y in b) ** 0.5
    return dot / (na * nb) if na > 0 and nb > 0 else 0.0


def reference_rows(samples: Sequence[Sample], *, embed: Embedder | None = None, n_boot: int = DEFAULT_BOOTSTRAP,
                   seed: int = 0) -> list[dict[str, Any]]:
    """Agreement of the generated user turns with the human reference turn, for the control only.

    Per group with reference turns: ``label_agreement`` (share of generated turns whose label equals
    the reference turn's label, item-clustered interval), ``reference_follow_up_rate`` (share of
    items whose reference is a follow-up), ``lexical_similarity`` (unigram F1, averaged per item,
    bootstrap over items) and, when ``embed`` is given, ``semantic_similarity`` (cosine of sentence
    embeddings, same averaging).
    """
    usable = [s for s in labelled(samples) if s["perturbation"] == CONTROL and s.get("reference_user_turn")]
    by_group: dict[GroupKey, list[Sample]] = {}
    for s in usable:
        by_group.setdefault(group_key(s), []).append(s)
    vectors: dict[str, Sequence[float]] = {}
    if embed is not None and usable:
        texts = sorted({s["user_turn"] for s in usable} | {s["reference_user_turn"] for s in usable})
        vectors = dict(zip(texts, embed(texts), strict=True))
    rows = []
    for key, members in by_group.items():
        with_reference = [s for s in members if s.get("reference_label")]
        agreement = item_counts(with_reference, lambda s: s["label"] == s["reference_label"]).get(key, {})
        agree = clustered_rate_interval(list(agreement.values()), n_boot=n_boot, seed=row_seed(seed, *key, "agree"))
        per_item: dict[str, list[float]] = {}
        semantic: dict[str, list[float]] = {}
        reference_label: dict[str, str] = {}
        for s in members:
            item = str(s["item_id"])
            per_item.setdefault(item, []).append(lexical_similarity(s["user_turn"], s["reference_user_turn"]))
            if vectors:
                semantic.setdefault(item, []).append(_cosine(vectors[s["user_turn"]],
                                                             vectors[s["reference_user_turn"]]))
            if s.get("reference_label"):
                reference_label[item] = s["reference_label"]
        lexical = mean_interval([sum(v) / len(v) for v in per_item.values()], n_boot=n_boot,
                                seed=row_seed(seed, *key, "lexical"))
        model, user_model, dataset, perturbation, temperature = key
        row = {
            "model": model, "user_model": user_model, "dataset": dataset, "temperature": temperature,
            "n_items": len(per_item), "n": len(members),
            "label_agreement": agree.value, "agreement_ci_low": agree.low, "agreement_ci_high": agree.high,
            "reference_follow_up_rate": (sum(1 for v in reference_label.values() if v == FOLLOW_UP)
                                         / len(reference_label)) if reference_label else None,
            "lexical_similarity": lexical.value, "lexical_ci_low": lexical.low, "lexical_ci_high": lexical.high,
        }
        if semantic:
            sem = mean_interval([sum(v) / len(v) for v in semantic.values()], n_boot=n_boot,
                                seed=row_seed(seed, *key, "semantic"))
            row.update(semantic_similarity=sem.value, semantic_ci_low=sem.low, semantic_ci_high=sem.high)
        rows.append(row)
    rows.sort(key=lambda r: (r["model"], r["user_model"], r["dataset"], r["temperature"]))
    return rows


def _per_item(samples: Sequence[Sample], dataset: str, temperature: float) -> tuple[dict[str, tuple[int, int]],
                                                                                    dict[str, bool]]:
    """Follow-up counts and verdicts per item of one run's control samples at one dataset × temperature."""
    counts: dict[str, list[int]] = {}
    verdicts: dict[str, bool] = {}
    for s in labelled(samples):
        if s["perturbation"] != CONTROL or s["dataset"] != dataset or float(s["temperature"]) != temperature:
            continue
        item = str(s["item_id"])
        c = counts.setdefault(item, [0, 0])
        c[0] += int(s["label"] == FOLLOW_UP)
        c[1] += 1
        if s.get("correct") is not None:
            verdicts[item] = bool(s["correct"])
    return {i: (c[0], c[1]) for i, c in counts.items()}, verdicts


def _cells(runs: Mapping[str, Sequence[Sample]]) -> list[tuple[str, float]]:
    cells = {(s["dataset"], float(s["temperature"])) for samples in runs.values() for s in samples
             if s["perturbation"] == CONTROL}
    return sorted(cells)


def decoupling_rows(runs: Mapping[str, Sequence[Sample]], *, n_boot: int = DEFAULT_BOOTSTRAP, seed: int = 0
                    ) -> list[dict[str, Any]]:
    """Across models: correlation of task accuracy with follow-up rate, per dataset × temperature.

    Args:
        runs: samples per model label (one run each; the label is what the table shows).

    Only the control (``none``) is used, and only items every run has, so that all models are
    scored on the same items. Spearman's rho and Pearson's r come with a bootstrap interval over
    models (none below three models, see :func:`userturn.stats.correlation_interval`); each row
    lists every model's accuracy and follow-up rate. Datasets without a verifier have no row.
    """
    rows = []
    for dataset, temperature in _cells(runs):
        per_run = {label: _per_item(samples, dataset, temperature) for label, samples in runs.items()}
        per_run = {label: v for label, v in per_run.items() if v[0]}
        if not per_run:
            continue
        shared = set.intersection(*(set(counts) for counts, _ in per_run.values()))
        models = []
        for label, (counts, verdicts) in sorted(per_run.items()):
            scored = [verdicts[i] for i in shared if i in verdicts]
            follow = sum(counts[i][0] for i in shared)
            total = sum(counts[i][1] for i in shared)
            models.append({"model": label, "accuracy": sum(scored) / len(scored) if scored else None,
                           "accuracy_n": len(scored), "follow_up_rate": follow / total if total else None})
        usable = [m for m in models if m["accuracy"] is not None and m["follow_up_rate"] is not None]
        if not usable:
            continue
        x = [m["accuracy"] for m in usable]
        y = [m["follow_up_rate"] for m in usable]
        rho = correlation_interval(x, y, spearman, n_boot=n_boot, seed=row_seed(seed, dataset, temperature, "s"))
        r = correlation_interval(x, y, pearson, n_boot=n_boot, seed=row_seed(seed, dataset, temperature, "p"))
        rows.append({
            "dataset": dataset, "temperature": temperature, "n_models": len(usable), "n_items": len(shared),
            "spearman": rho.value, "spearman_ci_low": rho.low, "spearman_ci_high": rho.high,
            "pearson": r.value, "pearson_ci_low": r.low, "pearson_ci_high": r.high,
            "models": models,
        })
    return rows


def paired_run_rows(first: Sequence[Sample], second: Sequence[Sample], *, n_boot: int = DEFAULT_BOOTSTRAP,
                    seed: int = 0, perturbations: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Two runs side by side on their shared items: follow-up rate and accuracy of each, and the
    differences (second − first) with paired item bootstrap intervals.

    One row per dataset × perturbation × temperature present in both runs (only ``perturbations``
    when given). Accuracy rows use the items both runs verified.
    """
    def index(samples: Sequence[Sample]) -> dict[tuple[str, str, float], tuple[dict[str, list[int]],
                                                                                dict[str, bool]]]:
        table: dict[tuple[str, str, float], tuple[dict[str, list[int]], dict[str, bool]]] = {}
        for s in labelled(samples):
            key = (s["dataset"], s["perturbation"], float(s["temperature"]))
            counts, verdicts = table.setdefault(key, ({}, {}))
            c = counts.setdefault(str(s["item_id"]), [0, 0])
            c[0] += int(s["label"] == FOLLOW_UP)
            c[1] += 1
            if s.get("correct") is not None:
                verdicts[str(s["item_id"])] = bool(s["correct"])
        return table

    a, b = index(first), index(second)
    rows = []
    for key in sorted(set(a) & set(b)):
        dataset, perturbation, temperature = key
        if perturbations is not None and perturbation not in perturbations:
            continue
        (ca, va), (cb, vb) = a[key], b[key]
        shared = sorted(set(ca) & set(cb))
        if not shared:
            continue
        left = [(ca[i][0], ca[i][1]) for i in shared]
        right = [(cb[i][0], cb[i][1]) for i in shared]
        diff = paired_difference(left, right, n_boot=n_boot, seed=row_seed(seed, *key, "rate"))
        verified = [i for i in shared if i in va and i in vb]
        acc_diff = paired_difference([(int(va[i]), 1) for i in verified], [(int(vb[i]), 1) for i in verified],
                                     n_boot=n_boot, seed=row_seed(seed, *key, "accuracy")) if verified else None
        rows.append({
            "dataset": dataset, "perturbation": perturbation, "temperature": temperature, "n_items": len(shared),
            "rate_a": sum(x for x, _ in left) / max(1, sum(n for _, n in left)),
            "rate_b": sum(x for x, _ in right) / max(1, sum(n for _, n in right)),
            "rate_difference": diff.value, "rate_ci_low": diff.low, "rate_ci_high": diff.high,
            "accuracy_a": sum(va[i] for i in verified) / len(verified) if verified else None,
            "accuracy_b": sum(vb[i] for i in verified) / len(verified) if verified else None,
            "accuracy_difference": acc_diff.value if acc_diff else None,
            "accuracy_ci_low": acc_diff.low if acc_diff else None,
            "accuracy_ci_high": acc_diff.high if acc_diff else None,
            "accuracy_items": len(verified),
        })
    return rows


def model_pair_rows(runs: Mapping[str, Sequence[Sample]], *, n_boot: int = DEFAULT_BOOTSTRAP, seed: int = 0
                    ) -> list[dict[str, Any]]:
    """For every pair of runs, :func:`paired_run_rows` on the control: does accuracy move while the
    follow-up rate does not (or the reverse)? This is the decoupling evidence with two models,
    where a correlation across models says nothing."""
    rows = []
    for first, second in combinations(sorted(runs), 2):
        for row in paired_run_rows(runs[first], runs[second], n_boot=n_boot, seed=seed, perturbations=[CONTROL]):
            rows.append({"model_a": first, "model_b": second, **row})
    return rows


# --- text tables ----------------------------------------------------------------------------------

def _num(value: float | None, digits: int = 3, signed: bool = False) -> str:
    if value is None:
        return "–"
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


def _interval(low: float | None, high: float | None, signed: bool = False) -> str:
    if low is None or high is None:
        return "[–]"
    return f"[{_num(low, signed=signed)}, {_num(high, signed=signed)}]"


def _model(row: Mapping[str, Any]) -> str:
    return row["model"] if row["model"] == row["user_model"] else f"{row['model']} → {row['user_model']}"


def effects_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """Markdown table of :func:`effect_rows`."""
    lines = ["| model | dataset | T | perturbation | items | control | rate | effect [95% CI] | expected | verdict |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {_model(r)} | {r['dataset']} | {r['temperature']:g} | {r['perturbation']} | {r['n_items']} | "
                     f"{_num(r['control_rate'])} | {_num(r['rate'])} | {_num(r['effect'], signed=True)} "
                     f"{_interval(r['ci_low'], r['ci_high'], signed=True)} | {r['expected']} | {r['verdict']} |")
    return "\n".join(lines)


def conditional_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """Markdown table of :func:`conditional_rows`."""
    lines = ["| model | dataset | perturbation | T | follow-up if correct | follow-up if wrong | difference [95% CI] |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(
            f"| {_model(r)} | {r['dataset']} | {r['perturbation']} | {r['temperature']:g} | "
            f"{_num(r['correct_rate'])} {_interval(r['correct_ci_low'], r['correct_ci_high'])} (n={r['correct_items']}) | "
            f"{_num(r['wrong_rate'])} {_interval(r['wrong_ci_low'], r['wrong_ci_high'])} (n={r['wrong_items']}) | "
            f"{_num(r['difference'], signed=True)} "
            f"{_interval(r['difference_ci_low'], r['difference_ci_high'], signed=True)} |")
    return "\n".join(lines)


def reference_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """Markdown table of :func:`reference_rows`."""
    lines = ["| model | dataset | T | items | label agreement [95% CI] | reference follow-up | lexical F1 | semantic |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        semantic = f"{_num(r.get('semantic_similarity'))} {_interval(r.get('semantic_ci_low'), r.get('semantic_ci_high'))}" \
            if "semantic_similarity" in r else "–"
        lines.append(
            f"| {_model(r)} | {r['dataset']} | {r['temperature']:g} | {r['n_items']} | "
            f"{_num(r['label_agreement'])} {_interval(r['agreement_ci_low'], r['agreement_ci_high'])} | "
            f"{_num(r['reference_follow_up_rate'])} | "
            f"{_num(r['lexical_similarity'])} {_interval(r['lexical_ci_low'], r['lexical_ci_high'])} | {semantic} |")
    return "\n".join(lines)


def decoupling_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """Markdown table of :func:`decoupling_rows`, one line per dataset × temperature."""
    lines = ["| dataset | T | models | items | Spearman [95% CI] | Pearson [95% CI] | accuracy / follow-up per model |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        per_model = "; ".join(f"{m['model']}: {_num(m['accuracy'], 2)} / {_num(m['follow_up_rate'], 2)}"
                              for m in r["models"])
        lines.append(
            f"| {r['dataset']} | {r['temperature']:g} | {r['n_models']} | {r['n_items']} | "
            f"{_num(r['spearman'], 2, signed=True)} {_interval(r['spearman_ci_low'], r['spearman_ci_high'], True)} | "
            f"{_num(r['pearson'], 2, signed=True)} {_interval(r['pearson_ci_low'], r['pearson_ci_high'], True)} | "
            f"{per_model} |")
    return "\n".join(lines)


def comparison_table(rows: Sequence[Mapping[str, Any]], *, label_a: str = "A", label_b: str = "B",
                     with_models: bool = False) -> str:
    """Markdown table of :func:`paired_run_rows` (or :func:`model_pair_rows` with ``with_models``)."""
    head = "| dataset | perturbation | T | items | follow-up {a} → {b} | Δ follow-up [95% CI] | accuracy {a} → {b} | " \
           "Δ accuracy [95% CI] |"
    lead = "| A | B " if with_models else ""
    lines = [lead + head.format(a=label_a, b=label_b), ("|---" * (8 + (2 if with_models else 0))) + "|"]
    for r in rows:
        models = f"| {r['model_a']} | {r['model_b']} " if with_models else ""
        lines.append(
            f"{models}| {r['dataset']} | {r['perturbation']} | {r['temperature']:g} | {r['n_items']} | "
            f"{_num(r['rate_a'])} → {_num(r['rate_b'])} | {_num(r['rate_difference'], signed=True)} "
            f"{_interval(r['rate_ci_low'], r['rate_ci_high'], True)} | "
            f"{_num(r['accuracy_a'], 2)} → {_num(r['accuracy_b'], 2)} | "
            f"{_num(r['accuracy_difference'], signed=True)} "
            f"{_interval(r['accuracy_ci_low'], r['accuracy_ci_high'], True)} |")
    return "\n".join(lines)
