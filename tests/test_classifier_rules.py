"""The rules classifier, pinned rule by rule on real examples (the gold set and real SmolLM2 turns)."""

import json
from pathlib import Path

import pytest

from userturn.classifiers import ClassifyInput, load_classifier
from userturn.classifiers.rules import classify_turn, is_uncertain
from userturn.classifiers.validation import agreement_report
from userturn.errors import ConfigError

GOLD = Path(__file__).parent / "data" / "gold_user_turns.jsonl"
APPLES_Q = "Tom has 3 boxes with 12 apples in each box. He gives 10 apples to his neighbour. How many apples does Tom have left?"
APPLES_R = "Tom starts with 3 x 12 = 36 apples. After giving away 10, he has 36 - 10 = 26 apples left.\n#### 26"
SUM_Q, SUM_R = "What is 2 + 3?", "2 + 3 = 5"
CANBERRA_Q, CANBERRA_R = "What is the capital of Australia?", "The capital of Australia is Canberra."


def label(turn: str, query: str = APPLES_Q, response: str = APPLES_R, special: tuple[str, ...] = ()):
    return classify_turn(ClassifyInput(query, response, turn, special_tokens=special))


@pytest.mark.parametrize(
    ("turn", "query", "response", "expected_reason"),
    [
        # empty
        ("", APPLES_Q, APPLES_R, "empty:blank"),
        ("<|im_end|>", APPLES_Q, APPLES_R, "empty:special_tokens_only"),
        ("?!?!?!?!?!?!?!?!", APPLES_Q, APPLES_R, "empty:no_words"),
        ("zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz", APPLES_Q, APPLES_R, "empty:low_character_diversity"),
        ("What is 2 + 2? What is 2 + 2? What is 2 + 2? What is 2 + 2?", "What is 2 + 2?", "2 + 2 = 4.",
         "empty:repetition_loop"),
        ("asdf qwer zxcv hjkl uiop asdf qwer zxcv hjkl uiop asdf", APPLES_Q, APPLES_R, "empty:gibberish"),
        # meta
        ("<think>\nOkay, so the user is asking about a race riddle.", APPLES_Q, APPLES_R, "meta:thinking_tag"),
        ("The user wants to know how many apples are left; the assistant correctly computes 26.", APPLES_Q,
         APPLES_R, "meta:third_person_about_conversation"),
        ("Rating: [[9]]", APPLES_Q, APPLES_R, "meta:grades_the_exchange"),
        # assistant drift
        ("<|im_start|>assistant\nMaria earns $600 per week.", APPLES_Q, APPLES_R, "assistant_drift:assistant_role_marker"),
        ("Assistant: The farmer has 9 sheep left.", APPLES_Q, APPLES_R, "assistant_drift:assistant_speaker_label"),
        ("I hope this helps! Let me know if you have any other questions.", APPLES_Q, APPLES_R,
         "assistant_drift:offers_help_or_assistant_phrase"),
        ("Is there anything else I can help you with today?", APPLES_Q, APPLES_R,
         "assistant_drift:offers_help_or_assistant_phrase"),
        ("Certainly! Tom ends up with 26.", APPLES_Q, APPLES_R, "assistant_drift:assistant_opener"),
        ("Let me solve this. 3 boxes of 12 is 36, minus 10 is 26.", APPLES_Q, APPLES_R,
         "assistant_drift:first_person_solution"),
        ("Question: A farmer has 20 cows. All but 4 die. How many are left?\nAnswer: 4", APPLES_Q, APPLES_R,
         "assistant_drift:writes_question_and_answer"),
        ("Why 26? Because 36 - 10 is 26.", APPLES_Q, APPLES_R, "assistant_drift:answers_own_question"),
        ("Tom has 36 apples. He gives 10 away, so he has 26 apples left.", APPLES_Q, APPLES_R,
         "assistant_drift:statement_repeats_response"),
        # restatement
        (APPLES_Q, APPLES_Q, APPLES_R, "restatement:verbatim_query"),
        ("How many apples in 3 boxes of 12 if Tom gives 10 away?", APPLES_Q, APPLES_R,
         "restatement:query_word_overlap"),
        # acknowledgement
        ("Thanks!", APPLES_Q, APPLES_R, "acknowledgement:thanks_or_closing"),
        ("Thank you, I'll check the soil.", APPLES_Q, APPLES_R, "acknowledgement:thanks_or_closing"),
        # follow-up
        ('can you explain in practical terms how does 2 + 3 make "5"\'s?', SUM_Q, SUM_R,
         "follow_up:question_grounded_in_response"),
        ("I got 27, are you sure it's 26?", APPLES_Q, APPLES_R, "follow_up:objection_grounded_in_response"),
        ("That's 5 sentences though, not 4.", "Write a story in exactly 4 sentences.",
         "One. Two. Three. Four. Five. The end.", "follow_up:objection_grounded_in_response"),
        ("What about New Zealand?", CANBERRA_Q, CANBERRA_R, "follow_up:question_grounded_in_response"),
        # new query
        ("How do I convert fluid across miss measurement into millilitre?", SUM_Q, SUM_R,
         "new_query:question_not_grounded"),
        ("What is the capital of New Zealand?", CANBERRA_Q, CANBERRA_R, "new_query:query_template_with_new_values"),
        ("I am planning a trip to Japan next month", APPLES_Q, APPLES_R, "new_query:ungrounded_statement"),
    ],
)
def test_each_rule_fires_on_its_example(turn, query, response, expected_reason):
    assert label(turn, query, response).reason == expected_reason


