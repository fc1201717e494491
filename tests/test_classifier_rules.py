"""The rules classifier, pinned rule by rule on real examples (the gold set and real SmolLM2 turns)."""

import json
from pathlib import Path

import pytest

from userturn.classifiers import ClassifyInput, load_classifier
from userturn.classifiers.rules import classify_turn, is_uncertain
from userturn.classifiers.validation import agreement_report
from userturn.errors import ConfigError

GOLD = Path(__file__).parent / "data" / "gold_user_turns.jsonl"
# a fresh blind held-out set (rows with split "heldout"), written apart from the rules; the lead puts it
# here when it is ready (held-out v1 and v2 were scored once, then merged into the tuning split)
HELDOUT = Path(__file__).parent / "data" / "gold_user_turns_heldout.jsonl"
APPLES_Q = "Tom has 3 boxes with 12 apples in each box. He gives 10 apples to his neighbour. How many apples does Tom have left?"
APPLES_R = "Tom starts with 3 x 12 = 36 apples. After giving away 10, he has 36 - 10 = 26 apples left.\n#### 26"
SUM_Q, SUM_R = "What is 2 + 3?", "2 + 3 = 5"
# round-3 contexts, shortened from held-out v3 (now merged, origin heldout3)
SENT_Q = ('Rewrite the sentence "A bust of a man with a beard and mustache." in a more sophisticated way. Do not use '
          "commas in your response.")
SENT_R = "A sculpted likeness of a bearded and mustachioed gentleman rendered from the shoulders up."
POEM_Q = "Please help me write a poem for my valentine. I have been married to her for 20 years!"
POEM_R = "Twenty years of mornings, coffee warm and shared,\nTwenty years of proof that someone always cared."
ROT_Q = "A 90 degree clockwise rotation around -4 - 5i is applied to 3. What is the resulting complex number?"
ROT_R = "Translate: 3 - c = 7 + 5i. Multiply by i: -5 + 7i. Translate back: -9 + 2i. The result is -9 + 2i."
ORBIT_Q = ("Consider a satellite in a circular orbit around the Earth. The speed of the satellite decreases. What "
           "will happen to the satellite's orbital radius and period of revolution?")
