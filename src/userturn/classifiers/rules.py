"""The rules classifier: deterministic, offline, auditable labels for generated user turns.

Every label names the rule that fired in ``Label.reason`` (``"<label>:<rule>"``) and carries a
``confidence`` in (0, 1]: rules built on strong surface evidence (a leaked role marker, a verbatim
repeat) score high, rules that fall back on weak evidence score low, so that an ensemble can send
only the uncertain cases to an LLM judge (see :data:`UNCERTAIN_BELOW`).

The rules run in a fixed order; the first that fires decides:

1. leaked role markers: text after an assistant header is cut off (a header first = drift);
2. ``empty``: nothing left, special tokens only, punctuation only, repetition loops, gibberish;
3. ``meta``: thinking traces, third-person talk about "the user"/"the assistant", grades (also a
   letter grade anywhere);
4. ``assistant_drift``: speaker labels, a self-correction ("I made a mistake ... the correct answer
   is"), a formal "you" in a statement (Sie, vous, usted, ...), offers of help and closings addressed to
   the user, assistant openers, solution steps, a question or exercise followed by its own answer;
5. ``restatement``: the turn's words are the query's words, or are contained in one sentence of the
   query, also after a short preamble ("can u help me with this one: ..."), without the response's
   new facts (its numbers and names), without words that point at the conversation, and without a
   new value in place of a topic word (that is a sibling question); the whole query followed by a short
   instruction is a restatement too;
6. ``acknowledgement``: thanks/praise/closing with no question and no contradiction ("Awesome,
   that's exactly what I got" agrees);
7. statements opening with a continuation ("Furthermore, ...") continue the answer;
8. questions, requests (also in a later sentence, after "now"/"let's", or a tag like "..., right")
   and objections: ``new_query`` when the turn states its own problem (a new exercise announced as
   such, two or more numbers of its own, a request with its own "a ..." object, a long question
   with an indefinite or superlative subject) and only the response's numbers, two of its words or
   a named part of it could tie it back; ``follow_up`` when grounded in the response (words or
   numbers the response introduced, its final answer, or words that only make sense with the
   conversation: "that", "what if", "instead", "step 2", "too", "do one where ..."), when it puts a
   new value on one of the problem's things ("How many liters would 7 cows make?"), or when it has
   no topic of its own ("Can you explain more?"); ``new_query`` otherwise, or when it is the
   query's template with new values, or the query's own request with a new quoted object, name or
   numbers in one of its slots. A turn the grounding rules call ``new_query`` is still a ``follow_up``
   when it names the response as its object ("your solution", "make it ...", "pick a different
   word", a quoted word of the answer) or objects with another value ("the answer key says 1 - 12i");
9. plain statements: ``follow_up`` when they answer the response's closing question with its words,
   ``assistant_drift`` when they repeat the response's content or explain the query's subject
   impersonally, ``follow_up`` when they name the answer or a part of it ("I've read the first one"),
   else ``new_query``.

Everything here is a pure function of :class:`~userturn.classifiers.ClassifyInput`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import filterfalse

from userturn.classifiers import ClassifyInput, register_classifier
from userturn.errors import ConfigError
from userturn.records import Label

UNCERTAIN_BELOW = 0.7
"""Labels with a confidence below this are the ones ``--judge-only-uncertain`` sends to the judge."""

# ---------------------------------------------------------------------------------------------
# Text normalisation
# ---------------------------------------------------------------------------------------------

_SPECIAL_TOKEN = re.compile(
    r"<\|[^<>|\n]{1,40}\|>|</?s>|\[/?INST\]|<(?:start|end)_of_turn>|<bos>|<eos>|<pad>|<unk>"
)
# A header that opens a turn of another speaker: everything after it is not the user's turn.
_ASSISTANT_HEADER = re.compile(
    r"(?:<\|im_start\|>|<\|start_header_id\|>|<start_of_turn>)\s*(?:assistant|model|system)\b"
    r"|<\|assistant\|>|<\|system\|>|\[/INST\]",
    re.IGNORECASE,
)
_USER_HEADER = re.compile(
    r"(?:<\|im_start\|>|<\|start_header_id\|>|<start_of_turn>)\s*user\b(?:<\|end_header_id\|>)?|<\|user\|>",
    re.IGNORECASE,
)
_USER_SPEAKER = re.compile(r"^\s*(?:user|human|me|question from user)\s*[:\n]\s*", re.IGNORECASE)
_SPEAKER_INITIALS = frozenset("uUhHmMqQ")
_ASSISTANT_SPEAKER = re.compile(r"^\s*(?:assistant|ai|bot|model|chatbot|gpt|smollm\w*)\s*[:\n]")
_THINK_CLOSED = re.compile(r"<think(?:ing)?>(.*?)</think(?:ing)?>", re.IGNORECASE | re.DOTALL)
_THINK_OPEN = re.compile(r"<think(?:ing)?>|</think(?:ing)?>", re.IGNORECASE)

# words (possessive 's dropped: "hawaii's" -> "hawaii"; a word stops before a digit, so "log2" and "log_2"
# are "log" + "2"; "my_list" stays one word), numbers with decimals
_TOKEN = re.compile(r"[^\W\d_]+(?:(?:_+|'(?!s\b))[^\W\d_]+)*|\d+(?:\.\d+)?")
_ASCII_WORD = re.compile(r"\b[a-z]{3,}\b")
_NO_VOWEL_WORD = re.compile(r"\b[b-df-hj-np-tv-xz]{3,}\b")
_WORDISH = re.compile(r"\w", re.UNICODE)
_NUMBER = re.compile(r"\d+(?:\.\d+)?")

_STOPWORDS = frozenset(
    """a an the and or but if so of to in on at by for with without from into onto about as is are was were be been
    being am do does did doing done have has had having i me my mine we us our you your yours he him his she her it its
    they them their this that these those there here what which who whom whose when where why how not no nor
    than then too very can could would should will shall may might must just also only own same such both each
    few more most other some any all again further once up down out off over under above below between through
    during before after while until because please s t d ll m re ve y o let lets let's i'm i'd i'll you're it's
    that's what's there's don't doesn't didn't isn't aren't wasn't weren't can't couldn't won't wouldn't shouldn't
    haven't hasn't hadn't one get got make made give tell show explain
    write find use using used like want need know think say said see look go going way thing things something
    really well okay ok yes yeah sure thanks thank hi hello hey oh ah hmm um new now i've you've we're they're
    anything something everything nothing already right much many every like""".split()
)
_QUESTION_START = frozenset(
    """what why how when where which who whom whose is are was were do does did can could would will should shall
    may might isn't aren't don't doesn't didn't can't couldn't won't wouldn't shouldn't have has any and""".split()
)
_REQUEST_VERBS = frozenset(
    """explain show tell give list write rewrite make add remove shorten expand translate summarize summarise
    simplify solve find compute calculate describe compare provide suggest recommend continue try use wrap check
    double-check clarify elaborate plan compose draft create generate convert define help fix change redo repeat
    include walk break prove verify replace keep put turn go do start""".split()
)

# Words whose meaning depends on the conversation: a question that uses them refers to the response.
# Pronouns ("it", "they") and the demonstrative "that" are handled apart (see _refers_back): they
# often point inside the turn itself ("a list that ...", "A car ... What is its speed?").
_CONTEXT_DEPENDENT = re.compile(
    r"\b(?:you said|you wrote|you mentioned|you used|you did|you got|you chose|(?<!would )(?<!could )you choose|you add|you multiply|"
    r"you divide|you group|you know|your (?:answer|response|reply|solution|explanation|example|list|code|story|"
    r"email|poem|haiku|program|query|previous|first|second|last|summary|tips?|steps?|method|calculation|letter|"
    r"version|result|draft|suggestions?|recommendations?)|"
    r"the above|above(?=\s*[.,;:!?]|\s*$)|one sentence|which one|the two|the first one|double-check|"
    r"(?:the|that|this) (?:first|second|third|fourth|fifth|last|next|other|final|middle|\d+(?:st|nd|rd|th)) "
    r"(?:one|step|part|tip|example|line|paragraph|film|sentence|stanza|verse|item|point|option|book|answer|"
    r"method|equation|bit|word|pair|term|factor|number)s?|"
    r"(?:step|tip|number|point|line|paragraph|example|option|item|stanza) ?#?\d+|#\d+|"
    r"(?:do|write|make|try|give me|show me|compose|create|draw|need|want|pick|recommend|suggest) "
    r"(?:another |a (?:\w+ )?)?one\b(?!-| (?:of|more|paragraph|sentence|word|line|page|day|hour)\b)|"
    r"(?:which|what) of (?:them|those|these)|any (?:\w+ )?ones|ones like|like that|"
    r"as well|what about|what if|what happens (?:if|when|to)|how about|how come|why not|why (?:do|did|would) you|in other words|in practical terms|"
    r"simpler words)\b|"
    r"\bthen\s*[?.!]?\s*$|"
    r"^\s*(?:(?:can|could|would) you |please |now,? |ok(?:ay)?,? now,? )?(?:add|rewrite|shorten|expand|rephrase|"
    r"revise|change|edit|remove|make it|redo|continue|wrap it|replace|swap|translate it|summari[sz]e it|"
    r"keep going|go on|elaborate|do the same)\b")
# single words with the same meaning, looked up in the turn's token set (faster than a regex)
_CONTEXT_WORDS = frozenset(
    "this those these previous earlier again instead another less shorter longer simpler verify "
    "too both either".split())
# "same" points back ("Does the same trick work for 100?") unless the turn first introduced its own thing
# ("How does a geostationary satellite stay above the same point on Earth?")
_RESTATEMENT_BLOCKERS = _CONTEXT_WORDS | {"same"}
_OWN_THING_BEFORE_SAME = re.compile(r"\b(?:a|an)\s+\w.*\bsame\b")
# "that" pointing at the conversation: at a sentence start, after a verb or preposition, or before
# a noun of the answer / at the end ("why is that?"); not the relative "a list that does ...".
_DEICTIC_THAT = re.compile(
    r"(?:^|[,.;:!?]\s*|\b(?:is|was|isn't|does|do|did|about|of|with|on|in|for|to|explain|mean|means|by|from|"
    r"why|how|at|like|repeat|redo|change|keep|use|try|get|understand|follow|see|make|after|before|than|"
    r"and|but)\s+)that\b(?!\s+(?:is|was|are|were|has|have|does|do|can|will|would)\b(?!\s*[?.!]))|"
    r"\bthat(?:'s|\s+(?:one|step|part|line|number|answer|result|example|list|formula|equation|word|sentence|"
    r"method|bit|way|poem|story|email|letter|recipe|explanation|version|trick|rule)\b|\s*[?.!,]|\s*$)")
# "Who said that originally?": "that" as the object of a question about where the answer's words come from
_WH_SAID_THAT = re.compile(r"\b(?:who|where|when|why) (?:\w+ ){0,2}(?:said|say|says|wrote|write|coined|invented|came up with) that\b")
# Stronger than _CONTEXT_DEPENDENT: names a part of the answer, enough to make a plain statement a follow-up.
_PART_REFERENCE = re.compile(
    r"\b(?:(?:the|that|this|your) (?:first|second|third|fourth|fifth|last|final|middle|\d+(?:st|nd|rd|th)) "
    r"(?:one|step|part|tip|example|line|paragraph|film|sentence|stanza|verse|item|point|option|book|answer|"
    r"method|equation|bit|word|pair|term|factor)s?|(?:step|tip|line|paragraph|example|option|item|stanza) "
    r"?#?\d+|instead|you (?:said|wrote|mentioned|used|forgot|missed|skipped)|your (?:answer|response|reply|"
    r"solution|explanation|example|list|code|story|poem|steps?|method|calculation|letter|version|result))\b")
# The response as an object: "your solution", "you said", "make it shorter", "pick a different word". Stronger
# than _CONTEXT_DEPENDENT: a request or question that names the answer this way is about it however many
# words of its own it adds ("Can you make it rhyme less obviously, and mention that we met in Lisbon?").
_ARTIFACT = (
    r"answer|response|reply|solution|explanation|example|list|code|story|email|poem|haiku|program|summary|"
    r"tip|step|method|calculation|letter|version|result|draft|suggestion|recommendation|idea|advice|approach|"
    r"reasoning|logic|proof|essay|itinerary|plan|translation|sentence|wording|table|recipe|outline|argument|"
    r"claim|definition|words?|text|output|edit|change|rewrite|song|lyric|script|function|formula|math|"
    r"numbers?|work|point|title|line|paragraph|verse|stanza|description|comparison|options?|choices?|picks?")
_RESPONSE_OBJECT = re.compile(
    r"\byour (?:new |last |first |second |previous |original |earlier |own |final |current )?(?:" + _ARTIFACT
    + r")s?\b|"
    r"\byou (?:said|wrote|mentioned|used|chose|picked|gave|listed|suggested|recommended|forgot|missed|skipped|"
    r"called|described|put|included|left out|added|changed|made)\b|"
    # a revision verb with the answer as its object
    r"\b(?:make|change|rewrite|shorten|lengthen|translate|rephrase|reword|simplify|expand|edit|revise|redo|"
    r"convert|adapt|tweak|modify|adjust|polish|extend|finish|trim|format|summari[sz]e|proofread|reformat) "
    r"(?:it|this|that|them|these|those)\b|"
    # a revision request: another word/title/example in place of one of the answer's
    r"\b(?:pick|choose|use|try|find|give me|suggest|think of) (?:a |an |some )?(?:different|other|another|"
    r"new|better|simpler|shorter|longer|less \w+|more \w+) (?:word|phrase|title|name|ending|line|example|"
    r"version|term|opening|rhyme|verb|adjective|metaphor)s?\b")
# a quoted word or phrase: "gentleman" feels old-fashioned (the answer's word, when the response has it)
_QUOTED = re.compile(r"[\"“”]([^\"“”\n]{2,80})[\"“”]|(?:^|(?<=[\s(]))'([^'\n]{2,60})'(?=[\s.,;:!?)]|$)")


_POINTER = re.compile(f"{_RESPONSE_OBJECT.pattern}|{_PART_REFERENCE.pattern}")


def _quotes(text: str) -> list[str]:
    if '"' not in text and "'" not in text and "“" not in text:
        return []
    return [(a or b).strip().lower() for a, b in _QUOTED.findall(text)]


def _points_at_response(text: str, ctx: _Context) -> str:
    """Why the turn names the response itself as its object ("" when it does not)."""
    for match in _POINTER.finditer(text):
        if match.group(0) not in ctx.query_lower:  # "in your response" copied from the query is its frame
            return "names_the_response"
    for quote in _quotes(text):
        if quote in ctx.response_lower and quote not in ctx.query_lower:
            return "quotes_the_response"
    return ""


_PRONOUN = re.compile(r"\b(?:it|its|them|they|their|those)\b")
# Weaker hints of context: "why ...?", "also", "more", "an example" lean on the conversation but also
# open plenty of self-contained questions.
_CONTEXT_HINT = re.compile(
    r"\b(?:why|also|still|really|else|other|more|example|explain|so)\b")
_YES_NO_START = re.compile(r"^\s*(?:yes|yeah|yep|sure|ok(?:ay)?|please|no|nope|not really)\b")
_ELLIPTICAL_START = re.compile(r"^\s*(?:and|so|but|what about|what if|how about|then|or|also|ok so|okay so)\b")
# an appeal to another authority: "the answer key says 1 - 12i", "my teacher said it's 8"
_AUTHORITY = (r"(?:the|my|our) (?:answer key|key|book|textbook|teacher|professor|tutor|worksheet|calculator|"
              r"solutions?) (?:says|said|gives|gave|shows|showed|has|had|lists)|wolfram(?: alpha)? (?:says|gives|gave)")
_AUTHORITY_CLAIM = re.compile(r"\b(?:" + _AUTHORITY + r")\b")
_OBJECTION = re.compile(
    r"\b(?:wrong|incorrect|mistake|not right|not correct|doesn't work|does not work|didn't work|crash(?:es|ed)?|"
    r"error|shouldn't|should be|isn't it|aren't you|are you sure|i (?:got|thought|think|believe|don't get|"
    r"don't understand|do not understand|don't see|'m confused|am confused|'m not (?:sure|convinced)|am not sure|"
    r"'ve (?:read|seen|tried)|work|tried)|you forgot|you missed|you made|though|actually|but|however|"
    r"not \d+|confus(?:ed|ing)|doesn't make sense|makes no sense|hmm|wait|really\?|"
    r"(?:" + _AUTHORITY + r"))\b")
# a turn that opens with "no," contradicts the answer (not "no thanks", "no problem")
_NO_START = re.compile(r"\s*(?:no|nope)\b(?![\s,!.]*(?:thanks?|thank you|problem|worries|need)\b)")


def _objects(text: str) -> bool:
    return bool(_OBJECTION.search(text) or _NO_START.match(text))


# contradiction proper: without one of these, "Awesome, that's exactly what I got" is not an objection
_CONTRAST = re.compile(
    r"\b(?:but|though|however|not|no|nope|wrong|incorrect|mistake|wait|hmm|actually|confus\w*|error|sure|"
    r"should|why)\b|n't\b")
_ACK = re.compile(
    r"\b(?:thanks?|thank you|thx|ty|tysm|cheers|merci|gracias|danke|arigatou?|appreciate(?:d)?|"
    r"great|perfect|awesome|cool|nice|excellent|brilliant|lovely|wonderful|amazing|fantastic|neat|"
    r"ok(?:ay)?|alright|got it|gotcha|understood|makes sense|that helps|helpful|clear|correct|you're right|"
    r"good job|very good|sounds good|bye|goodbye|see you|hello|hi|hey|haha+|lol|wow|love it|i see|will do|sounds good|"
    r"very informative|informative|interesting|love it|haha|beautiful|gorgeous|superb|well done|spot on)\b")
_ACK_FILLER = re.compile(
    r"\b(?:i'll|i will|will|i'm going to|going to|gonna) (?:try|check|send|watch|read|use|do|look|give)\b.*$")

_META_THIRD_PERSON = re.compile(
    r"\bthe user(?:'s)?\s+(?:is|wants|wanted|asked|asks|has|had|requested|requests|seeks|needs|was|would|"
    r"might|may|seems|appears|expects|just|question|request|query|intent)\b|"
    r"\bthe assistant(?:'s)?\b|\bas (?:a|the) (?:follow-up )?user,? i\b|"
    r"\bthe (?:response|reply|summary|output) (?:is|was|follows|satisfies|fulfils|fulfills|"
    r"meets|gives|provides|contains|correctly|accurately|seems|looks|stays|uses|violates)\b|"
    r"\bthe (?:answer|solution) (?:is|was|looks|seems) (?:correct|incorrect|wrong|right|accurate|fine|good)\b|"
    # a review of the solution's method: "The solution uses the digit-sum rule correctly"
    r"\bthe (?:solution|response|reasoning|proof|derivation) (?:uses|applies|follows|handles|identifies|computes)"
    r" (?:[^.?!]{0,60}?) (?:correctly|accurately|properly|appropriately)\b|"
    r"\b(?:this|the) (?:conversation|exchange|dialogue|interaction)\b|\bnow i need to write\b|"
    r"\bi (?:should|need to|will) (?:respond|reply|answer|write a user)\b")
_META_GRADE = re.compile(
    r"\[\[\s*\d+(?:\.\d+)?\s*\]\]|\b(?:score|rating|grade|verdict|overall)\s*[:=]\s*\[*\d|"

    r"\b\d{1,2}(?:\.\d)?\s*/\s*10\b|\b(?:pass|fail)\.?\s*$")

# a letter grade anywhere: "... The reasoning is concise and complete. Grade: A"
_LETTER_GRADE = re.compile(r"\bgrade\s*[:=]\s*[a-f][+-]?(?![\w'])")
_DRIFT_OFFER = re.compile(
    r"\bi hope (?:this|that|it|these) (?:helps|clarifies|answers|was helpful)|\blet me know if\b|"
    r"\bfeel free to\b|\banything else (?:i can|you'd like|you would like|you need)\b|"
    r"\bhow (?:can|may) i (?:help|assist)\b|\bi'?d be (?:happy|glad) to\b|\bhappy to help\b|"
    r"\byou'?re (?:very )?welcome\b|\b(?:great|good|excellent) question\b|\bas an ai\b|"
    r"\bi'?m sorry,? but i (?:can(?:not|'t)?|am unable)\b|\bi(?:'m| am) (?:an ai\b|a (?:\w+ )?language model)|\bi apologi[sz]e\b|\bwould you like me to\b|"
    r"\b(?:do|if) you have any (?:other|more|further|additional)? ?questions\b|"

    r"\bhere(?: is|'s| are) (?:a|an|the|some|my|your|three|two|five|more|another|a revised|an updated|"
    r"an improved|an example|the revised|the updated)\b|\bi can help (?:you )?with\b")
_THANKS = re.compile(r"\bthanks?\b|\bthank you\b|\bappreciate")
_DRIFT_OPENER = re.compile(r"^\s*(?:sure|certainly|of course|absolutely|great|alright)\s*[!.,:]")
_USER_REQUEST_AFTER_OPENER = re.compile(
    r"\b(?:show me|tell me|give me|can you|could you|please|i'd like|i would like|i want|go ahead|let's see)\b")
_DRIFT_SOLUTION = re.compile(
    r"^\s*(?:let'?s (?:break|solve|start|denote|calculate|compute|think|go through|work|begin|call|say|assume|"
    r"use|find|first|look|analy[sz]e)|let me (?:solve|explain|calculate|compute|walk|break|show|help|think|"
    r"check|try|start)|step 1\b|first,? (?:we|let's|i|you need)|to (?:solve|find|calculate|compute) (?:this|the)|"
    r"therefore|thus|hence|so the (?:final )?answer|the (?:final )?answer is\b(?! (?:correct|incorrect|wrong|right)))")
_DRIFT_ANSWER_MARK = re.compile(
    r"\\boxed|####|\bthe (?:final )?answer is\b(?! (?:correct|incorrect|wrong|right))|"
    r"\b(?:step \d+\s*:)|\bwe (?:have|get|need|can|know|find|see|obtain)\b|^```|^\s*answer\s*:",
    re.MULTILINE,
)
_QA_PAIR = re.compile(r"^\s*(?:question|q)\s*:.*\n\s*(?:answer|a)\s*:", re.DOTALL)
_LIST_ITEM = re.compile(r"^\s*(?:\d+[.)]|[-*•])\s+\S", re.MULTILINE)
_INLINE_LIST = re.compile(r"(?:^|\s)\d+[.)]\s+\S.*?(?:^|\s)\d+[.)]\s+\S", re.DOTALL)


_NUMBER_WORDS = {w: str(i) for i, w in enumerate(
    "zero x two three four five six seven eight nine ten eleven twelve".split()) if i != 1}


@lru_cache(maxsize=1 << 16)
def _stem(word: str) -> str:
    """A deliberately crude stemmer: number words to digits, suffixes off, then the first six letters.

    Enough to match "apples"/"apple", "divided"/"divide", "viruses"/"virus" and "summary"/"summarize"; rare collisions
    ("experience"/"experiment") cost less than missed paraphrases.
    """
    if word in _NUMBER_WORDS:
        return _NUMBER_WORDS[word]
    if len(word) > 5 and word.endswith("ing"):
        word = _undouble(word[:-3])
    elif len(word) > 5 and word.endswith("ed"):
        word = _undouble(word[:-2])
    elif len(word) > 4 and word.endswith(("xes", "zes", "ches", "shes", "uses", "sses")):
        word = word[:-2]  # boxes -> box, viruses -> virus, classes -> class
    elif len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    if len(word) > 4 and "our" in word:
        word = word.replace("our", "or")  # colour/color, favourite/favorite (both sides alike)
    if len(word) > 3 and word.endswith("e"):
        word = word[:-1]  # divide/divided, apple/apples, mile/miles
    return word[:6]


def _undouble(word: str) -> str:
    """"wrapp" (from "wrapped") -> "wrap"; "fall" and "add" keep their double letter."""
    if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "aeiouyls":
        return word[:-1]
    return word


_SYNONYMS = re.compile(r"square root|\\?sqrt|√")


def _tokens(text: str) -> list[str]:
    text = text.lower()
    if "sqrt" in text or "root" in text or "√" in text:
        text = _SYNONYMS.sub(" sqrt ", text)
    return _TOKEN.findall(text)


_REQUEST_STEMS = frozenset(_stem(v) for v in _REQUEST_VERBS)


def _content(tokens: Sequence[str]) -> frozenset[str]:
    """Stemmed content words: no stopwords, no request verbs ("explain", "summarize"); "three" is "3"."""
    stems = set(map(_stem, filterfalse(_STOPWORDS.__contains__, tokens)))
    stems -= _REQUEST_STEMS
    return frozenset(stems)


def _shape(tokens: Sequence[str]) -> frozenset[str]:
    """Word set with numbers replaced by a placeholder: the query's *template*."""
    return frozenset("<n>" if t[0].isdigit() else _stem(t) for t in tokens)