def test_text_after_a_leaked_assistant_header_is_ignored():
    result = label("Why did you multiply 3 by 12?<|im_start|>assistant\nBecause there are 3 boxes.")
    assert result.label == "follow_up"
    assert result.reason.endswith("+cut_at_assistant_marker")


def test_visible_turn_after_closed_thinking_is_classified():
    result = label("<think>I could ask about the 12.</think>Why did you multiply 3 by 12?")
    assert result.label == "follow_up" and result.reason.endswith("+after_thinking")


def test_model_special_tokens_are_removed_before_classifying():
    assert label("[EOT][EOT]", special=("[EOT]",)).reason == "empty:special_tokens_only"


def test_thanks_with_a_grounded_question_is_a_follow_up_and_pure_thanks_is_not():
    assert label("Thanks! But why is it 26 and not 27?").label == "follow_up"
    assert label("Thanks a lot!").label == "acknowledgement"


def test_drift_wins_over_a_question():
    assert label("Great question! Would you like me to explain the subtraction?").label == "assistant_drift"


def test_weak_rules_are_marked_uncertain_and_strong_ones_are_not():
    assert is_uncertain(label("I am planning a trip to Japan next month"))
    assert not is_uncertain(label("<|im_start|>assistant\nDone."))
    assert not is_uncertain(label(APPLES_Q))


def test_registry_builds_rules_and_rejects_options():
    assert load_classifier("rules").classify([ClassifyInput(APPLES_Q, APPLES_R, "Thanks!")])[0].label == (
        "acknowledgement"
    )
    with pytest.raises(ConfigError):
        load_classifier("rules", threshold=0.5)


@pytest.mark.parametrize(
    ("turn", "query", "response", "gold", "why"),
    [
        ("How do I get better at managing my time?", "How can I improve my time management skills?",
         "Start by listing your tasks each morning.", "restatement",
         "paraphrase through synonyms (better/improve): word overlap cannot see it"),
        ("Aloha again! On my second day I hiked to Akaka Falls and tasted fresh pineapple.",
         "Compose a travel blog post about a trip to Hawaii.", "Aloha from the Big Island! My week in Hawaii started "
         "at a luau in Kona.", "assistant_drift", "continuing the blog in new words shares too few words"),
        ("Floating balls remind of marches, I wear them out your way.",
         "Write a haiku about autumn leaves. Do not use any commas.",
         "Red leaves drift and fall\nWhispers on the cooling ground\nThe year breathes out slow", "empty",
         "semantic gibberish made of real words"),
        ("Can you explain Australia's currency in more detail?", CANBERRA_Q, CANBERRA_R, "new_query",
         "'in more detail' and a query word look grounded though the answer never mentions currency"),
    ],
)
@pytest.mark.xfail(strict=True, reason="known rules failure; the 'why' parameter says what the rules miss")
def test_known_failures(turn, query, response, gold, why):
    assert label(turn, query, response).label == gold, why


def _gold(split: str) -> tuple[list[str], list[str]]:
    rows = [json.loads(line) for line in GOLD.read_text(encoding="utf-8").splitlines() if line.strip()]
    rows = [r for r in rows if r["split"] == split]
    predicted = [label(r["user_turn"], r["query"], r["response"]).label for r in rows]
    return [r["label"] for r in rows], predicted


def test_gold_set_is_large_varied_and_split():
    rows = [json.loads(line) for line in GOLD.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert len(rows) >= 300
    assert {r["split"] for r in rows} == {"dev", "heldout"}
    assert {r["dataset"] for r in rows} >= {"gsm8k", "math", "ifeval", "mt_bench", "conversation"}
    assert sum(r["hard"] for r in rows) >= 50


def test_held_out_macro_f1_meets_target():
    gold, predicted = _gold("heldout")
    assert agreement_report(gold, predicted).macro_f1 >= 0.85


@pytest.mark.xfail(strict=True, reason="held-out follow_up F1 is 0.845 today (target 0.9): misses are "
                   "self-contained-looking follow-ups and sibling questions; tuned on dev only")
def test_held_out_follow_up_f1_meets_target():
    gold, predicted = _gold("heldout")
    assert agreement_report(gold, predicted).per_label["follow_up"].f1 >= 0.9