ORBIT_R = "Its orbital radius will increase and its period will increase: v = sqrt(GM/r), and T = 2 pi r / v grows."
GERMAN_Q = "Give me a summary of the lobbying spending of Google and Amazon. Your response should be in German."
GERMAN_R = "Hier ist eine kurze Übersicht: Amazon gab etwa 19,7 Millionen US-Dollar aus, Google etwa 13,2 Millionen."
GRADE_Q = "What is 1 + 12 + 123 modulo 9?"
GRADE_R = "The digit sums are 1, 3 and 6, so the sum is 10, which is 1 modulo 9: n = 1."
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
        ("The solution uses the digit-sum rule correctly and reaches n = 1. Grade: A", GRADE_Q, GRADE_R,
         "meta:third_person_about_conversation"),
        ("Concise and complete. Grade: B+", GRADE_Q, GRADE_R, "meta:grades_the_exchange"),
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
        ("Great job! Now let's try another one: Mia practices piano 2 hours on Monday and 3 hours on Wednesday. "
         "How many hours does she practice in total?\n\nAnswer: 2 + 3 = 5 hours.", APPLES_Q, APPLES_R,
         "assistant_drift:question_followed_by_its_answer"),
        ("Furthermore, the Dyson Airblade is marginally less offensive, but only marginally.",
         "What is your opinion on hand dryers?", "Hand dryers are loud and unhygienic.",
         "assistant_drift:continues_the_answer"),
        ("Basil is a warm-weather herb native to tropical regions, so keep it away from cold drafts.",
         "What's a good way to keep basil alive indoors?", "Give it 6-8 hours of direct sun.",
         "assistant_drift:explains_the_query_subject"),
        ("Tom has 36 apples. He gives 10 away, so he has 26 apples left.", APPLES_Q, APPLES_R,
         "assistant_drift:statement_repeats_response"),
        ("Wait, I made a mistake. He gives away 12, so 36 - 12 = 24. The correct answer is 24 apples.", APPLES_Q,
         APPLES_R, "assistant_drift:corrects_its_own_answer"),
        ("Ich hoffe, diese Übersicht hilft Ihnen weiter! Wenn Sie weitere Fragen haben, stehe ich Ihnen gerne zur "
         "Verfügung.", GERMAN_Q, GERMAN_R, "assistant_drift:addresses_the_user_formally"),
        ("I hope she loves it! Happy Valentine's Day to you both! 💕", POEM_Q, POEM_R,
         "assistant_drift:offers_help_or_assistant_phrase"),
        ("Socrates also used irony. Would you like to know more about his trial?", "Which methods did Socrates use?",
         "Socrates mainly used the elenchus.", "assistant_drift:offers_help_or_assistant_phrase"),
        ("Day 1: 250 occupied, 750 free.\nDay 2: 300 occupied, 700 free.\nDay 3: 350 occupied, 650 free.\n"
         "Day 14: 900 occupied, 100 free.", "1000 beds, 200 occupied, 50 admitted a day. How many free after 14 days?",
         "200 + 700 = 900 occupied, so 100 free. Would you like me to show the count day by day?",
         "assistant_drift:multi_line_content"),
        # restatement
        (APPLES_Q, APPLES_Q, APPLES_R, "restatement:verbatim_query"),
        ("How many apples in 3 boxes of 12 if Tom gives 10 away?", APPLES_Q, APPLES_R,
         "restatement:query_word_overlap"),
        ("How many apples does Tom have left?", APPLES_Q, APPLES_R, "restatement:query_word_overlap"),
        ("can u help me with this one: tom has 3 boxes of 12 apples and gives 10 to his neighbour. how many "
         "apples are left", APPLES_Q, APPLES_R, "restatement:query_word_overlap_after_preamble"),
        (APPLES_Q + " Please show your steps.", APPLES_Q, APPLES_R, "restatement:query_repeated_with_instruction"),
        # acknowledgement
        ("Thanks!", APPLES_Q, APPLES_R, "acknowledgement:thanks_or_closing"),
        ("Thank you, I'll check the soil.", APPLES_Q, APPLES_R, "acknowledgement:thanks_or_closing"),
        ("Awesome, that's exactly what I got.", APPLES_Q, APPLES_R, "acknowledgement:thanks_or_closing"),
        ("Great list, thanks!", "Name three primary colors.", "1. red 2. yellow 3. blue",
         "acknowledgement:thanks_or_closing"),
        ("she's going to cry. thank you so much", POEM_Q, POEM_R, "acknowledgement:thanks_or_closing"),
        ("No, that's all. Thank you!", APPLES_Q, APPLES_R + "\nIs there anything else you'd like to know?",
         "acknowledgement:thanks_or_closing"),
        # follow-up
        ('can you explain in practical terms how does 2 + 3 make "5"\'s?', SUM_Q, SUM_R,
         "follow_up:question_grounded_in_response"),
        ("I got 27, are you sure it's 26?", APPLES_Q, APPLES_R, "follow_up:objection_grounded_in_response"),
        ("That's 5 sentences though, not 4.", "Write a story in exactly 4 sentences.",
         "One. Two. Three. Four. Five. The end.", "follow_up:objection_grounded_in_response"),
        ("What about New Zealand?", CANBERRA_Q, CANBERRA_R, "follow_up:question_grounded_in_response"),
        ("Can you explain more?", APPLES_Q, APPLES_R, "follow_up:question_without_own_topic"),
        ("so Tom had 36 before giving any away right", APPLES_Q, APPLES_R, "follow_up:question_grounded_in_response"),
        ("Now make it shorter", APPLES_Q, APPLES_R, "follow_up:question_without_own_topic"),
        ("Thanks! How many apples would 5 boxes make?", APPLES_Q, APPLES_R,
         "follow_up:partial_question_on_the_problem"),
        ("python please. something that renames all the files in a folder", "can you write code?",
         "Yes! I can write Python, JavaScript and more. What would you like me to write?",
         "follow_up:answers_the_response_question"),
        ("I've read the first one already", "Recommend two sci-fi novels.",
         "1. The Martian by Andy Weir. 2. Dune by Frank Herbert.", "follow_up:statement_refers_to_response"),
        # round 3: the response named as an object, revisions, challenges stated as claims
        ("What are some corner cases or edge cases in your solution? How do you handle them?", ORBIT_Q, ORBIT_R,
         "follow_up:question_names_the_response"),
        ("Can you make it rhyme less obviously, and mention that we met in Lisbon?", POEM_Q, POEM_R,
         "follow_up:question_names_the_response"),
        ('"gentleman" feels a bit old-fashioned, could you pick a different word', SENT_Q, SENT_R,
         "follow_up:question_names_the_response"),
        ('"gentleman" feels a bit old-fashioned', SENT_Q, SENT_R, "follow_up:statement_refers_to_response"),
        ("I think the answer key says 1 - 12i", ROT_Q, ROT_R, "follow_up:challenge_with_another_value"),
        # new query
        ("How do I convert fluid across miss measurement into millilitre?", SUM_Q, SUM_R,
         "new_query:question_not_grounded"),
        ("What is the capital of New Zealand?", CANBERRA_Q, CANBERRA_R, "new_query:query_template_with_new_values"),
        ("Sara has 4 bags with 9 pears each. She eats 5. How many are left?", APPLES_Q, APPLES_R,
         "new_query:self_contained_problem_with_its_own_numbers"),
        ("Let's look at another classic problem: what is 7 + 8 divided by 5?", SUM_Q, SUM_R,
         "new_query:self_contained_new_exercise"),
        ("Write a pitch for a meal kit delivery service.", "Write a startup pitch for a time capsule service.",
         "MemoryVault: letters and photos delivered on a date you choose.",
         "new_query:self_contained_request_with_its_own_object"),
        ("What is the best way to write a professional email?", "Draft a professional email asking your supervisor for feedback on the quarterly report. Keep it short.",
         "Dear Ms. Smith, I hope this message finds you well. Best regards.",
         "new_query:self_contained_question_with_its_own_subject"),
        ("How do bakeries price their cupcakes?", APPLES_Q, APPLES_R, "new_query:question_not_grounded"),
        # round 3: the query's own request with a new value in one of its slots
        ('Rewrite the sentence "A dog running through a field of flowers." in a more sophisticated way. Do not use '
         "commas in your response.", SENT_Q, SENT_R, "new_query:query_request_with_new_quoted_object"),
        ("Write an essay on how Juliet is most to blame for the events at the end of the play.",
         "Write an essay on how Romeo is most to blame for the events that take place in the end of the book.",
         "While fate plays a part, Romeo's choices drive the story; Juliet only follows him.",
         "new_query:query_request_with_new_name"),
        ("How many apples does Tom have left if he has 5 boxes of 20 apples and gives 30 to his neighbour?",
         APPLES_Q, APPLES_R, "new_query:query_request_with_new_numbers"),
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