@dataclass(frozen=True)
class _Context:
    query_tokens: tuple[str, ...]
    query_content: frozenset[str]
    query_shape: frozenset[str]
    query_norm: str
    response_content: frozenset[str]
    response_numbers: frozenset[str]
    response_has_list: bool
    response_asks: bool
    answer_numbers: frozenset[str]
    response_names: frozenset[str]
    query: str
    query_lower: str
    response_lower: str


# sentence ends, colons and quotes: "... the following question: \"What is your opinion on X?\""
_CLAUSE_END = re.compile(r"[.?!:;\n]+[\"'”’)]*\s+|[\"“”]")
_ANSWER_MARK = re.compile(r"\\boxed\{([^{}]*)\}|####\s*(\S+)|\banswer is\s*\$?(\S+)", re.IGNORECASE)


def _answer_numbers(response: str) -> frozenset[str]:
    """Numbers of the response's final answer (boxed, after ####, "the answer is"), or its last number."""
    if "boxed" not in response and "####" not in response and "answer is" not in response.lower():
        marked = []
    else:
        marked = [n for m in _ANSWER_MARK.finditer(response) for g in m.groups() if g for n in _NUMBER.findall(g)]
    if marked:
        return frozenset(marked)
    numbers = _NUMBER.findall(response)
    return frozenset(numbers[-1:])


