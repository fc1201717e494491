"""Reinforcement learning of the next user turn with TRL's ``GRPOTrainer``.

The policy sees exactly what the probe shows it: ``open_user_turn([..., query, response])``
rendered with the model's own chat template, and generates the user turn. The reward is
userturn's classifier (:func:`userturn.rewards.make_follow_up_reward`): 1 for a follow-up, the
configured weights for the other labels, minus an optional length penalty. The KL penalty to the
starting model is GRPO's ``beta`` (with LoRA the reference is the base model with the adapter off).
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from userturn.errors import ConfigError, DataError, TemplateError
from userturn.records import Message
from userturn.rewards import make_follow_up_reward
from userturn.templates import open_user_turn
from userturn.training.checkpoint import (
    LoraOptions,
    bf16_available,
    checkpointing_option,
    load_for_training,
    save_trained,
    write_training_record,
)
from userturn.training.data import load_training_file, used_items

log = logging.getLogger("userturn.training")


@dataclass
class RLOptions:
    """Settings of ``userturn train rl``; field names match the command-line flags."""

    model: str = "embedded"
    prompts: Path = Path("prompts.jsonl")
    out: Path = Path("trained-rl")
    full: bool = False
    lora: LoraOptions = field(default_factory=LoraOptions)
    learning_rate: float | None = None
    epochs: float = 1.0
    max_steps: int = -1
    batch_size: int = 8
    gradient_accumulation: int = 1
    num_generations: int = 4
    max_completion_length: int = 48
    max_prompt_tokens: int = 768
    temperature: float = 1.0
    beta: float = 0.04
    weights: dict[str, float] = field(default_factory=dict)
    length_penalty: float = 0.0
    max_words: int = 60
    classifier: str = "rules"
    gradient_checkpointing: bool = False
    seed: int = 0
    threads: int = 0
    logging_steps: int = 1

    def effective_learning_rate(self) -> float:
        """1e-5 for LoRA, 1e-6 for full fine-tuning, unless set."""
        if self.learning_rate is not None:
            return self.learning_rate
        return 1e-6 if self.full else 1e-5


def build_prompt_rows(tokenizer: Any, rows: list[dict[str, Any]], max_prompt_tokens: int,
                      data: Path) -> list[dict[str, str]]:
    """``{"prompt", "query", "response"}`` per record; prompts longer than ``max_prompt_tokens`` are dropped.

    ``prompt`` is the rendered text that opens the next user turn; ``query`` and ``response`` (the
    last user and assistant messages, unless the record gives them) are what the reward's
    classifier compares the generated turn against.
    """
    prepared, too_long = [], 0
    # TRL tokenizes text prompts with the tokenizer's special tokens; drop a BOS the template already wrote.
    adds_bos = tokenizer.bos_token is not None and tokenizer("")["input_ids"][:1] == [tokenizer.bos_token_id]
    for row in rows:
        messages = [Message(role, content) for role, content in row["messages"]]
        try:
            prompt = open_user_turn(tokenizer, messages)
        except TemplateError as exc:
            raise DataError(str(exc), path=str(data), line=row["line"], field="messages") from exc
        if adds_bos and prompt.startswith(tokenizer.bos_token):
            prompt = prompt[len(tokenizer.bos_token):]
        if len(tokenizer(prompt, add_special_tokens=False)["input_ids"]) > max_prompt_tokens:
            too_long += 1
            continue
        query = row.get("query") or next((m.content for m in reversed(messages) if m.role == "user"), "")
        response = row.get("response") or messages[-1].content
        prepared.append({"prompt": prompt, "query": str(query), "response": str(response)})
    if too_long:
        log.warning("%d of %d prompts are longer than %d tokens; dropped", too_long, len(rows), max_prompt_tokens)
    if not prepared:
        raise DataError(f"no prompt fits in --max-prompt-tokens {max_prompt_tokens}", path=str(data))
    return prepared


def train_rl(options: RLOptions) -> dict[str, Any]:
    """Train ``options.model`` with GRPO on ``options.prompts`` and save it in ``options.out``; returns training.json.

    Raises:
        ConfigError: batch sizes that GRPO cannot group (the batch must be a multiple of
            ``num_generations``), or bad reward weights.
    """
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    if options.num_generations < 2:
        raise ConfigError("--num-generations must be >= 2: GRPO compares completions of the same prompt")
    if (options.batch_size * options.gradient_accumulation) % options.num_generations:
        raise ConfigError(f"--batch-size x --gradient-accumulation ({options.batch_size} x "
                          f"{options.gradient_accumulation}) must be a multiple of --num-generations "
                          f"({options.num_generations})")
    reward = make_follow_up_reward(options.weights, length_penalty=options.length_penalty,
                                   max_words=options.max_words, classifier=options.classifier)
    rows = load_training_file(options.prompts, "prompts")
    model, tokenizer, resolved = load_for_training(options.model, options.threads)
    prepared = build_prompt_rows(tokenizer, rows, options.max_prompt_tokens, options.prompts)
    dataset = Dataset.from_list(prepared)
    log.info("rl: %d prompts", len(prepared))
    config = GRPOConfig(
        output_dir=str(options.out / "checkpoints"),
        learning_rate=options.effective_learning_rate(),
        num_train_epochs=options.epochs,
        max_steps=options.max_steps,
        per_device_train_batch_size=options.batch_size,
        gradient_accumulation_steps=options.gradient_accumulation,
        num_generations=options.num_generations,
        max_completion_length=options.max_completion_length,
        temperature=options.temperature,
        beta=options.beta,
        logging_steps=options.logging_steps,
        save_strategy="no",
        **checkpointing_option(GRPOConfig, options.gradient_checkpointing),
        report_to=[],
        seed=options.seed,
        bf16=bf16_available(),
        dataloader_pin_memory=False,
        disable_tqdm=True,
    )
    trainer = GRPOTrainer(model=model, reward_funcs=[reward], args=config, train_dataset=dataset,
                          processing_class=tokenizer, peft_config=None if options.full else options.lora.peft_config())
    trainer.train()
    save_trained(trainer, tokenizer, resolved, options.out, use_lora=not options.full)
    record: dict[str, Any] = {}
    if trainer.is_world_process_zero():
        settings = {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(options).items()}
        record = write_training_record(
            options.out, kind="rl", model_name=options.model, resolved=resolved, data=options.prompts,
            used=used_items(rows), options=settings, log_history=list(trainer.state.log_history),
            examples=len(prepared))
    return record