def test_restatement_and_sibling_are_told_apart_by_what_changed():
    # a paraphrase keeps the query's topic words; a sibling puts a new word in a topic word's slot
    coffee_q, coffee_r = "How do I make cold brew coffee at home?", "Steep coarse coffee in cold water for 12 hours."
    assert label("What's the best way to make cold brew at home?", coffee_q, coffee_r).label == "restatement"
    assert label("How do you make iced coffee at home?", coffee_q, coffee_r).label == "new_query"
    # the response's new facts (its numbers, its names) make a query-like turn a follow-up
    assert label("Which city is the capital of Australia?", CANBERRA_Q, CANBERRA_R).label == "restatement"
    assert label("Is Canberra the capital of Australia?", CANBERRA_Q, CANBERRA_R).label == "follow_up"


def test_pronouns_refer_back_unless_the_turn_names_its_own_subject():
    assert label("Is it hard to find?", CANBERRA_Q, CANBERRA_R).label == "follow_up"
    assert label("A car drives 120 km in 2 hours and 200 km in 3 hours. What is its average speed?").label == (
        "new_query")


def test_without_a_conversation_nothing_is_a_follow_up():
    # The no_context perturbation opens a user turn with no query and no response before it.
    label = classify_turn(ClassifyInput(query="", response="", user_turn="Can you help me create a plan to launch it?"))
    assert (label.label, label.reason) == ("new_query", "new_query:no_conversation")
    with_context = classify_turn(ClassifyInput(query="I am launching an app next month.", response="Congratulations!",
                                               user_turn="Can you help me create a plan to launch it?"))
    assert with_context.label == "follow_up"


def test_an_appeal_to_another_authority_challenges_the_answer():
    # not an answer-like statement of the assistant's ("the answer is 24"), but the user's objection
    assert label("My teacher says the answer is 24").label == "follow_up"


def test_questions_without_a_question_mark_are_found_in_later_clauses():
    # an inverted question after a comma, a question word after "so,": both asked, both about the answer
    assert label("nice that both lengths came out to sqrt(54), is that a coincidence", "Compute angle ABC.",
                 "|BA| = sqrt(54) and |BC| = sqrt(54), so the angle is 120 degrees.").label == "follow_up"
    assert label("So, what do I do with the 26 now.").label == "follow_up"


