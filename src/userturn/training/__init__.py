"""Collaboration-oriented post-training: data, SFT, RL and the before/after probe (``userturn train``).

Modules: ``data`` (training JSONL from corpora and probe runs), ``sft`` (TRL SFTTrainer + PEFT LoRA, loss
on the next user turns), ``rl`` (TRL GRPOTrainer with the classifier as reward), ``evaluate`` (probe
on held-out items before and after, learning curves), ``checkpoint`` (loading and saving models).
Heavy imports (torch, TRL, PEFT) happen inside the functions that need them.
"""
