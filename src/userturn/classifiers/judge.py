"""The LLM judge, and the ensemble that puts it behind the rules.

A judge renders one chat prompt per user turn (the seven labels with short examples, then the
conversation) with the judge model's own chat template, generates at temperature 0 and expects a
JSON object ``{"label": ..., "reason": ...}``. Output that does not parse, or names an unknown
label, is retried with a stricter reminder (still temperature 0: a retry of the same prompt would
repeat the same output); when every attempt fails the turn is labelled ``judge_error``. That label
is not one of ``records.LABELS``: aggregates count it separately and validation counts it as wrong,
so a failing judge never hides behind a default label.

Each label's ``details`` hold ``judge_model``, ``judge_revision``, ``prompt_hash`` (of the prompt
text that is the same for every turn), ``raw_output`` (the last attempt) and ``attempts``.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any, Protocol

from userturn.classifiers import Classifier, ClassifyInput, register_classifier
from userturn.classifiers.rules import UNCERTAIN_BELOW, RulesClassifier
from userturn.errors import ConfigError
from userturn.records import LABELS, Completion, GenerationRequest, Label, Message, SamplingParams
from userturn.store import generation_key

JUDGE_ERROR = "judge_error"
"""The label of a turn the judge could not label; never one of ``records.LABELS``."""

JUDGE_SYSTEM = """You label the NEXT USER TURN of a chat. You see the user's original query, the assistant's \
response, and the user turn that came next. Choose exactly one label:

- follow_up: reacts to something specific in the assistant response: asks about a step, challenges or \
corrects it, asks for clarification, an extension or a variation that builds on it. \
Example: "Why did you multiply 3 by 12?" / "That's 5 sentences, not 4." / "What if he gave away 15?"
- acknowledgement: thanks, praise or a closing without engaging specific content. Example: "Thanks, that helps!"
- restatement: repeats or paraphrases the original query. Example: query "What is 2 + 2?", turn "What's 2+2?"
- new_query: a new request not grounded in the conversation; it would make sense as the first message of a \
new chat. Example: "How do I bake bread?" after a math answer.
- assistant_drift: speaks as the assistant: continues or rewrites the answer, offers help, answers questions. \
This wins even if the turn contains a question. Example: "I hope this helps! Anything else?"
- meta: talks about the conversation from outside: thinking traces, "The user wants...", grading the answer. \
Example: "The assistant's answer is correct. 9/10"
- empty: nothing, only special tokens, or degenerate text (repetition loops, gibberish). Example: "the the the the"

Thanks followed by a specific question about the answer is follow_up.
Reply with only a JSON object: {"label": "<one of the seven labels>", "reason": "<a few words>"}"""

_TURN_TEMPLATE = """Original query:
<<<{query}>>>

Assistant response:
<<<{response}>>>

Next user turn:
<<<{user_turn}>>>