def test_pronouns_and_same_point_inside_the_turn_when_it_named_its_own_thing():
    # "is it legal" after "lobbying", "the same point" after "a geostationary satellite": the turn's own things
    assert label("What is lobbying and is it legal in Germany?", GERMAN_Q, GERMAN_R).label == "new_query"
    assert label("How does a geostationary satellite stay above the same point on Earth?", ORBIT_Q,
                 ORBIT_R).label == "new_query"
    # without a thing of its own they still point back
    assert label("Does the same trick work for 100?", SUM_Q, SUM_R).label == "follow_up"
    assert label("Who said that originally?", "Who taught Plato?", "Socrates taught Plato.").label == "follow_up"


def test_query_words_copied_into_the_turn_are_not_pointers():
    # "in your response" is the query's own phrase: the sibling request is new, a reference to the answer is not
    assert label('Is the sentence "The team are playing well." grammatically correct?',
                 'Is the sentence "Mrs. Smith is the teacher." grammatically correct? Answer in your response.',
                 'Yes, "Mrs. Smith is the teacher." is grammatically correct.').label == "new_query"
    assert label('Is "likeness" a common word?', SENT_Q, SENT_R).label == "follow_up"


@pytest.mark.parametrize(
    ("turn", "query", "response", "gold", "why"),
    [
        ("How do I get better at managing my time?", "How can I improve my time management skills?",
         "Start by listing your tasks each morning.", "restatement",
         "paraphrase through synonyms (better/improve): word overlap cannot see it"),
        ("Can you recommend some good sci-fi books for a beginner?",
         "Can you recommend a few sci-fi novels for someone new to the genre?",
         "Here are some approachable picks: 1. The Martian by Andy Weir. 2. Ender's Game by Orson Scott Card.",
         "restatement", "synonyms (books/novels, beginner/new to the genre) share too few words"),
        ("What's the difference between viruses and bacteria, in simple words?",
         "Explain the difference between a virus and a bacterium in simple terms.",
         "Bacteria are living cells; viruses are much smaller and are not cells.", "restatement",
         "a synonym in the slot of the query's last word ('simple words' for 'simple terms') looks like a sibling "
         "question with a new value"),
        ("Aloha again! On my second day I hiked to Akaka Falls and tasted fresh pineapple.",
         "Compose a travel blog post about a trip to Hawaii.", "Aloha from the Big Island! My week in Hawaii started "
         "at a luau in Kona.", "assistant_drift", "continuing the blog in new words shares too few words"),
        ("Floating balls remind of marches, I wear them out your way.",
         "Write a haiku about autumn leaves. Do not use any commas.",
         "Red leaves drift and fall\nWhispers on the cooling ground\nThe year breathes out slow", "empty",
         "semantic gibberish made of real words"),
        ("What is the speed of light?", "A train travels 60 miles per hour for 2.5 hours. How far does it go?",
         "Distance = speed x time = 60 x 2.5 = 150 miles. #### 150", "new_query",
         "one common word the response introduced ('speed') counts as grounding; word rarity is not known"),
        ("How old will John be in 5 years?", "John is twice as old as his sister. In 5 years, the sum of their "
         "ages will be 40. How old is John now?", "John is 20. #### 20", "follow_up",
         "a new question built only from the query's words reads as a restatement"),
        ("Why can't I just average 90 and 50?", "A train travels 180 km in 2 hours and then 150 km in 3 hours. "
         "What is its average speed for the whole trip?", "Total distance = 330 km, total time = 5 hours, "
         "330 / 5 = 66 km/h. #### 66", "follow_up",
         "challenges the method with numbers nobody wrote (the two legs' speeds): nothing to match"),
        ("If supplies cost $600 and tickets cost 50% more than the supplies, how much do the tickets cost?",
         "Jen has to pay $400 for the supplies. The tickets cost 50% more than the supplies. How much does travel "
         "cost?", "50% of $400 is $200, so the tickets cost $400 + $200 = $600.\n#### 600", "new_query",
         "a sibling problem whose new value happens to be the response's answer (600) reads as grounded in it"),
        ("How much did Josh lose?", "Josh buys a house for $80,000 and puts in $50,000 in repairs. This increased "
         "the value of the house by 150%. How much profit did he make?", "The profit is $80,000 - $80,000 = "
         "$10,000.", "follow_up", "a short question about the problem's character with one new word ('lose'): "
         "no number, no pointer, so it looks self-contained"),
        ("Find the sum of the infinite geometric series with first term $a$ and common ratio $r$ such that |r| < 1.",
         "Find a way to write the double sum in terms of $p$ and $q$.", "We can use the formula for the sum of a "
         "geometric series with ratio $r$.", "new_query", "a textbook question that reuses two words only the "
         "response used ('geometric series'): grounding cannot tell topic words from references"),
        ("Which methods did Plato employ in his dialogues?", "Which methods did Socrates employ to challenge the "
         "prevailing thoughts of his time?", "Socrates used the elenchus, irony and maieutics, as Plato's dialogues "
         "show.", "new_query", "a sibling whose new name the response mentioned and whose frame changed after it: "
         "too few of the query's word pairs are kept to call it the query's request"),
        ("What is the largest ocean on Earth?", "What is the largest ocean in the world?",
         "The Pacific Ocean is the largest ocean in the world, larger than all the land on Earth.", "restatement",
         "a synonym ('on Earth' for 'in the world') that the response happened to use reads as grounding"),
        ("Compute the angle between the vectors (1, 2, 2) and (2, -1, 2) in degrees.",
         "Let A = (1,-11,2), B = (3,-4,1), and C = (-2,1,-1). Compute angle ABC, in degrees.",
         "BA = (-2, -7, 1) and BC = (-5, 5, -2), so the angle is 120 degrees.", "new_query",
         "a new exercise whose numbers all occur in the query (1, 2, -1): it looks like a partial restatement"),
        ("I'm using a recipe that requires a lot of mayonnaise, I'm not sure if it's safe to use. Can you help me "
         "find a recipe that doesn't require mayonnaise?", "My mayonnaise became runny, can I salvage it?",
         "Add an egg yolk, or check that you aren't using spoiled ingredients in the mayonnaise.", "new_query",
         "'I'm not sure' reads as an objection and 'it' as a pointer, though both are about the turn's own recipe"),
    ],
)
@pytest.mark.xfail(strict=True, reason="known rules failure; the 'why' parameter says what the rules miss")
def test_known_failures(turn, query, response, gold, why):
    assert label(turn, query, response).label == gold, why


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _gold(split: str) -> tuple[list[str], list[str]]:
    rows = _rows(GOLD) + (_rows(HELDOUT) if HELDOUT.exists() else [])
    rows = [r for r in rows if r["split"] == split]
    predicted = [label(r["user_turn"], r["query"], r["response"]).label for r in rows]
    return [r["label"] for r in rows], predicted


