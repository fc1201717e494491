"""Build realistic run directories (``samples.jsonl`` + ``summary.json``) for report tests and benchmarks.

Samples are made from the real records (``LabeledTurn.to_sample()``), so their keys follow the
pipeline's; the summary is computed from the samples the way a run would (Wilson intervals,
differences against the control perturbation). Text is generated, not model output.
"""

from __future__ import annotations

import json
import math
import random
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from userturn.records import (
    LABELS,
    AssistantTurn,
    Item,
    Label,
    LabeledTurn,
    Message,
    ScoredTurn,
    UserTurn,
    UserTurnContext,
    Verdict,
)
from userturn.report.stats import wilson_interval

EXPECTED = {"none": "none", "truncated_response": "up", "swapped_response": "up", "polite_closing": "down"}

WORDS = ("ratio", "remainder", "apples", "train", "speed", "discount", "area", "triangle", "minutes", "tax",
         "interest", "average", "marbles", "recipe", "distance", "budget", "fraction", "hours", "tickets", "boxes")


def chatml(messages: Sequence[Message], open_user: bool = True) -> str:
    """Render messages like a ChatML template and open the next turn (what the pipeline records as prompt)."""
    text = "".join(f"<|im_start|>{m.role}\n{m.content}<|im_end|>\n" for m in messages)
    return text + ("<|im_start|>user\n" if open_user else "<|im_start|>assistant\n")


def _user_text(label: str, rng: random.Random, query: str, index: int) -> tuple[str, str]:
    word, other = rng.choice(WORDS), rng.choice(WORDS)
    if label == "follow_up":
        text = rng.choice([f"Why did you multiply the {word} by {index + 2} before adding the {other}?",
                           f"Can you explain the step with the {word} again? I got {rng.randint(3, 99)}.",
                           f"What if the {word} were doubled, would the {other} change too?"])
        return text, "question about the previous answer"
    if label == "acknowledgement":
        return rng.choice(["Thanks, that makes sense!", "Great, thank you.", f"Perfect, the {word} part helped."]), \
            "short thanks without a question"
    if label == "restatement":
        return query, "repeats the original query"
    if label == "new_query":
        return f"Now a different one: how many {word} fit in {rng.randint(2, 40)} {other}?", "unrelated new task"
    if label == "assistant_drift":
        return f"Sure! Here is a step-by-step explanation of the {word}: first, ...", "speaks as the assistant"
    if label == "meta":
        return "As an AI language model, I cannot continue this conversation.", "talks about the conversation"
    return "", "no text"