@lru_cache(maxsize=4096)
def _query_sentences(query: str) -> tuple[frozenset[str], ...]:
    """Content words of each sentence (or quoted part) of the query, for the containment test."""
    return tuple(c for c in (_content(_tokens(p)) for p in _CLAUSE_END.split(query)) if len(c) >= 2)


@lru_cache(maxsize=4096)
def _context(query: str, response: str) -> _Context:
    """Features of one (query, response) pair; cached because k sampled turns share one context."""
    q_tokens = tuple(_tokens(query))
    r_tokens = _tokens(response)
    return _Context(
        query_tokens=q_tokens,
        query_content=_content(q_tokens),
        query_shape=_shape(q_tokens),
        query_norm=" ".join(q_tokens),
        response_content=_content(r_tokens),
        response_numbers=frozenset(_NUMBER.findall(response)),
        response_has_list=bool(_INLINE_LIST.search(response)),
        response_asks=response.rstrip().endswith("?"),
        answer_numbers=_answer_numbers(response),
        response_names=frozenset(_stem(n.lower()) for n in _PROPER_NOUN.findall(response)),
        query=query,
        query_lower=query.lower(),
        response_lower=response.lower(),
    )


def _label(label: str, rule: str, confidence: float, **details: object) -> Label:
    return Label(label=label, reason=f"{label}:{rule}", classifier="rules", confidence=confidence,
                 details=dict(details))