def test_gold_set_is_large_varied_and_marks_its_history():
    rows = _rows(GOLD)
    assert len(rows) >= 820
    # each held-out part was scored once, then inspected while tuning, so it joined the tuning split
    assert {r["split"] for r in rows} == {"dev"}
    assert {r["origin"] for r in rows} == {"dev1", "heldout1", "dev2", "heldout2", "heldout3"}
    assert {r["dataset"] for r in rows} >= {"gsm8k", "math", "ifeval", "mt_bench", "conversation"}
    assert sum(r["hard"] for r in rows) >= 50


def test_dev_figures_do_not_regress():
    gold, predicted = _gold("dev")
    report = agreement_report(gold, predicted)
    # all 824 lines (dev1, heldout1, dev2, heldout2, heldout3) were tuned on: macro-F1 0.970, follow_up F1 0.975
    assert report.macro_f1 >= 0.965 and report.per_label["follow_up"].f1 >= 0.97


def _held_out_report():
    rows = _rows(HELDOUT)
    assert rows and {r["split"] for r in rows} == {"heldout"}
    return agreement_report(*_gold("heldout"))


@pytest.mark.skipif(not HELDOUT.exists(), reason="the fresh blind held-out set has not landed yet")
def test_held_out_does_not_lose_ground(record_property):
    report = _held_out_report()
    record_property("heldout_macro_f1", round(report.macro_f1, 3))
    record_property("heldout_follow_up_f1", round(report.per_label["follow_up"].f1, 3))
    # Floors just under today's figures on v4 (0.847, 0.776), not the targets (below).
    assert report.macro_f1 >= 0.84
    assert report.per_label["follow_up"].f1 >= 0.76


@pytest.mark.skipif(not HELDOUT.exists(), reason="the fresh blind held-out set has not landed yet")
@pytest.mark.xfail(strict=False, reason="macro-F1 >= 0.85 on unseen text is the issue's target: v3 gave 0.874, "
                   "v4 (the current file) 0.847")
def test_held_out_meets_the_macro_f1_target():
    assert _held_out_report().macro_f1 >= 0.85


@pytest.mark.skipif(not HELDOUT.exists(), reason="the fresh blind held-out set has not landed yet")
@pytest.mark.xfail(strict=False, reason="follow_up F1 >= 0.9 on unseen text is the issue's target; the blind "
                   "held-out sets gave 0.845 (v1), 0.778 (v2), 0.816 (v3) and 0.776 (v4, the current file): not met")
def test_held_out_meets_the_follow_up_target():
    assert _held_out_report().per_label["follow_up"].f1 >= 0.9