def build_samples(*, models: Sequence[str] = ("tiny-chat-a", "tiny-chat-b"), datasets: Sequence[str] = ("demo", "gsm8k"),
                  perturbations: Sequence[str] = ("none", "truncated_response"),
                  temperatures: Sequence[float] = (0.0, 0.7, 1.0), k: int = 3, items: int = 4, seed: int = 0,
                  text_scale: int = 1, payloads: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Samples for every item x model x dataset x perturbation x temperature (greedy gets one sample, others k).

    Args:
        text_scale: repeats the reasoning sentences of responses to make texts longer (benchmarks).
        payloads: optional overrides put into the first item of every dataset: ``query``, ``response``,
            ``user_turn`` (first sample of each temperature) and ``model`` (renames the first model).
    """
    payloads = payloads or {}
    rng = random.Random(seed)
    models = list(models)
    if "model" in payloads:
        models[0] = payloads["model"]
    samples: list[dict[str, Any]] = []
    for model_index, model in enumerate(models):
        # Each model has its own label mix, so the tables and plots differ between models.
        weights = [0.25 + 0.2 * model_index, 0.25, 0.1, 0.1, 0.1, 0.1, 0.1 - 0.05 * model_index]
        for dataset in datasets:
            for item_index in range(items):
                a, b = rng.randint(2, 60), rng.randint(2, 60)
                first = item_index == 0
                query = payloads.get("query") if first and "query" in payloads else \
                    f"A shop sells {a} boxes with {b} {rng.choice(WORDS)} each. How many in total? (item {item_index})"
                steps = " ".join(f"Step {s + 1}: we multiply {a} by {b} and check the result." for s in range(2 * text_scale))
                correct_answer = a * b
                answer = correct_answer if rng.random() < 0.6 + 0.2 * model_index else correct_answer + 1
                response = payloads.get("response") if first and "response" in payloads else \
                    f"{steps}\nSo the answer is {answer}."
                item = Item(id=f"{dataset}-{item_index:04d}", dataset=dataset, messages=(Message("user", query),),
                            answer=str(correct_answer),
                            reference_user_turn="Could you check it another way?" if dataset == "demo" else None)
                turn = AssistantTurn(item=item, model=model, prompt=chatml(item.messages, open_user=False),
                                     response=response, response_visible=response, finish_reason="stop")
                scored = ScoredTurn(turn, Verdict(correct=answer == correct_answer if dataset != "chat" else None,
                                                  extracted=str(answer)))
                for perturbation in perturbations:
                    messages = turn.context
                    if perturbation == "truncated_response":
                        messages = (*item.messages, Message("assistant", response[: max(1, len(response) // 2)]))
                    context = UserTurnContext(scored, perturbation, messages)
                    prompt = chatml(messages)
                    for temperature in temperatures:
                        for sample_index in range(1 if temperature == 0 else k):
                            label = rng.choices(LABELS, weights)[0]
                            if perturbation == "truncated_response" and rng.random() < 0.3:
                                label = "follow_up"
                            text, reason = _user_text(label, rng, query, sample_index)
                            if first and sample_index == 0 and "user_turn" in payloads:
                                text = payloads["user_turn"]
                            user_turn = UserTurn(context, model, prompt, float(temperature), sample_index,
                                                 seed + sample_index, text, "stop" if text else "length")
                            samples.append(LabeledTurn(user_turn, Label(label, reason)).to_sample())
    return samples


def summarize(samples: Sequence[dict[str, Any]], confidence: float = 0.95) -> dict[str, Any]:
    """A ``summary.json`` object computed from samples (rows, effects against ``none``, decoupling)."""
    groups: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for s in samples:
        groups[(s["model"], s["user_model"], s["dataset"], s["perturbation"], s["temperature"])].append(s)
    rows = []
    for (model, user_model, dataset, perturbation, temperature), group in sorted(groups.items()):
        n = len(group)
        follow_up = sum(s["label"] == "follow_up" for s in group)
        low, high = wilson_interval(follow_up, n, confidence)
        scored = {(s["item_id"]): s["correct"] for s in group if s["correct"] is not None}
        rows.append({"model": model, "user_model": user_model, "dataset": dataset, "perturbation": perturbation,
                     "temperature": temperature, "n": n, "follow_up": follow_up, "follow_up_rate": follow_up / n,
                     "ci_low": low, "ci_high": high,
                     "accuracy": sum(scored.values()) / len(scored) if scored else None, "accuracy_n": len(scored),
                     "labels": dict(Counter(s["label"] for s in group))})
    z = 1.959963984540054
    by_key = {(r["model"], r["dataset"], r["temperature"], r["perturbation"]): r for r in rows}
    effects = []
    for (model, dataset, temperature, perturbation), row in sorted(by_key.items()):
        control = by_key.get((model, dataset, temperature, "none"))
        if perturbation == "none" or control is None:
            continue
        p1, n1, p0, n0 = row["follow_up_rate"], row["n"], control["follow_up_rate"], control["n"]
        effect = p1 - p0
        half = z * math.sqrt(max(p1 * (1 - p1) / n1 + p0 * (1 - p0) / n0, 1e-12))
        expected = EXPECTED.get(perturbation, "none")
        if effect - half > 0 or effect + half < 0:
            verdict = "expected" if (effect > 0) == (expected == "up") else "opposite"
        else:
            verdict = "not significant"
        effects.append({"model": model, "dataset": dataset, "temperature": temperature, "perturbation": perturbation,
                        "expected": expected, "effect": effect, "ci_low": effect - half, "ci_high": effect + half,
                        "verdict": verdict})
    decoupling = [{"dataset": d, "points": sum(r["dataset"] == d and r["perturbation"] == "none" for r in rows)}
                  for d in sorted({r["dataset"] for r in rows})]
    return {"userturn_version": "0.1.0", "config": {"confidence": confidence, "k": 3, "synthetic": True},
            "rows": rows, "effects": effects, "decoupling": decoupling}


def write_run(run_dir: Path, samples: Sequence[dict[str, Any]] | None = None, **build: Any) -> Path:
    """Write ``samples.jsonl`` and ``summary.json`` into ``run_dir`` (samples built with ``build`` when not given)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    samples = list(samples) if samples is not None else build_samples(**build)
    with (run_dir / "samples.jsonl").open("w", encoding="utf-8") as handle:
        for sample in samples:
            handle.write(json.dumps(sample, ensure_ascii=False) + "\n")
    (run_dir / "summary.json").write_text(json.dumps(summarize(samples), indent=2), encoding="utf-8")
    return run_dir
