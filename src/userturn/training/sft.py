"""Supervised fine-tuning on multi-turn conversations with TRL's ``SFTTrainer`` and PEFT LoRA.

The behaviour being trained is *writing the next user turn*, so by default the loss falls only on
the user turns that follow an assistant turn: their content and the end-of-turn token that closes
them, exactly what the probe's user-turn stage asks the model to generate after
:func:`userturn.templates.open_user_turn`. Everything else (system prompt, headers, the first user
query, assistant turns) is masked with -100. The mask is computed here from the model's own chat
template and handed to TRL as pre-tokenized ``input_ids``/``labels``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from userturn.errors import ConfigError, DataError, ModelError, TemplateError
from userturn.records import Message, messages_to_dicts
from userturn.templates import open_user_turn, render_assistant_prompt
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

LOSS_ON = ("user", "assistant", "all")
IGNORE = -100


def render_conversation(tokenizer: Any, messages: Sequence[Message]) -> str:
    """The whole conversation rendered by the chat template, with no generation prompt."""
    text = tokenizer.apply_chat_template(messages_to_dicts(list(messages)), tokenize=False,
                                         add_generation_prompt=False)
    if not isinstance(text, str):
        raise TemplateError("the chat template did not render to a single string")
    return text


@dataclass(frozen=True)
class MaskedExample:
    """One tokenized conversation: ``labels`` is ``input_ids`` with -100 where no loss falls."""

    input_ids: list[int]
    labels: list[int]

    @property
    def trained_tokens(self) -> int:
        return sum(1 for label in self.labels if label != IGNORE)


def loss_spans(tokenizer: Any, messages: Sequence[Message], loss_on: str = "user") -> tuple[str, list[tuple[int, int]]]:
    """The rendered conversation and the character spans that carry loss.

    Args:
        messages: the conversation; system messages never carry loss.
        loss_on: ``user``: user turns that follow an assistant turn (the first query carries none);
            ``assistant``: assistant turns; ``all``: the whole text (plain language modelling).

    A span runs from the end of the turn's header (what :func:`open_user_turn` or the assistant
    generation prompt ends with) to the end of the turn's end-of-turn marker; the whitespace that
    templates put after that marker is not part of it, because the model never generates it.

    Raises:
        ConfigError: an unknown ``loss_on``.
        TemplateError: the template renders earlier turns differently once later turns follow, so
            that no turn can be cut out exactly.
    """
    if loss_on not in LOSS_ON:
        raise ConfigError(f"--loss-on must be one of {', '.join(LOSS_ON)}, got '{loss_on}'")
    full = render_conversation(tokenizer, messages)
    if loss_on == "all":
        return full, [(0, len(full))]
    spans = []
    for index, message in enumerate(messages):
        if message.role != loss_on or index == 0:
            continue
        if loss_on == "user":
            if messages[index - 1].role != "assistant":
                continue
            opened = open_user_turn(tokenizer, messages[:index])
        else:
            opened = render_assistant_prompt(tokenizer, messages[:index])
        through = render_conversation(tokenizer, messages[: index + 1])
        if not full.startswith(opened) or not full.startswith(through) or len(through) < len(opened):
            raise TemplateError(f"the chat template renders turn {index} differently once later turns follow it; "
                                "cannot mask it exactly")
        turn = through[len(opened):].rstrip()
        spans.append((len(opened), len(opened) + len(turn)))
    return full, spans


def mask_conversation(tokenizer: Any, messages: Sequence[Message], loss_on: str = "user",
                      max_length: int | None = None, skip_longer: bool = False) -> MaskedExample | None:
    """Tokenize a conversation with its chat template and mask every token outside the loss spans.

    Args:
        max_length: keep the first ``max_length`` tokens; None keeps all.
        skip_longer: return None for a conversation longer than ``max_length`` instead of truncating it.

    Returns:
        None when no token carries loss (no matching turn, or truncation cut them all), or when
        ``skip_longer`` and the conversation is too long.

    Raises:
        ModelError: the tokenizer cannot report character offsets (a "slow" tokenizer).
    """
    text, spans = loss_spans(tokenizer, messages, loss_on)
    try:
        encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    except NotImplementedError as exc:
        raise ModelError("masking needs a fast tokenizer (one that returns character offsets)") from exc
    ids, offsets = list(encoded["input_ids"]), encoded["offset_mapping"]
    labels = [IGNORE] * len(ids)
    for position, (start, _end) in enumerate(offsets):
        if any(lo <= start < hi for lo, hi in spans):
            labels[position] = ids[position]
    if max_length is not None and len(ids) > max_length:
        if skip_longer:
            return None
        ids, labels = ids[:max_length], labels[:max_length]
    example = MaskedExample(ids, labels)
    return example if example.trained_tokens else None


@dataclass
class SFTOptions:
    """Settings of ``userturn train sft``; field names match the command-line flags."""

    model: str = "embedded"
    data: Path = Path("train.jsonl")
    out: Path = Path("trained")
    loss_on: str = "user"
    full: bool = False
    lora: LoraOptions = field(default_factory=LoraOptions)
    learning_rate: float | None = None
    epochs: float = 1.0
    max_steps: int = -1
    batch_size: int = 4
    gradient_accumulation: int = 1
    max_length: int = 1024
    skip_longer: bool = False
    warmup: float = 0.0
    gradient_checkpointing: bool = False
    seed: int = 0
    threads: int = 0
    logging_steps: int = 1

    def effective_learning_rate(self) -> float:
        """2e-4 for LoRA, 1e-5 for full fine-tuning, unless set."""
        if self.learning_rate is not None:
            return self.learning_rate
        return 1e-5 if self.full else 2e-4


def build_examples(tokenizer: Any, rows: list[dict[str, Any]], loss_on: str, max_length: int,
                   data: Path, skip_longer: bool = False) -> list[MaskedExample]:
    """Masked examples for every record; records without a trainable turn are dropped (and counted)."""
    examples, dropped = [], 0
    for row in rows:
        messages = [Message(role, content) for role, content in row["messages"]]
        try:
            example = mask_conversation(tokenizer, messages, loss_on, max_length, skip_longer)
        except TemplateError as exc:
            raise DataError(str(exc), path=str(data), line=row["line"], field="messages") from exc
        if example is None:
            dropped += 1
        else:
            examples.append(example)
    if dropped:
        log.warning("%d of %d records have no %s turn to learn within %d tokens%s; dropped", dropped,
                    len(rows), loss_on, max_length, " or are longer" if skip_longer else "")
    if not examples:
        raise DataError(f"no record has a {loss_on} turn to learn within --max-length {max_length} tokens "
                        f"(with --loss-on user a user turn must follow an assistant turn)", path=str(data))
    return examples


def train_sft(options: SFTOptions) -> dict[str, Any]:
    """Fine-tune ``options.model`` on ``options.data`` and save it in ``options.out``; returns training.json.

    Works as is on one device and under ``accelerate launch`` (DDP, DeepSpeed, FSDP): TRL and
    accelerate do the distribution; files are written by the main process only.
    """
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    if options.batch_size < 1 or options.gradient_accumulation < 1 or options.max_length < 8:
        raise ConfigError("--batch-size and --gradient-accumulation must be >= 1 and --max-length >= 8")
    rows = load_training_file(options.data, "sft")
    model, tokenizer, resolved = load_for_training(options.model, options.threads)
    examples = build_examples(tokenizer, rows, options.loss_on, options.max_length, options.data,
                              options.skip_longer)
    dataset = Dataset.from_list([{"input_ids": e.input_ids, "labels": e.labels} for e in examples])
    log.info("sft: %d examples, %d trained tokens", len(examples), sum(e.trained_tokens for e in examples))
    config = SFTConfig(
        output_dir=str(options.out / "checkpoints"),
        learning_rate=options.effective_learning_rate(),
        num_train_epochs=options.epochs,
        max_steps=options.max_steps,
        per_device_train_batch_size=options.batch_size,
        gradient_accumulation_steps=options.gradient_accumulation,
        warmup_steps=options.warmup,
        logging_steps=options.logging_steps,
        save_strategy="no",
        **checkpointing_option(SFTConfig, options.gradient_checkpointing),
        report_to=[],
        seed=options.seed,
        max_length=options.max_length,
        bf16=bf16_available(),
        dataloader_pin_memory=False,
        disable_tqdm=True,
    )
    trainer = SFTTrainer(model=model, args=config, train_dataset=dataset, processing_class=tokenizer,
                         peft_config=None if options.full else options.lora.peft_config())
    trainer.train()
    save_trained(trainer, tokenizer, resolved, options.out, use_lora=not options.full)
    record: dict[str, Any] = {}
    if trainer.is_world_process_zero():
        settings = {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(options).items()}
        record = write_training_record(
            options.out, kind="sft", model_name=options.model, resolved=resolved, data=options.data,
            used=used_items(rows), options=settings, log_history=list(trainer.state.log_history),
            examples=len(examples))
    return record