# ---------------------------------------------------------------------------------------------
# The rules, one function per label family
# ---------------------------------------------------------------------------------------------


def _strip_special(text: str, special_tokens: Sequence[str]) -> str:
    for token in special_tokens:
        if token and len(token) > 1:
            text = text.replace(token, " ")
    return _SPECIAL_TOKEN.sub(" ", text)


_SPACES = frozenset(" \t\n\r\x0b\x0c\xa0\u2002\u2003\u2009\u200a\u202f\u3000")


def _degenerate(text: str, tokens: Sequence[str]) -> Label | None:
    """``empty`` for text with no words, repetition loops, very low character diversity, or gibberish."""
    if not _WORDISH.search(text):
        return _label("empty", "no_words", 0.95)
    # set(text) minus its whitespace is the compact text's character set: when it is diverse enough, the
    # split and join are not needed
    if len(text) >= 20 and len(chars := set(text)) - len(chars & _SPACES) < 0.12 * len(text):
        compact = "".join(text.split())
        if len(compact) >= 20 and len(set(compact)) / len(compact) < 0.12:
            return _label("empty", "low_character_diversity", 0.9)
    if len(tokens) >= 5:
        distinct = len(set(tokens)) / len(tokens)
        if distinct < 0.34:
            return _label("empty", "repetition_loop", 0.9, distinct_token_ratio=round(distinct, 3))
    if len(tokens) >= 5:
        lowered = text.lower()
        # gibberish needs at least two words without vowels: count those first, the cheaper test
        no_vowel = len(_NO_VOWEL_WORD.findall(lowered))
        if no_vowel >= 2:
            alpha = len(_ASCII_WORD.findall(lowered))
            if alpha >= 5 and no_vowel / alpha >= 0.3:
                return _label("empty", "gibberish", 0.6)
    return None


def _may_grade(text: str) -> bool:
    """Cheap pre-check for _META_GRADE (it needs "[[", ":", "=", "/" or a final pass/fail)."""
    return "[[" in text or ":" in text or "=" in text or "/" in text or text.rstrip(". \n").endswith(("pass", "fail"))


def _may_mark_answer(text: str) -> bool:
    """Cheap pre-check for _DRIFT_ANSWER_MARK: each of its alternatives contains one of these."""
    return "answer" in text or "we " in text or "step" in text or "boxed" in text or "####" in text or "```" in text


def _meta(text: str, has_question: bool) -> Label | None:
    if "<" in text and _THINK_OPEN.search(text):
        return _label("meta", "thinking_tag", 0.95)
    if _META_THIRD_PERSON.search(text):
        return _label("meta", "third_person_about_conversation", 0.85)
    if not has_question and _may_grade(text) and (
            _META_GRADE.search(text) or ("grade" in text and _LETTER_GRADE.search(text))):
        return _label("meta", "grades_the_exchange", 0.8)
    return None


# an offer to go on ("Would you like to know more about his trial?") and wishes addressed to the user
# ("Happy Valentine's Day to you both!", "I hope she loves it!", "Enjoy your trip!"): kept apart from
# _DRIFT_OFFER, whose speed depends on every alternative starting with a word boundary (a "^" alternative
# makes the whole pattern four times slower)
_DRIFT_CLOSING = re.compile(
    r"\bwould you like (?:to (?:know|learn|hear|see|explore|read) more|more (?:details|information|examples))\b|"
    r"\b(?:do you want|shall) (?:me to|i) (?:explain|show|go|continue|write|elaborate|provide)\b|"
    r"\b(?:happy|merry) [\w' ]{1,30}? to you\b|\bto you (?:both|two|all)\b|\bgood luck with your\b|"
    r"\bi hope (?:she|he|they|your \w+) (?:loves?|likes?|enjoys?)\b")
# an assistant correcting its own answer: "Wait, I made a mistake. ... The correct answer is 79 petals."
_SELF_CORRECTION = re.compile(
    r"\b(?:i made (?:a|an) (?:\w+ )?(?:mistake|error)|my (?:mistake|bad|apologies)|i miscalculated|i misread|"
    r"let me (?:correct|fix|redo|recalculate))\b.*\b(?:the )?(?:correct|right|actual|corrected|final) "
    r"(?:answer|total|result|value|count)\b", re.DOTALL)
# a formal "you" (Sie, Ihnen, vous, usted, Вы, 您) in a statement: the assistant addressing the user, in any
# language ("Wenn Sie weitere Fragen haben, stehe ich Ihnen gerne zur Verfügung.")
_FORMAL_YOU = re.compile(r"(?<=[\w,] )(?:Sie|Ihnen|Ihre[mnrs]?)\b|\b(?:vous|usted|ustedes)\b|(?<=[\w,] )В(?:ы|ам|ас)\b|您")


def _may_close(text: str) -> bool:
    """Cheap pre-check for _DRIFT_CLOSING and "enjoy your ..." (each needs one of these)."""
    return ("hope" in text or "to you" in text or "like to" in text or "like more" in text or "you want" in text
            or "shall" in text or "good luck" in text or text.startswith("enjoy"))


def _may_address_formally(original: str, text: str) -> bool:
    """Cheap pre-check for _FORMAL_YOU."""
    return ("Sie" in original or "Ihn" in original or "Ihr" in original or "vous" in text or "usted" in text
            or "В" in original or "您" in original)


