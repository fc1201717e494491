"""Before and after: the probe on held-out items for the base and the trained model, and learning curves.

The held-out split is every item of the evaluation dataset that no training record was built from
(training records carry ``source.dataset`` and ``source.item_ids``; a trained model's
``training.json`` lists them, including those of the model it started from). The probe runs through
:func:`userturn.pipeline.run_probe` with identical settings for both models, so the follow-up
rates, their Wilson intervals and the task accuracy are directly comparable.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from userturn.config import build_config
from userturn.datasets import DatasetSpec, LoadOptions, get_dataset, register_dataset
from userturn.errors import ConfigError
from userturn.output import write_json
from userturn.records import Item
from userturn.stats import wilson_interval

HELDOUT_SUFFIX = "@heldout"


def heldout_dataset(name: str, exclude: set[tuple[str, str]]) -> str:
    """Register ``<name>@heldout``: the items of dataset ``name`` whose ``(dataset, id)`` is not in ``exclude``.

    Items keep their own dataset name, so the verifier and the summary rows are the base dataset's.
    Returns the registered name.
    """
    base = get_dataset(name)

    def load(options: LoadOptions) -> Iterator[Item]:
        for item in base.load(options):
            if (item.dataset, item.id) not in exclude:
                yield item

    derived = f"{name}{HELDOUT_SUFFIX}"
    register_dataset(DatasetSpec(name=derived, description=f"{base.description} (items not used for training)",
                                 load=load, verify=base.verify, verifier_description=base.verifier_description))
    return derived


@dataclass
class EvalOptions:
    """Probe settings of the before/after comparison; anything else comes from ``config`` (a run config file)."""

    base_model: str
    trained_model: str
    out: Path
    dataset: str = "demo"
    limit: int | None = 18
    temperatures: list[float] = field(default_factory=lambda: [0.0, 1.0])
    samples: int = 4
    assistant_max_new_tokens: int = 192
    user_max_new_tokens: int = 48
    exclude: set[tuple[str, str]] = field(default_factory=set)
    data_dir: Path | None = None
    config: Path | None = None
    threads: int = 0
    seed: int = 0


def pooled_row(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One row over all temperatures of a model: follow-up rate with its Wilson interval, and accuracy."""
    n = sum(r["n"] for r in rows)
    follow = sum(r["follow_up"] for r in rows)
    low, high = wilson_interval(follow, n)
    accuracy = next((r["accuracy"] for r in rows if r["accuracy"] is not None), None)
    accuracy_n = next((r["accuracy_n"] for r in rows if r["accuracy"] is not None), 0)
    return {"temperature": "all", "n": n, "items": max((r["items"] for r in rows), default=0), "follow_up": follow,
            "follow_up_rate": follow / n if n else 0.0, "ci_low": low, "ci_high": high, "accuracy": accuracy,
            "accuracy_n": accuracy_n}


def comparison_table(results: dict[str, list[dict[str, Any]]]) -> str:
    """A Markdown table: one row per model and temperature, and a pooled row per model."""
    lines = ["| model | T | items | n | follow-up rate [95% CI] | accuracy |", "|---|---|---|---|---|---|"]
    for label, rows in results.items():
        for row in [*sorted(rows, key=lambda r: r["temperature"]), pooled_row(rows)]:
            temp = row["temperature"] if isinstance(row["temperature"], str) else f"{row['temperature']:g}"
            acc = "–" if row["accuracy"] is None else f"{row['accuracy']:.2f} (n={row['accuracy_n']})"
            lines.append(f"| {label} | {temp} | {row['items']} | {row['n']} | {row['follow_up_rate']:.3f} "
                         f"[{row['ci_low']:.3f}, {row['ci_high']:.3f}] | {acc} |")
    return "\n".join(lines)


def evaluate(options: EvalOptions, reporter: Any = None) -> dict[str, Any]:
    """Run the probe on the held-out items for both models; write ``evaluation.json`` and ``evaluation.md``.

    Args:
        options.limit: the first ``limit`` held-out items (None: all of them).
        options.exclude: ``(dataset, item id)`` pairs used in training; never evaluated.

    Raises:
        ConfigError: no held-out item is left.
    """
    from userturn.pipeline import load_run_items, run_probe

    dataset = heldout_dataset(options.dataset, options.exclude)
    results: dict[str, list[dict[str, Any]]] = {}
    item_ids: list[str] = []
    for label, model in (("base", options.base_model), ("trained", options.trained_model)):
        overrides: dict[str, Any] = {
            "model": model, "datasets": [dataset], "limit": options.limit, "temperatures": options.temperatures,
            "samples": options.samples, "assistant_max_new_tokens": options.assistant_max_new_tokens,
            "user_max_new_tokens": options.user_max_new_tokens, "seed": options.seed,
            "out": options.out / label, "data_dir": options.data_dir,
            "threads": options.threads or None,
        }
        config = build_config(options.config, overrides)
        if not item_ids:
            item_ids = [i.id for i in load_run_items(config)]
            if not item_ids:
                raise ConfigError(f"no held-out items left in dataset '{options.dataset}': every item was used "
                                  "for training (make the data with a --holdout share)")
        result = run_probe(config, reporter)
        results[label] = result.rows
    table = comparison_table(results)
    summary = {"dataset": options.dataset, "items": item_ids, "base_model": options.base_model,
               "trained_model": options.trained_model, "excluded_items": len(options.exclude),
               "results": results, "pooled": {k: pooled_row(v) for k, v in results.items()}, "table": table}
    write_json(options.out / "evaluation.json", summary)
    (options.out / "evaluation.md").write_text(table + "\n", encoding="utf-8")
    return summary


def plot_learning_curves(log_history: Sequence[dict[str, Any]], path: Path, title: str = "") -> Path | None:
    """Plot the training loss and, when logged (RL), the mean reward and follow-up rate per step as a PNG.

    Returns the path, or None when the log has no loss entry (nothing to plot).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def series(key: str) -> tuple[list[float], list[float]]:
        points = [(e["step"], e[key]) for e in log_history if key in e and "step" in e and "train_runtime" not in e]
        return [p[0] for p in points], [p[1] for p in points]

    loss = series("loss")
    if not loss[0]:
        return None
    reward = series("reward")
    rate = series("follow_up_rate")
    panels = 2 if reward[0] else 1
    figure, axes = plt.subplots(1, panels, figsize=(5.5 * panels, 3.8), squeeze=False)
    axes[0][0].plot(*loss, marker="o", markersize=3)
    axes[0][0].set(xlabel="step", ylabel="loss", title="training loss")
    if panels == 2:
        axes[0][1].plot(*reward, marker="o", markersize=3, label="mean reward")
        if rate[0]:
            axes[0][1].plot(*rate, marker="s", markersize=3, label="follow-up rate")
        axes[0][1].set(xlabel="step", title="reward")
        axes[0][1].legend()
    if title:
        figure.suptitle(title)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
