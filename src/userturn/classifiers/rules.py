"""Rules classifier (first version; the full rule set is being written in its own branch)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from userturn.classifiers import ClassifyInput, register_classifier
from userturn.records import Label

_WORD = re.compile(r"[a-z0-9']+")
_THANKS = re.compile(r"\b(thanks|thank you|thx|great|perfect|awesome|got it|bye)\b", re.I)
_DRIFT = re.compile(r"(<\|im_start\|>assistant|^assistant:|i'd be happy to|i hope this helps|let me know if)", re.I)
_META = re.compile(r"(<think>|\bthe user (wants|is asking|asked)\b|\bthe assistant\b)", re.I)


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def label_one(x: ClassifyInput) -> Label:
    text = x.user_turn.strip()
    for tok in x.special_tokens:
        text = text.replace(tok, " ") if tok not in ("<|im_start|>",) else text
    if not text.strip() or len(set(text)) < 3:
        return Label("empty", "empty: no content")
    if _META.search(text):
        return Label("meta", "meta: talks about the user/assistant from outside")
    if _DRIFT.search(text):
        return Label("assistant_drift", "assistant_drift: assistant-style marker")
    words, query, response = _words(text), _words(x.query), _words(x.response)
    if words and len(words & query) / len(words) >= 0.8:
        return Label("restatement", "restatement: most words come from the query")
    grounded = (words & response) - query
    if len(words) <= 8 and _THANKS.search(text) and "?" not in text:
        return Label("acknowledgement", "acknowledgement: short thanks without a question")
    if ("?" in text or re.match(r"(why|how|what|can|could|but|wait|no|is|are)\b", text, re.I)) and grounded:
        return Label("follow_up", f"follow_up: asks and refers to the response ({', '.join(sorted(grounded)[:3])})")
    return Label("new_query", "new_query: not grounded in the response")


class RulesClassifier:
    name = "rules"

    def classify(self, inputs: Sequence[ClassifyInput]) -> list[Label]:
        return [label_one(x) for x in inputs]


@register_classifier("rules")
def _factory(**options: object) -> RulesClassifier:
    return RulesClassifier()
