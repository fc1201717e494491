"""Agreement between a classifier and gold labels: pure metrics over two label sequences.

All functions take ``gold`` and ``predicted`` as equal-length sequences of label strings. Labels
outside the given ``labels`` tuple (such as ``judge_error``) are kept as their own row/column in the
confusion matrix and count as wrong, so a failing judge is never flattered.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from userturn.records import LABELS


@dataclass(frozen=True)
class LabelScores:
    precision: float
    recall: float
    f1: float
    support: int


@dataclass(frozen=True)
class AgreementReport:
    """Everything ``userturn validate-classifier`` prints.

    Args:
        n: number of compared items.
        accuracy: share of items where predicted == gold (0.0 when ``n`` is 0).
        macro_f1: unweighted mean of per-label F1 over ``labels`` that occur in gold or predictions.
        kappa: Cohen's kappa; 0.0 when chance agreement is 1 (a single label everywhere).
        per_label: precision/recall/F1/support per label in ``labels``.
        labels: row/column order of ``confusion`` (the known labels, then any extra ones seen).
        confusion: ``confusion[i][j]`` = items with gold ``labels[i]`` predicted as ``labels[j]``.
    """

    n: int
    accuracy: float
    macro_f1: float
    kappa: float
    per_label: dict[str, LabelScores]
    labels: tuple[str, ...]
    confusion: tuple[tuple[int, ...], ...]
    extra: dict[str, int] = field(default_factory=dict)


def _check(gold: Sequence[str], predicted: Sequence[str]) -> None:
    if len(gold) != len(predicted):
        raise ValueError(f"gold has {len(gold)} labels but predicted has {len(predicted)}")


def accuracy(gold: Sequence[str], predicted: Sequence[str]) -> float:
    """Share of positions where the labels agree; 0.0 for empty input."""
    _check(gold, predicted)
    return sum(g == p for g, p in zip(gold, predicted, strict=True)) / len(gold) if gold else 0.0


def per_label_scores(gold: Sequence[str], predicted: Sequence[str],
                     labels: Sequence[str] = LABELS) -> dict[str, LabelScores]:
    """Precision, recall and F1 for each label.

    Args:
        labels: the labels to score. A label never predicted has precision 0.0; one absent from
            gold has recall 0.0; F1 is 0.0 whenever precision + recall is 0.
    """
    _check(gold, predicted)
    scores: dict[str, LabelScores] = {}
    for label in labels:
        tp = sum(1 for g, p in zip(gold, predicted, strict=True) if g == label and p == label)
        n_pred = sum(1 for p in predicted if p == label)
        n_gold = sum(1 for g in gold if g == label)
        precision = tp / n_pred if n_pred else 0.0
        recall = tp / n_gold if n_gold else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        scores[label] = LabelScores(precision, recall, f1, n_gold)
    return scores


def macro_f1(gold: Sequence[str], predicted: Sequence[str], labels: Sequence[str] = LABELS) -> float:
    """Unweighted mean F1 over the labels in ``labels`` that occur in gold or predictions (0.0 if none)."""
    present = [label for label in labels if label in set(gold) | set(predicted)]
    if not present:
        return 0.0
    scores = per_label_scores(gold, predicted, present)
    return sum(s.f1 for s in scores.values()) / len(present)


def cohen_kappa(gold: Sequence[str], predicted: Sequence[str]) -> float:
    """Cohen's kappa, (p_o - p_e) / (1 - p_e); 0.0 for empty input or when p_e is 1."""
    _check(gold, predicted)
    n = len(gold)
    if n == 0:
        return 0.0
    observed = accuracy(gold, predicted)
    gold_counts, pred_counts = Counter(gold), Counter(predicted)
    expected = sum(gold_counts[k] * pred_counts[k] for k in gold_counts) / (n * n)
    if expected >= 1.0:
        return 0.0
    return (observed - expected) / (1.0 - expected)


def confusion_matrix(gold: Sequence[str], predicted: Sequence[str],
                     labels: Sequence[str] = LABELS) -> tuple[tuple[str, ...], tuple[tuple[int, ...], ...]]:
    """Counts of (gold, predicted) pairs; labels not in ``labels`` are appended in sorted order."""
    _check(gold, predicted)
    order = list(labels) + sorted({*gold, *predicted} - set(labels))
    index = {label: i for i, label in enumerate(order)}
    matrix = [[0] * len(order) for _ in order]
    for g, p in zip(gold, predicted, strict=True):
        matrix[index[g]][index[p]] += 1
    return tuple(order), tuple(tuple(row) for row in matrix)


def agreement_report(gold: Sequence[str], predicted: Sequence[str],
                     labels: Sequence[str] = LABELS) -> AgreementReport:
    """All metrics at once; see :class:`AgreementReport`."""
    order, matrix = confusion_matrix(gold, predicted, labels)
    extra = {label: sum(1 for p in predicted if p == label) for label in order if label not in labels}
    return AgreementReport(
        n=len(gold),
        accuracy=accuracy(gold, predicted),
        macro_f1=macro_f1(gold, predicted, labels),
        kappa=cohen_kappa(gold, predicted),
        per_label=per_label_scores(gold, predicted, labels),
        labels=order,
        confusion=matrix,
        extra=extra,
    )


def format_report(report: AgreementReport, title: str = "") -> str:
    """A plain-text rendering: headline figures, per-label P/R/F1 and the confusion matrix."""
    lines = []
    if title:
        lines.append(title)
    lines.append(f"n={report.n}  accuracy={report.accuracy:.3f}  macro-F1={report.macro_f1:.3f}  "
                 f"kappa={report.kappa:.3f}")
    for label, extra_count in report.extra.items():
        lines.append(f"{label}: {extra_count} (counted as wrong)")
    width = max(len(label) for label in report.labels)
    lines.append(f"{'label':<{width}}  precision  recall     f1  support")
    for label, s in report.per_label.items():
        lines.append(f"{label:<{width}}  {s.precision:9.3f}  {s.recall:6.3f}  {s.f1:5.3f}  {s.support:7d}")
    short = [label[:6] for label in report.labels]
    lines.append("confusion (rows = gold, columns = predicted)")
    lines.append(" " * width + "  " + " ".join(f"{s:>6}" for s in short))
    for label, row in zip(report.labels, report.confusion, strict=True):
        lines.append(f"{label:<{width}}  " + " ".join(f"{c:>6d}" for c in row))
    return "\n".join(lines)