def _drift(text: str, tokens: Sequence[str], has_question: bool, ctx: _Context, original: str) -> Label | None:
    if _ASSISTANT_SPEAKER.match(text):
        return _label("assistant_drift", "assistant_speaker_label", 0.9)
    if not has_question and ("mis" in text or "error" in text or "my bad" in text or "apolog" in text
                             or "let me" in text):
        if _SELF_CORRECTION.search(text):
            return _label("assistant_drift", "corrects_its_own_answer", 0.75)
    if (not has_question and _may_address_formally(original, text) and _FORMAL_YOU.search(original)
            and not _ACK.search(text)):
        return _label("assistant_drift", "addresses_the_user_formally", 0.6)
    if _DRIFT_OFFER.search(text) or (
            _may_close(text) and (_DRIFT_CLOSING.search(text) or text.startswith("enjoy your"))):
        return _label("assistant_drift", "offers_help_or_assistant_phrase", 0.9)
    if _DRIFT_OPENER.match(text) and not _USER_REQUEST_AFTER_OPENER.search(text) and not _THANKS.search(text):
        return _label("assistant_drift", "assistant_opener", 0.8)
    if _DRIFT_SOLUTION.match(text) and not has_question:
        return _label("assistant_drift", "first_person_solution", 0.85)
    if _QA_PAIR.match(text):
        return _label("assistant_drift", "writes_question_and_answer", 0.75)
    if (not has_question and _may_mark_answer(text) and _DRIFT_ANSWER_MARK.search(text)
            and not _REQUEST_ANYWHERE.search(text) and not _AUTHORITY_CLAIM.search(text)):
        return _label("assistant_drift", "answer_like_structure", 0.75)
    if has_question:
        # "Why 9? Because ..." asks and then answers itself.
        after = text.split("?", 1)[1].strip()
        if re.match(r"(?:because|since|well,? (?:because|since)|that's because|the answer is)\b", after):
            return _label("assistant_drift", "answers_own_question", 0.7)
    # a question or exercise followed by its own answer: "... How many hours? Answer: 2 + 3 = 5", the query
    # then "\n\nMultiply both sides by 6 ..., so x = 6", "What language would you use?\n\nIncluding ..."
    cut = text.rfind("?") + 1 if has_question else text.find("\n\n")
    if cut > 0 and ("\n" in text[cut:cut + 3] or text[cut:].lstrip().startswith("answer")):
        tail = text[cut:].strip()
        if tail and "?" not in tail and (_ANSWERED.search(tail) or (
                has_question and len(tail.split()) >= 8 and not _FIRST_PERSON.search(tail)
                and not _REQUEST_ANYWHERE.search(tail))):
            return _label("assistant_drift", "question_followed_by_its_answer", 0.7)
    return None


_CONTINUATION = re.compile(r"^\s*(?:furthermore|moreover|additionally|in addition|alternatively)\b")
_ANSWERED = re.compile(r"^answer\s*:|=\s*\$?-?\d[\d.,]*\s*\$?[\w ]{0,12}[.!]?\s*$")
_FIRST_PERSON = re.compile(r"\b(?:i|i'm|i've|i'd|me|my|we|our)\b")
_LEAD_IN = re.compile(
    r"^\s*(?:(?:sure|ok(?:ay)?|yes|yeah|alright|great|hmm+|haha+|oh|no|thanks|thank you|nice|cool|love it|now|"
    r"then|and now)\b[\s,!.]*)+")
_REQUEST_ANYWHERE = re.compile(
    r"(?:^|[.!,;]\s*)(?:(?:can|could|would|will) you|please|i(?:'d| would) like|i want|i need|let's|let us)\b|"
    r"\b(?:tell|show|give|help) me\b")
# a question without its question mark: "so the brother is 12 right", "that's 26, correct"
_ACK_WORDS = frozenset(("thanks", "thank", "thx"))
_TAG_ENDINGS = frozenset(("right", "correct", "it", "no"))
_TAG_QUESTION = re.compile(
    r"(?<!you're )(?<!you are )(?<!that's )(?<!all )(?<!exactly )\b(?:right|correct|isn't it|is that right|"
    r"am i right|no)\s*[.!]*\s*$")


_DISCOURSE_MARKERS = frozenset(("so", "and", "but", "then", "well", "ok", "okay", "now"))
_QUESTION_WORDS = frozenset(("what", "why", "how", "when", "where", "which", "who"))
# a question in a later clause without its question mark: "nice that both came out to sqrt(54), is that a
# coincidence or does it mean ..."
_CLAUSE_QUESTION = re.compile(
    r"[,;]\s*(?:or\s+|but\s+|so\s+)?(?:is|are|was|were|does|do|did|can|could|would|should|isn't|doesn't|don't|"
    r"didn't)\s+(?:it|that|this|there|they|he|she|i|we|you)\b")


def _is_question_or_request(text: str, tokens: Sequence[str]) -> bool:
    """A question mark, a question word first, or a request (imperative, "can you", "please")."""
    if "?" in text:
        return True
    rest = _LEAD_IN.sub("", text)
    for sentence in _SENTENCE_END.split(rest):  # "When d is 2. Show it with Fermat." asks in its 2nd sentence
        words = _tokens(sentence[:60])  # only its first words matter
        if len(words) > 2 and words[0] in _DISCOURSE_MARKERS and words[1] in _QUESTION_WORDS:
            return True  # "So, what do I do now."
        if not words or (len(words) > 1 and words[1] in _ACK_WORDS) or (words[0] == "will" and len(words) > 1
                                                                        and words[1] in _REQUEST_VERBS):
            continue  # "list, thanks", "will try splitting it"
        if words[0] in _QUESTION_START or words[0] in _REQUEST_VERBS or words[0] == "please":
            return True
    if _REQUEST_ANYWHERE.search(rest) or ("," in rest and _CLAUSE_QUESTION.search(rest)):
        return True
    return len(tokens) >= 3 and tokens[-1] in _TAG_ENDINGS and bool(_TAG_QUESTION.search(rest))


_PROPER_NOUN = re.compile(r"(?<=[a-z,;] )[A-Z][a-z]+")
_MODIFIER = re.compile(
    r"\b(?:another|instead|again|different|other|same|too|also|what if|what about|you said|your|"
    r"shorter|longer|simpler|more)\b")


def _substitutes(tokens: Sequence[str], added: frozenset[str], dropped: frozenset[str], ctx: _Context) -> bool:
    """True when new words take the place of a topic word of the query: a sibling question.

    "How do you make iced coffee at home?" for "How do I make cold brew coffee at home?": "iced" sits
    in the frame "make _ coffee" where the query had "cold brew", and "cold" is a topic word (the
    response repeats it, or it is the question's last content word). The frame is both neighbours,
    or, for a word the response repeats, one neighbour that is a content word.
    """
    query = ["a" if t == "an" else _stem(t) for t in ctx.query_tokens]
    last = next((w for w in reversed(query) if w in ctx.query_content), None)
    topic = {w for w in dropped if not w[0].isdigit() and (w in ctx.response_content or w == last)}
    if not topic or not added:
        return False
    padded = ["^", *query, "$"]
    turn = ["^", *("a" if t == "an" else _stem(t) for t in tokens), "$"]
    for i in range(1, len(turn) - 1):
        if turn[i] not in added:
            continue
        left, right = turn[i - 1], turn[i + 1]
        if left[0].isdigit() or right[0].isdigit():
            continue  # next to a number sits a unit ("60 mph" for "60 miles per hour"), not a value
        for j, word in enumerate(padded):
            if word not in topic:
                continue
            # both neighbours around a span of one to three query words with the topic word in it
            for start in range(max(1, j - 2), j + 1):
                for end in range(j, min(len(padded) - 1, start + 3)):
                    if padded[start - 1] == left and padded[end + 1] == right:
                        return True
            if word not in ctx.response_content:
                continue  # the question's last word needs the whole frame
            if (padded[j - 1] == left and left in ctx.query_content and not left[0].isdigit()) or (
                    padded[j + 1] == right and right in ctx.query_content and not right[0].isdigit()):
                return True
    return False