Label the next user turn. Reply with only the JSON object."""

_REMINDER = ('\n\nYour previous reply was not valid. Reply with exactly one line of JSON such as '
             '{"label": "follow_up", "reason": "asks about step 2"} and nothing else.')

PROMPT_HASH = hashlib.sha256((JUDGE_SYSTEM + "\n" + _TURN_TEMPLATE + "\n" + _REMINDER).encode()).hexdigest()[:16]

_JSON_OBJECT = re.compile(r"\{[^{}]*\}", re.DOTALL)
_MAX_FIELD = 4000  # characters of each field shown to the judge; long responses are cut in the middle


def _clip(text: str) -> str:
    if len(text) <= _MAX_FIELD:
        return text
    half = _MAX_FIELD // 2
    return text[:half] + "\n[...]\n" + text[-half:]


def judge_messages(item: ClassifyInput, *, retry: bool = False) -> list[Message]:
    """The chat the judge sees for one turn; ``retry`` appends the stricter reminder."""
    body = _TURN_TEMPLATE.format(query=_clip(item.query), response=_clip(item.response),
                                 user_turn=_clip(item.user_turn))
    return [Message("system", JUDGE_SYSTEM), Message("user", body + (_REMINDER if retry else ""))]


def parse_judge_output(text: str) -> tuple[str, str] | None:
    """``(label, reason)`` from a judge reply, or None when it holds no valid JSON object.

    Args:
        text: the raw reply. The first ``{...}`` object that parses and has a known ``label`` wins,
            so code fences and chatter around it are tolerated; label case and surrounding spaces are
            normalised; a missing ``reason`` becomes ``""``.
    """
    for match in _JSON_OBJECT.finditer(text):
        try:
            data = json.loads(match.group(0))
        except json.JSONDecodeError:
            continue
        if not isinstance(data, dict) or not isinstance(data.get("label"), str):
            continue
        label = data["label"].strip().lower().replace("-", "_").replace(" ", "_")
        if label in LABELS:
            reason = data.get("reason")
            return label, reason.strip() if isinstance(reason, str) else ""
    return None


class GenerationCache(Protocol):
    """What the judge needs of the run store (``userturn.store.Store`` satisfies it)."""

    def get_many(self, keys: Sequence[str]) -> dict[str, Completion]: ...

    def put_many(self, entries: Any) -> int: ...


class JudgeClassifier:
    """An LLM judge over any loaded backend.

    Args:
        backend: a loaded :class:`~userturn.backends.Backend`; its tokenizer's chat template renders
            the prompt (system message included as the template allows).
        retries: extra attempts, with the reminder, for unparseable replies (0 = one attempt only).
        max_tokens: token budget of one reply.
        store: optional generation cache; stored replies are reused and new ones written back.
    """

    name = "judge"

    def __init__(self, backend: Any, *, retries: int = 1, max_tokens: int = 96,
                 store: GenerationCache | None = None) -> None:
        if retries < 0:
            raise ConfigError(f"judge retries must be >= 0, got {retries}")
        self.backend = backend
        self.retries = retries
        self.params = SamplingParams(temperature=0.0, max_tokens=max_tokens, n=1)
        self.store = store
        identity = backend.identity
        self.model = identity.name
        self.revision = identity.revision
        self._identity_key = identity.key()

    def _prompt(self, item: ClassifyInput, retry: bool) -> str:
        from userturn.templates import render_assistant_prompt

        messages = judge_messages(item, retry=retry)
        try:
            return render_assistant_prompt(self.backend.tokenizer, messages, model_name=self.model)
        except Exception:
            # templates without a system role: fold the instructions into the user message
            merged = [Message("user", messages[0].content + "\n\n" + messages[1].content)]
            return render_assistant_prompt(self.backend.tokenizer, merged, model_name=self.model)

    def _generate(self, prompts: list[str]) -> list[str]:
        requests = [{"stage": "judge", "model": self._identity_key, "prompt": p, "params": self.params.key(),
                     "seed": 0, "sample_index": 0} for p in prompts]
        keys = [generation_key(r) for r in requests]
        cached = self.store.get_many(keys) if self.store is not None else {}
        todo = [i for i, k in enumerate(keys) if k not in cached]
        if todo:
            outputs = self.backend.generate([GenerationRequest(prompts[i], self.params) for i in todo])
            fresh = {keys[i]: out[0] for i, out in zip(todo, outputs, strict=True)}
            if self.store is not None:
                self.store.put_many([(keys[i], "judge", requests[i], fresh[keys[i]]) for i in todo])
            cached = {**cached, **fresh}
        return [cached[k].text for k in keys]

    def classify(self, inputs: Sequence[ClassifyInput]) -> list[Label]:
        results: list[Label | None] = [None] * len(inputs)
        raw: list[str] = [""] * len(inputs)
        pending = list(range(len(inputs)))
        for attempt in range(self.retries + 1):
            if not pending:
                break
            prompts = [self._prompt(inputs[i], retry=attempt > 0) for i in pending]
            texts = self._generate(prompts)
            still = []
            for i, text in zip(pending, texts, strict=True):
                raw[i] = text
                parsed = parse_judge_output(text)
                if parsed is None:
                    still.append(i)
                    continue
                label, reason = parsed
                results[i] = Label(label=label, reason=f"judge: {reason}" if reason else "judge", classifier="judge",
                                   confidence=1.0, details=self._details(text, attempt + 1))
            pending = still
        for i in pending:
            details = self._details(raw[i], self.retries + 1)
            details["judge_error"] = True
            results[i] = Label(label=JUDGE_ERROR, reason="judge_error:unparseable_output", classifier="judge",
                               confidence=0.0, details=details)
        return [label for label in results if label is not None]

    def _details(self, raw_output: str, attempts: int) -> dict[str, Any]:
        return {"judge_model": self.model, "judge_revision": self.revision, "prompt_hash": PROMPT_HASH,
                "raw_output": raw_output, "attempts": attempts}


def majority_vote(votes: Sequence[Label], fallback: str | None = None) -> Label:
    """Combine several judges' labels for one turn.

    Args:
        votes: one label per judge, in judge order; ``judge_error`` votes are not counted.
        fallback: on a tie, the tied label equal to ``fallback`` (the rules label) wins if there is
            one, else the tied label of the earliest judge. Ties are recorded in ``details["tie"]``.

    Returns:
        ``judge_error`` when every judge failed; otherwise the winning label with all votes in
        ``details["votes"]``.
    """
    valid = [v for v in votes if v.label != JUDGE_ERROR]
    all_votes = [{"model": v.details.get("judge_model"), "label": v.label} for v in votes]
    if not valid:
        return Label(JUDGE_ERROR, "judge_error:all_judges_failed", "ensemble", 0.0,
                     {"judge_error": True, "votes": all_votes})
    counts = Counter(v.label for v in valid)
    top = max(counts.values())
    tied = [label for label in counts if counts[label] == top]
    if len(tied) == 1:
        winner, tie = tied[0], False
    else:
        tie = True
        winner = fallback if fallback in tied else next(v.label for v in valid if v.label in tied)
    reason = next(v.reason for v in valid if v.label == winner)
    return Label(winner, reason, "ensemble", top / len(votes),
                 {"votes": all_votes, "tie": tie, "tied_labels": sorted(tied) if tie else []})


class EnsembleClassifier:
    """Rules first, then one or more judges.

    Args:
        judges: the judges; with several, their majority vote decides (ties recorded, see
            :func:`majority_vote`).
        only_uncertain: send only turns whose rules confidence is below ``threshold`` to the judges;
            the others keep the rules label.
    """

    name = "ensemble"

    def __init__(self, judges: Sequence[Classifier], *, only_uncertain: bool = False,
                 threshold: float = UNCERTAIN_BELOW) -> None:
        if not judges:
            raise ConfigError("the ensemble needs at least one judge")
        self.rules = RulesClassifier()
        self.judges = list(judges)
        self.only_uncertain = only_uncertain
        self.threshold = threshold

    def classify(self, inputs: Sequence[ClassifyInput]) -> list[Label]:
        rules_labels = self.rules.classify(inputs)
        chosen = [i for i, label in enumerate(rules_labels)
                  if not self.only_uncertain or label.confidence < self.threshold]
        if not chosen:
            return rules_labels
        subset = [inputs[i] for i in chosen]
        per_judge = [judge.classify(subset) for judge in self.judges]
        out = list(rules_labels)
        for position, i in enumerate(chosen):
            votes = [labels[position] for labels in per_judge]
            if len(votes) == 1:
                decided = votes[0]
            else:
                decided = majority_vote(votes, fallback=rules_labels[i].label)
            details = {**decided.details, "rules_label": rules_labels[i].label, "rules_reason": rules_labels[i].reason}
            out[i] = Label(decided.label, decided.reason, decided.classifier, decided.confidence, details)
        return out


def parse_judge_spec(spec: str) -> tuple[str, str]:
    """``"openai:gpt-4o"`` -> ``("openai", "gpt-4o")``; a spec without a known backend prefix uses transformers."""
    from userturn.backends import backend_names

    head, sep, rest = spec.partition(":")
    if sep and head in backend_names():
        return head, rest
    return "transformers", spec


@register_classifier("judge")
def make_judge(model: str = "embedded", backend: Any = None, *, retries: int = 1, max_tokens: int = 96,
               store: GenerationCache | None = None, **backend_options: Any) -> JudgeClassifier:
    """A judge on ``model`` (``"embedded"``, a path, or ``"BACKEND:MODEL"``), or on an already loaded ``backend``."""
    if backend is None:
        from userturn.backends import load_backend

        backend_name, model_name = parse_judge_spec(model)
        backend = load_backend(backend_name, model_name, **backend_options)
    return JudgeClassifier(backend, retries=retries, max_tokens=max_tokens, store=store)
