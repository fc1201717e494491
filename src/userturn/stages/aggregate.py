"""Aggregate stage: follow-up rate with Wilson intervals next to accuracy and the label distribution."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from userturn.records import LABELS, LabeledTurn
from userturn.stats import wilson_interval

GROUP_KEYS = ("model", "user_model", "dataset", "perturbation", "temperature")


def summarize(labeled: Sequence[LabeledTurn]) -> list[dict[str, Any]]:
    """One row per model × user model × dataset × perturbation × temperature.

    ``n`` counts the turns with one of the seven labels; turns a judge failed to label are
    reported as ``unlabeled`` and left out of the rate. ``accuracy`` is the share of correct
    assistant responses among the group's *items* whose
    verifier gave a verdict (``None`` when no item has one); ``accuracy_n`` counts those items.
    """
    groups: dict[tuple, list[LabeledTurn]] = {}
    for lt in labeled:
        s = lt.to_sample()
        groups.setdefault(tuple(s[k] for k in GROUP_KEYS), []).append(lt)
    rows = []
    for key, members in groups.items():
        labels = Counter(m.label.label for m in members)
        # A judge that failed gives no label: such turns are counted, but not in the rate's denominator.
        failed = sum(v for k, v in labels.items() if k not in LABELS)
        n = len(members) - failed
        follow = labels.get("follow_up", 0)
        low, high = wilson_interval(follow, n)
        verdicts = {m.user_turn.context.scored.turn.item.id: m.user_turn.context.scored.verdict.correct
                    for m in members}
        scored = [v for v in verdicts.values() if v is not None]
        rows.append({
            **dict(zip(GROUP_KEYS, key, strict=True)),
            "n": n,
            "unlabeled": failed,
            "items": len(verdicts),
            "follow_up": follow,
            "follow_up_rate": follow / n if n else 0.0,
            "ci_low": low,
            "ci_high": high,
            "accuracy": (sum(scored) / len(scored)) if scored else None,
            "accuracy_n": len(scored),
            "labels": {label: labels.get(label, 0) for label in (*LABELS, *sorted(set(labels) - set(LABELS)))},
        })
    rows.sort(key=lambda r: (r["model"], r["user_model"], r["dataset"], r["perturbation"], r["temperature"]))
    return rows


def markdown_table(rows: Sequence[dict[str, Any]]) -> str:
    """A compact Markdown table of the summary rows, for the terminal and README-style reports."""
    head = "| model | dataset | perturbation | T | n | follow-up rate [95% CI] | accuracy | top labels |"
    lines = [head, "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        acc = "–" if r["accuracy"] is None else f"{r['accuracy']:.2f} (n={r['accuracy_n']})"
        top = ", ".join(f"{k} {v}" for k, v in sorted(r["labels"].items(), key=lambda kv: -kv[1]) if v)[:60]
        model = r["model"] if r["model"] == r["user_model"] else f"{r['model']} → {r['user_model']}"
        lines.append(
            f"| {model} | {r['dataset']} | {r['perturbation']} | {r['temperature']:g} | {r['n']} | "
            f"{r['follow_up_rate']:.3f} [{r['ci_low']:.3f}, {r['ci_high']:.3f}] | {acc} | {top} |"
        )
    return "\n".join(lines)