def _restatement(tokens: Sequence[str], content: frozenset[str], ctx: _Context, text: str,
                 original: str) -> Label | None:
    """``restatement`` when the turn's content words are (nearly) the query's; None otherwise.

    A turn that uses words only the response introduced, or words that point at the conversation
    ("instead", "your answer"), builds on the answer and is not a restatement. Swapping values
    (another number, a new name, a topic word replaced in place) is a sibling question: see
    ``_ask_or_object``.
    """
    if not tokens or not ctx.query_tokens:
        return None
    norm = " ".join(tokens)
    if norm == ctx.query_norm:
        return _label("restatement", "verbatim_query", 0.98)
    if len(ctx.query_tokens) >= 5 and len(tokens) - len(ctx.query_tokens) <= 8 and ctx.query_norm in norm:
        # the query again with an instruction on how to answer ("... in degrees. Please show your steps.")
        extra = norm.replace(ctx.query_norm, " ", 1).split()
        if extra and _CONTEXT_WORDS.isdisjoint(extra) and not any(w[0].isdigit() for w in extra) and (
                extra[0] not in _QUESTION_WORDS and extra[0] not in ("and", "but", "so", "or", "no")):
            return _label("restatement", "query_repeated_with_instruction", 0.8, extra_words=len(extra))
    if not content or not ctx.query_content:
        return None
    shared = content & ctx.query_content
    added = content - ctx.query_content
    turn_in_query = len(shared) / len(content)
    query_in_turn = len(shared) / len(ctx.query_content)
    if not ((turn_in_query >= 0.6 and query_in_turn >= 0.5) or (len(added) <= 1 and query_in_turn >= 0.6)
            or (turn_in_query >= 0.8 and query_in_turn >= 0.3)):
        # containment: the turn is one sentence of the query ("How much does Janet make every day at the
        # market?" for the last sentence of a long problem), or the query after a short preamble
        # ("can u help me with this one: <query>", "I meant: <query>")
        contained = turn_in_query >= 0.85 and len(shared) >= 2 and any(
            len(s & content) >= 0.75 * len(s) for s in _query_sentences(ctx.query))
        if not contained:
            return None
        query_in_turn = max(len(s & content) / len(s) for s in _query_sentences(ctx.query))
    # the cheap overlap test passed; now what speaks against a restatement
    if _ELLIPTICAL_START.match(text):
        return None
    # the response's new facts (its numbers and names) do not occur in a restatement; a common word
    # of the response ("city") may
    from_response = _response_only(content, ctx)
    if len(from_response) > 0.34 * len(content) or any(
            w[0].isdigit() or w in ctx.response_names for w in from_response):
        return None
    query_text = ctx.query_norm
    if any(m not in query_text for m in _MODIFIER.findall(text)):
        return None
    if not _RESTATEMENT_BLOCKERS.isdisjoint(tokens) and any(
            w in _RESTATEMENT_BLOCKERS and w not in ctx.query_tokens for w in tokens):
        return None
    if _NO_START.match(text):
        return None
    for pattern in (_CONTEXT_DEPENDENT, _DEICTIC_THAT, _OBJECTION):
        if pattern is _DEICTIC_THAT and "that" not in text:
            continue
        if any(m.group(0).strip(" ,.;:!?") not in query_text for m in pattern.finditer(text)):
            return None
    dropped = ctx.query_content - content
    if added and dropped:
        new_number = any(w[0].isdigit() for w in added)
        new_name = any(_stem(w.lower()) in added for w in _PROPER_NOUN.findall(original))
        if new_number or new_name or _substitutes(tokens, added, dropped, ctx):
            return None
    confidence = 0.85 if query_in_turn >= 0.7 and turn_in_query >= 0.8 else 0.7
    return _label("restatement", "query_word_overlap", confidence, turn_in_query=round(turn_in_query, 3),
                  query_in_turn=round(query_in_turn, 3))


def _after_preamble(ctx: _Context, text: str, original: str) -> Label | None:
    """The restatement test on what follows a short preamble and a colon, if there is one."""
    colon = text.find(":")
    if colon < 0 or len(text[:colon].split()) > 8:
        return None
    tail, original_tail = text[colon + 1:], original[colon + 1:]
    tokens = _tokens(tail)
    head = _tokens(text[:colon])
    if len(tokens) < 5 or head == list(ctx.query_tokens[: len(head)]):
        return None  # too short, or the query's own head ("Solve for x:")
    label = _restatement(tokens, _content(tokens), ctx, tail.strip(), original_tail.strip())
    if label is None:
        return None
    return Label(label.label, label.reason + "_after_preamble", label.classifier, label.confidence, label.details)


# "No, that's all. Thank you!" after "Is there anything else ...?" declines the offer
_DECLINE = re.compile(r"^\s*(?:no|nope)\b[\s,.!]*(?:that'?s (?:all|it)|that is all|i'?m (?:good|fine|all set)|"
                      r"all good|nothing (?:else|more)|not (?:now|right now|today)|thanks?|thank you)\b")


def _acknowledgement(text: str, tokens: Sequence[str], asks: bool, ctx: _Context) -> Label | None:
    """Thanks, praise or a closing at the start or the end of a turn that asks and objects nothing."""
    if asks or not tokens:
        return None
    head = " ".join(tokens[:3])
    tail = " ".join(tokens[-4:])  # "... thank you so much"
    if not (_ACK.search(head) or _ACK.search(tail)):
        return None
    if _objects(text) and _CONTRAST.search(text) and not re.search(r"\bno,? thanks?\b", text) and not (
            ctx.response_asks and _DECLINE.match(text)):
        return None
    rest = _ACK_FILLER.sub(" ", _ACK.sub(" ", text))
    leftover = _content(_tokens(rest))
    if len(leftover) <= 2:
        return _label("acknowledgement", "thanks_or_closing", 0.9)
    if len(leftover) <= 5:
        return _label("acknowledgement", "thanks_with_comment", 0.65, leftover_words=len(leftover))
    return None


_SENTENCE_END = re.compile(r"[.?!]\s+")


# a subject pronoun after an auxiliary: "What is lobbying and is it legal in Germany?" asks about its own noun
_AUX_BEFORE = re.compile(r"\b(?:is|was|are|were|does|do|did|can|could|will|would|should|has|have)\s+$")
REFERS_EXPLICITLY, REFERS_BY_PRONOUN = 2, 1


def _refers_back(text: str, tokens: Sequence[str]) -> int:
    """How the turn uses words that only make sense with the conversation: 2 for explicit words
    ("instead", "what if", "that step"), 1 for a pronoun only, 0 for none.

    A pronoun counts in the turn's first sentence, or after a short opener ("Thanks! Is it ..."); a
    possessive or subject pronoun only before the turn names anything itself: "A car drives ... What
    is its speed?", "How do bakeries price their cupcakes?" and "What is lobbying and is it legal?"
    point at their own subject.
    """
    if "same" in tokens and not _OWN_THING_BEFORE_SAME.search(text):
        return REFERS_EXPLICITLY
    if (not _CONTEXT_WORDS.isdisjoint(tokens) or _ELLIPTICAL_START.match(text)
            or _CONTEXT_DEPENDENT.search(text)
            or ("that" in text and (_DEICTIC_THAT.search(text) or _WH_SAID_THAT.search(text)))):
        return REFERS_EXPLICITLY
    split = _SENTENCE_END.search(text)
    first = text[: split.start()] if split else text
    pronoun = _PRONOUN.search(first)
    if not pronoun and split and len(first.split()) < 5:
        pronoun = _PRONOUN.search(text)
    if not pronoun:
        return 0
    # "Can you parallelize it?": an object pronoun points back; "How do bakeries price their cupcakes?":
    # a possessive or subject pronoun after a noun of the turn's own points at that noun
    before = text[: pronoun.start()]
    if not _content(_tokens(_LEAD_IN.sub("", before))):
        return REFERS_BY_PRONOUN
    if pronoun.group(0) in ("it", "them") and not _AUX_BEFORE.search(before):
        return REFERS_BY_PRONOUN
    return 0


def _grounding(text: str, tokens: Sequence[str], content: frozenset[str], ctx: _Context,
               objects: bool) -> tuple[float, float, int, int]:
    """(grounding in the response, context-dependence, count of content words new to the conversation,
    how the turn refers back: see _refers_back).

    Grounding counts shared words: a word or multi-digit number that the response introduced, or a
    number of its final answer, weighs 1; another single digit 0.5, a single letter (a variable) 0.3;
    a query word the response repeats 0.4, a query-only word 0.3.
    """
    score = 0.0
    new = 0
    for word in content:
        if word in ctx.response_content:
            if word[0].isdigit():
                score += 1.0 if len(word) > 1 or word in ctx.answer_numbers else 0.5
            elif word in ctx.query_content:
                score += 0.4
            else:
                score += 1.0
        elif word in ctx.query_content:
            score += 0.3
        else:
            new += 1
    dependence = 0.0
    refers = _refers_back(text, tokens)
    if refers:
        dependence += 1.0
    elif _CONTEXT_HINT.search(text):
        dependence += 0.5
    if objects:
        dependence += 1.0
    if ctx.response_asks and _YES_NO_START.match(text):
        dependence += 1.5
    return score, dependence, new, refers


def _response_only(content: frozenset[str], ctx: _Context) -> frozenset[str]:
    """The turn's words that the response introduced (not in the query), single letters aside."""
    return frozenset(w for w in content & ctx.response_content if w not in ctx.query_content and len(w) > 1)


# "Let's look at another classic problem: ...", "Now try this one:", "Next question:": a new exercise follows
_NEW_EXERCISE = re.compile(
    r"(?:\b(?:another|next|new|different)(?: \w+)? (?:one|problem|question|exercise|example|puzzle|task|challenge)"
    r"|\btry (?:this|these|that)(?: one)?|\bhere'?s (?:one|a \w+))\s*[:!]")
_INDEFINITE_OBJECT = re.compile(r"^(?:\w+ ){0,2}(?:a|an|some)\b")
_SUPERLATIVE_OR_INDEFINITE = re.compile(r"\b(?:a|an)\s+\w|\bthe (?:best|worst|most|least|\w+est)\b")
_REQUEST_OPENER = re.compile(r"^\s*(?:(?:can|could|would|will) you |please )?")


def _next_word(tokens: Sequence[str], word: str) -> str:
    for i, token in enumerate(tokens[:-1]):
        if token == word:
            return tokens[i + 1]
    return ""


def _self_contained(text: str, tokens: Sequence[str], fresh: Sequence[str], dependence: float, refers: int) -> str:
    """Why a question or request stands on its own, or "" when it does not.

    A turn that states its own problem is a new query even when it shares topic words with the
    response: a new exercise announced as such, two or more numbers of its own, a request whose object
    is introduced with "a"/"an" ("Write a pitch for a meal kit service"), or a long question with an
    indefinite or superlative subject of its own ("What is the best way to write a professional
    email?"); words that point at the conversation ("that", "it", "instead") rule out the last three.
    """
    if len(tokens) >= 8 and (":" in text or "!" in text) and _NEW_EXERCISE.search(text):
        return "new_exercise"
    if len(fresh) >= 3 and refers == REFERS_BY_PRONOUN and dependence < 2.0:
        # "How many fireworks will Hannah see if the city sets off 18 boxes of 25 and she sees 30% of them?":
        # a pronoun next to three numbers of the turn's own points at the turn's own things
        return "problem_with_its_own_numbers"
    if dependence >= 1.0:
        return ""
    if len(fresh) >= 2:
        return "problem_with_its_own_numbers"
    if dependence > 0:
        return ""  # "more", "other", "why", "example": leans on the conversation
    rest = _REQUEST_OPENER.sub("", _LEAD_IN.sub("", text), count=1)
    words = _tokens(rest)
    if words and words[0] in _REQUEST_VERBS and _INDEFINITE_OBJECT.match(" ".join(words[1:])):
        return "request_with_its_own_object"
    if len(tokens) >= 9 and words and words[0] in _QUESTION_START and _SUPERLATIVE_OR_INDEFINITE.search(rest):
        return "question_with_its_own_subject"
    return ""


_QUOTE_MARK = "\x00q"


def _frame(text: str) -> list[str]:
    """Stemmed words with each quoted part as one slot and each number as another: a request's frame."""
    if '"' in text or "“" in text or "'" in text:
        text = _QUOTED.sub(" qslotq ", text)
    return ["<n>" if t[0].isdigit() else "<q>" if t == "qslotq" else _stem(t) for t in _tokens(text)]


@lru_cache(maxsize=4096)
def _query_frame(query: str) -> tuple[str, ...]:
    return ("^", *_frame(query.lower()), "$")


def _fills_a_slot(frame: Sequence[str], slots: frozenset[str], query: Sequence[str]) -> bool:
    """True when a new value of the turn sits where the query had another: same word before it, same word
    after a span of one to three query words ("did Plato employ" for "did Socrates employ")."""
    padded = ["^", *frame, "$"]
    for i in range(1, len(padded) - 1):
        if padded[i] not in slots:
            continue
        left, right = padded[i - 1], padded[i + 1]
        for j in range(1, len(query) - 1):
            if query[j - 1] == left and right in query[j + 1: j + 4] and (
                    query[j] == padded[i] or query[j] not in frame):
                return True
    return False


def _sibling_request(text: str, original: str, fresh: Sequence[str], shared: int, ctx: _Context) -> str:
    """"" or why the turn is the query's own request with a new value in one of its slots: a new quoted
    object ('Is the sentence "The team are playing well." correct?'), a new name ("Which methods did Plato
    employ?", "Write an essay on how Juliet is to blame ...") or two new numbers. A sibling asks again
    from scratch, so it is a new query even when the new value is a name the response mentioned."""
    if shared < 2:
        return ""  # a sibling keeps the query's frame, so it shares at least two of its content words
    quotes = [q for q in _quotes(original) if q not in ctx.query_lower and q not in ctx.response_lower]
    names = frozenset(n for n in (_stem(w.lower()) for w in _PROPER_NOUN.findall(original))
                      if n not in ctx.query_content) if original != text else frozenset()
    if not (quotes or names or len(fresh) >= 2):
        return ""
    frame = _frame(text)
    if len(frame) < 4:
        return ""
    slots = names | ({"<q>"} if quotes else set()) | ({"<n>"} if len(fresh) >= 2 else set())
    query = _query_frame(ctx.query)
    query_pairs = set(zip(query, query[1:], strict=False))
    pairs = [p for p in zip(frame, frame[1:], strict=False) if p[0] not in names and p[1] not in names]
    if not pairs or sum(p in query_pairs for p in pairs) < 0.6 * len(pairs):
        return ""
    if not _fills_a_slot(frame, frozenset(slots), query):
        return ""
    return "quoted_object" if quotes else "name" if names else "numbers"


def _echoes_query(pattern: re.Pattern[str], text: str, ctx: _Context) -> bool:
    """True when every match of ``pattern`` in the turn is also in the query (its own words, not a pointer)."""
    return all(m.group(0).strip(" ,.;:!?") in ctx.query_lower for m in pattern.finditer(text))


# a challenge stated as a claim: "I think the answer key says 1 - 12i", "I got 27", "the book says it's 8"
_CLAIMED_VALUE = re.compile(
    r"\b(?:says?|said|gives?|gave|shows?|lists?|got|get|getting|is|it's|be|equals?|was)\s+(?:that\s+)?"
    r"(?:it'?s\s+|it is\s+|the answer is\s+|about\s+|like\s+)?[$(]?[-−]?\d")


def _ask_or_object(text: str, tokens: Sequence[str], content: frozenset[str], ctx: _Context,
                   objects: bool, original: str) -> Label:
    fresh = [w for w in content if w[0].isdigit() and w not in ctx.query_content and w not in ctx.response_content]
    if not objects and not _ELLIPTICAL_START.match(text):
        sibling = _sibling_request(text, original, fresh, len(content & ctx.query_content), ctx)
        if sibling and _echoes_query(_CONTEXT_DEPENDENT, text, ctx) and _echoes_query(_RESPONSE_OBJECT, text, ctx) \
                and (_CONTEXT_WORDS.isdisjoint(tokens) or all(w in ctx.query_tokens for w in tokens
                                                               if w in _CONTEXT_WORDS)):
            return _label("new_query", f"query_request_with_new_{sibling}", 0.7)
    label = _grounded_or_new(text, tokens, content, ctx, objects, fresh)
    # checked only when the grounding rules say new_query (a follow_up needs no second reason)
    if label.label != "new_query" or label.reason.endswith("new_exercise"):
        return label
    pointer = _points_at_response(text, ctx)
    if pointer:
        # "What are some corner cases in your solution?", "could you pick a different word", a quoted word of
        # the answer: the turn names the response as its object, however many words of its own it adds
        return _label("follow_up", f"question_{pointer}" if not objects else f"objection_{pointer}", 0.8,
                      **label.details)
    if objects and len(tokens) <= 25 and _CLAIMED_VALUE.search(text):
        # "I think the answer key says 1 - 12i": an objection that states another value challenges the answer
        return _label("follow_up", "challenge_with_another_value", 0.75, **label.details)
    return label


def _grounded_or_new(text: str, tokens: Sequence[str], content: frozenset[str], ctx: _Context, objects: bool,
                     fresh: Sequence[str]) -> Label:
    """follow_up or new_query by grounding, context-dependence and self-containedness."""
    if not ctx.query.strip() and not ctx.response_lower.strip():
        # No conversation before the turn (the no_context perturbation): there is nothing to follow up on,
        # so "Can you help me plan its launch?" opens a new chat whatever its pronouns suggest
        return _label("new_query", "no_conversation", 0.8)
    score, dependence, new, refers = _grounding(text, tokens, content, ctx, objects)
    evidence = score + dependence
    from_response = _response_only(content, ctx)
    own = "" if objects else _self_contained(text, tokens, fresh, dependence, refers)
    if not objects:
        # what only the response said (its numbers, two of its words) or a part of it still ties the turn to it
        # a long question is weaker evidence than a request or a problem of its own: a name that only the
        # response used ("... on Oahu ...") is enough to tie it to the answer
        names = own == "question_with_its_own_subject" and not from_response.isdisjoint(ctx.response_names)
        if own and not (len(from_response) >= 2 or names or any(w[0].isdigit() for w in from_response)
                        or _PART_REFERENCE.search(text)):
            return _label("new_query", f"self_contained_{own}", 0.65, new_numbers=len(fresh),
                          response_words=len(from_response))
        if (dependence < 1.0 and len(fresh) == new == 1 and len(tokens) <= 10
                and len(content & ctx.query_content) < 0.5 * len(ctx.query_content)
                and _stem(_next_word(tokens, fresh[0])) in ctx.query_content):
            # "How many liters would 7 cows make?": a short question that puts a new value on one of the
            # problem's things, too partial to stand alone (it needs the rate the query gave); "How many
            # divisors does 48 have?" asks about the number itself and stands alone
            return _label("follow_up", "partial_question_on_the_problem", 0.6, new_numbers=len(fresh))
    if not objects and dependence < 1.0 and not from_response:
        # "What is the capital of New Zealand?" after "... capital of Australia?": the query's template
        # with new values is a new, self-contained question ...
        if ctx.query_shape and not _ELLIPTICAL_START.match(text):
            shape = _shape(tokens)
            overlap = len(shape & ctx.query_shape) / max(1, len(shape | ctx.query_shape))
            if overlap >= 0.5 and new >= 1 and score < 2.0:
                return _label("new_query", "query_template_with_new_values", 0.6,
                              template_overlap=round(overlap, 3))
    details = {"grounding": round(score, 2), "context_dependence": dependence, "new_words": new}
    if not content and dependence > 0:
        # "Can you explain more?", "Why?", "What do you mean?": no topic of its own, so it is about the answer
        return _label("follow_up", "question_without_own_topic", 0.7, **details)
    if evidence >= 1.0 and evidence >= 0.25 * new:
        confidence = 0.85 if (score >= 1.0 and dependence >= 1.0) or score >= 2.0 else 0.7
        rule = "objection_grounded_in_response" if objects else "question_grounded_in_response"
        return _label("follow_up", rule, confidence, **details)
    confidence = 0.8 if evidence == 0 and new >= 2 else 0.6
    return _label("new_query", "question_not_grounded", confidence, **details)


def _statement(text: str, tokens: Sequence[str], content: frozenset[str], ctx: _Context) -> Label:
    """A turn that neither asks, objects nor thanks: it continues the answer, or opens a new topic."""
    if not content:
        return _label("new_query", "statement_without_content", 0.4)
    in_response = len(content & ctx.response_content) / len(content)
    if text.count("\n") >= 3 and not _objects(text):
        # "Day 1: 250 occupied ...\nDay 2: ..." writes out what the response offered: content, not a reply
        return _label("assistant_drift", "multi_line_content", 0.6)
    if ctx.response_asks and _response_only(content, ctx):
        # "python please. something that renames files" after "... What would you like me to write?"
        return _label("follow_up", "answers_the_response_question", 0.6)
    if ctx.response_has_list and _LIST_ITEM.match(text):
        return _label("assistant_drift", "continues_the_list", 0.75)
    if text.count("\n") >= 2 and not _objects(text):
        return _label("assistant_drift", "multi_line_content", 0.6)
    if in_response >= 0.4 or re.match(r"^\s*(?:another|also|additionally|alternatively|furthermore)\b", text, re.I):
        return _label("assistant_drift", "statement_repeats_response", 0.6, in_response=round(in_response, 3))
    first = next((t for t in tokens if t not in _STOPWORDS), "")
    if len(tokens) >= 8 and _stem(first) in ctx.query_content and "=" not in text and not _FIRST_PERSON.search(text):
        # "Basil is a warm-weather herb ..., so keep it away from drafts": an impersonal statement about the
        # query's subject explains it, in the assistant's voice
        return _label("assistant_drift", "explains_the_query_subject", 0.55, in_response=round(in_response, 3))
    if _points_at_response(text, ctx):
        # "I've read the first one already", "With the spirit of the first film, craft a pitch", '"gentleman"
        # feels a bit old-fashioned': a remark or an instruction about a part of the answer
        return _label("follow_up", "statement_refers_to_response", 0.6, in_response=round(in_response, 3))
    return _label("new_query", "ungrounded_statement", 0.45, in_response=round(in_response, 3))


def classify_turn(item: ClassifyInput) -> Label:
    """Label one user turn with the first rule that fires.

    Args:
        item: the turn and its context. Text after a leaked assistant/system header is ignored
            (the header itself, at the start, means ``assistant_drift``); a closed ``<think>`` block
            followed by visible text is classified by the visible text, while a thinking block with
            nothing after it is ``meta``; ``special_tokens`` are removed before anything else.

    Returns:
        A :class:`~userturn.records.Label` whose ``reason`` is ``"<label>:<rule>"``.
    """
    raw = item.user_turn or ""
    cut = ""
    # every role marker and special token has "<" or "[": plain text skips those patterns
    markup = "<" in raw or "[" in raw
    header = _ASSISTANT_HEADER.search(raw) if markup else None
    if header:
        before = _strip_special(_USER_HEADER.sub(" ", raw[: header.start()]), item.special_tokens)
        if not _WORDISH.search(before):
            return _label("assistant_drift", "assistant_role_marker", 0.95)
        raw, cut = raw[: header.start()], "+cut_at_assistant_marker"
    had_special = (markup and bool(_SPECIAL_TOKEN.search(raw))) or any(t and t in raw for t in item.special_tokens)
    text = _strip_special(_USER_HEADER.sub(" ", raw), item.special_tokens) if markup or item.special_tokens else raw
    thinking = _THINK_CLOSED.search(text) if markup else None
    if thinking:
        visible = _THINK_CLOSED.sub(" ", text)
        if _WORDISH.search(visible):
            text, cut = visible, cut + "+after_thinking"
        elif thinking.group(1).strip():
            return _label("meta", "thinking_trace_only", 0.9)
        else:
            text = visible
    if text[:40].lstrip()[:1] in _SPEAKER_INITIALS:
        text = _USER_SPEAKER.sub("", text, count=1)
    text = text.strip()
    label = _classify_text(text, had_special, item)
    if cut:
        return Label(label.label, label.reason + cut, label.classifier, min(label.confidence, 0.8), label.details)
    return label


def _classify_text(text: str, had_special: bool, item: ClassifyInput) -> Label:
    if not text:
        return _label("empty", "special_tokens_only" if had_special else "blank", 1.0)
    tokens = _tokens(text)
    degenerate = _degenerate(text, tokens)
    if degenerate:
        return degenerate
    original, text = text, text.lower()  # every pattern below is lowercase: much faster than IGNORECASE
    has_question = "?" in text
    meta = _meta(text, has_question)
    if meta:
        return meta
    ctx = _context(item.query, item.response)
    drift = _drift(text, tokens, has_question, ctx, original)
    if drift:
        return drift
    content = _content(tokens)
    restated = _restatement(tokens, content, ctx, text, original) or _after_preamble(ctx, text, original)
    if restated:
        return restated
    asks = _is_question_or_request(text, tokens)
    ack = _acknowledgement(text, tokens, asks, ctx)
    if ack:
        return ack
    if not has_question and _CONTINUATION.match(text):
        return _label("assistant_drift", "continues_the_answer", 0.6)
    objects = _objects(text)
    if asks or objects:
        return _ask_or_object(text, tokens, content, ctx, objects, original)
    return _statement(text, tokens, content, ctx)


class RulesClassifier:
    """Deterministic rules; see the module docstring for the order in which they fire."""

    name = "rules"

    def classify(self, inputs: Sequence[ClassifyInput]) -> list[Label]:
        return [classify_turn(item) for item in inputs]


@register_classifier("rules")
def make_rules_classifier(**options: object) -> RulesClassifier:
    """The rules classifier; it takes no options (any given is a configuration mistake)."""
    if options:
        raise ConfigError(f"the rules classifier takes no options, got: {', '.join(sorted(options))}")
    return RulesClassifier()


def is_uncertain(label: Label, threshold: float = UNCERTAIN_BELOW) -> bool:
    """True when ``label`` is a rules label below ``threshold``: the cases a judge should look at."""
    return label.confidence < threshold
