"""Map a method's free-form reply to one of an item's letters A-E: deterministic, no model.

`match_reply(reply, item)` returns a `Match(letter, how)`; `letter is None` means the
reply could not be matched and is scored wrong on either split. `how` names the
rule that decided: "empty", "letter", "option-text", "paraphrase", "refusal",
"ambiguous" or "unmatched".

The reply is read in four passes.

1. Disclaimers. A *refusal* is a phrase in which the speaker disclaims knowing
   ("I couldn't tell you", "I wasn't there", "That is beyond what I know",
   "I have no knowledge of that", "Nobody told me", "No idea", the item's own E
   text). Its scope runs to the end of its clause (the next `. ; : ! ?`, dash,
   or "but / though / however / yet"), so options named inside it ("I know
   nothing of any sea chest or hearthstone") are not answers. A *hedge* ("I'm
   not sure", "I can't be certain", "I can't say for sure", "hard to say")
   doubts without refusing: it is blanked out and never outweighs an answer.
   "I don't know why ..." is no refusal unless the question asks why; "I can't
   tell you how glad ..." and "I can't say I blame her" are none either.
2. Negation. An answer inside a negated clause does not count: from "not",
   "never", "nor", "neither", "cannot" or an "-n't" word to the clause's end (a
   comma, "but", "rather", "instead" end it too): "Not B, it's C" is C, "It
   wasn't the cask by the door" names no option. An inverted question ("Wasn't
   it the cask by the door?") is not a negation, and neither is a negator that
   is part of an option's own text ("No key; the lock was picked"). "No" is not
   a negator ("no more than", "no doubt").
3. Explicit letters. "(B)", "B)", "B." or "B:" opening the reply, "Answer: B",
   "the answer is (C)", "I'd say B.", "I'd go with C", "option D", "it's E",
   a JSON `"answer": "B"`, a bare capital "Definitely D!". A lower-case letter
   counts only as "(b)", as "b)" opening a line, or after an answer word with no
   word following ("answer: b", "I'd say b"), so the article "a" ("I'd say a
   cask ...") is never a letter; nor is a capital "A" that opens a noun phrase
   ("A silver crown"), an initial ("Captain C. Dask"), or "plan B". "I" is no
   option letter. Letters joined by "or", "and", commas or slashes form one group.
   A group is *marked* when an answer phrase ("answer", "choose", "pick", "go
   with", "say", "guess", "it's", "must be", ...) precedes it or it opens the
   reply. The last marked group decides; without one, all the letters named
   do. One letter: that letter ("letter"); several: "ambiguous". An explicit
   letter outranks the option texts; when the letters are ambiguous the texts
   may settle it, but only for one of the letters named.
4. Option texts. An option's words quoted verbatim (stems compared, a leading
   article ignored, options whose words all occur in the question skipped) is
   "option-text"; when several are quoted, one whose quote lies inside
   another's is dropped. Otherwise each of A-D gets a *coverage*: the weighted
   share of its content words (function words dropped, words of the question
   dropped, since the question's words would otherwise dominate; an option
   left with no words keeps all of its own) found in the reply, each word
   weighted by its rarity among the four options, log(5 / df). The best
   option wins ("paraphrase") when its coverage is at least `FLOOR` and beats
   the runner-up by `MARGIN`; two or more options at `FLOOR` or above with no
   clear winner are "ambiguous". If the reply has an answer phrase ("I'd go
   with", "the answer is", "I'd say", ...), the clause after the last one is
   read first and decides if it can.

Combining. The reply's last stance wins. If a refusal starts after the answer
the reply gave (letter or text, decided or ambiguous), the reply is "refusal"
(E): "It might be the cask by the door, but truly I cannot say" refuses. If
the answer comes after the refusal, the answer stands: "I wasn't there, but
Tobin said it was the cask by the door" answers B (hearsay is knowledge). A
reply with no answer and a refusal or a hedge is "refusal" (E); with neither,
"unmatched". An empty or blank reply is "empty". `matched_letter` prefers a
letter the method chose itself (`Answer.choice`) over its reply.

Known limits, accepted for a rule a reader can predict: a closing disclaimer
about something else still refuses ("The cask by the door. What Greaves does
with his casks I couldn't tell you." is E); a comma does not end a refusal, so
"I don't know, B maybe?" is E; a paraphrase sharing no word with its option
("His eyes" for "His eyesight") is unmatched.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from eval.items import ANSWER_LETTERS, LETTERS, REFUSAL_LETTER, KBFItem
from reveriemem.core.text import FUNCTION_WORDS, TOKEN
from reveriemem.inference.offline_reader import stem

EMPTY = "empty"
LETTER = "letter"
OPTION_TEXT = "option-text"
PARAPHRASE = "paraphrase"
REFUSAL = "refusal"
AMBIGUOUS = "ambiguous"
UNMATCHED = "unmatched"

FLOOR = 0.3  # least coverage for an option to count as named
MARGIN = 0.25  # how far the best option's coverage must beat the runner-up's


@dataclass(frozen=True)
class Match:
    letter: str | None  # one of A-E; None: unmatched (scored wrong)
    how: str  # the rule that decided: EMPTY, LETTER, OPTION_TEXT, PARAPHRASE, REFUSAL, AMBIGUOUS, UNMATCHED


@dataclass(frozen=True)
class _Answer:
    """What the reply's letters or option texts say: a letter, or none with the letters in doubt."""

    letter: str | None
    how: str
    pos: int  # where in the reply the deciding mention starts
    candidates: frozenset[str] = frozenset()


# ---------------------------------------------------------------------------
# Text: a reply with blanked-out spans, offsets kept

_QUOTES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u201c": '"', "\u201d": '"', "*": " ", "_": " ", "`": " ",
                         "#": " "})
_NUMBERS = dict(enumerate(str.split(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty")))
_ARTICLES = frozenset({"a", "an", "the"})
_STOP = (FUNCTION_WORDS - {"one", "two"}) | frozenset(str.split(
    "aye nay well indeed truly perhaps maybe surely certainly sure certain think thought believe reckon suppose "
    "guess answer option choice letter quite rather"))


@dataclass
class _Text:
    raw: str  # the reply, quotes folded; case kept
    low: str  # the same, lower case, same length

    @classmethod
    def of(cls, reply: str) -> _Text:
        raw = reply.translate(_QUOTES)
        low = "".join(c.lower() if len(c.lower()) == 1 else c for c in raw)
        return cls(raw, low)

    def blank(self, spans: Iterable[tuple[int, int]]) -> _Text:
        raw, low = list(self.raw), list(self.low)
        for start, end in spans:
            raw[start:end] = low[start:end] = " " * (end - start)
        return _Text("".join(raw), "".join(low))


@dataclass(frozen=True)
class _Token:
    stem: str
    start: int
    end: int
    content: bool  # not a function word


def _word_stem(word: str) -> str:
    word = _NUMBERS.get(int(word), word) if word.isdigit() and len(word) <= 2 else word
    return stem(word)


def _tokens(text: str) -> list[_Token]:
    return [_Token(_word_stem(m.group()), m.start(), m.end(), len(m.group()) > 1 and m.group() not in _STOP)
            for m in TOKEN.finditer(text)]


def _phrase(text: str) -> tuple[str, ...]:
    """An option's words as stems, a leading article dropped."""
    words = [m.group() for m in TOKEN.finditer(text.translate(_QUOTES).lower())]
    if len(words) > 1 and words[0] in _ARTICLES:
        words = words[1:]
    return tuple(_word_stem(w) for w in words)


def _terms(text: str) -> set[str]:
    return {t.stem for t in _tokens(text.translate(_QUOTES).lower()) if t.content}


# ---------------------------------------------------------------------------
# Pass 1: refusals and hedges

_CANT = r"(?:can't|cannot|can not|couldn't|could not|won't|wouldn't|would not)"
_DONT = r"(?:don't|do not|didn't|did not)"
_ADV = r"(?:(?:really|truly|honestly|rightly|simply|just|sadly|even) )?"
_STRONG = re.compile("|".join(rf"(?:{p})" for p in (
    rf"\bi {_ADV}{_CANT} {_ADV}(?:say|tell|answer|know|recall|remember|speak to|help you)\b",
    rf"\bi {_ADV}{_DONT} {_ADV}(?:know|recall|remember)\b",
    rf"\bi {_DONT} (?:see|witness|hear)\b",
    r"\bi(?: have|'ve| had|'d)?(?: got)? no (?:idea|notion|knowledge|memory|recollection|way|means)\b",
    r"\bno idea\b",
    r"\bi (?:haven't|have not|hadn't) (?:the )?(?:faintest|slightest|least|foggiest)\b",
    r"\b(?:nobody|no one|no-one|none) (?:ever )?(?:told|tells|said|says|mentioned|spoke)\b",
    r"\b(?:nobody|no one|no-one) knows\b",
    r"\bi (?:wasn't|was not|was never|never was|weren't) (?:there|present|told)\b",
    r"\bi(?: have|'ve| had|'d)? never (?:saw|seen|heard|knew|known|learned|learnt|been told|was told)\b",
    r"\b(?:beyond|outside|past) (?:what i (?:know|knew|could know|can know|saw|was told)|my (?:knowledge|ken|knowing))\b",
    r"\bnot (?:something|a thing|anything) i (?:know|knew|could know|can know|saw|witnessed|was told|can speak to)\b",
    r"\bi know (?:nothing|naught|not)\b",
    r"\bhow (?:would|should|could|can|am) i (?:to )?know\b",
    r"\bnot (?:for me|mine) to say\b",
    r"\b(?:i'm|i am) not privy\b",
    r"\bwho (?:can|could) say\b",
    r"\bnot that i (?:know|knew|recall|remember|heard)\b",
)))
# a disclaimer followed by one of these is no refusal
_NOT_REFUSAL = re.compile(
    r"\s+(?:you how (?:much|glad|happy|grateful|sorry|often|relieved|pleased|many times)"
    r"|(?:that )?i (?:blame|like|liked|care|cared|mind|minded|agree|disagree|envy|approve)"
    r"|what you mean|how to thank|enough)\b")
_WHY = re.compile(r"\s+why\b")
# a disclaimer followed by one of these only doubts: a hedge
_QUALIFIED = re.compile(r"(?:\s+\w+){0,2}?\s+(?:for (?:certain|sure|a fact)|with (?:any |much )?certainty|exactly"
                        r"|precisely)\b")
_HEDGE = re.compile("|".join(rf"(?:{p})" for p in (
    r"\b(?:i'm|i am) not (?:quite |entirely |completely |altogether |rightly )?(?:sure|certain)\b",
    r"\bnot (?:quite |entirely |completely )?(?:sure|certain)\b",
    rf"\b{_CANT} (?:be )?(?:quite |entirely |completely )?(?:sure|certain)\b",
    r"\bhard to (?:say|tell)\b",
    r"\bi (?:wouldn't|would not) (?:swear|bet)\b",
)))
_CLAUSE_END = re.compile(r"[.;:!?\n]|\u2014|\u2013|\s-\s|\b(?:but|though|although|however|yet)\b")


def _disclaimers(text: _Text, item: KBFItem) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """Spans of refusals (to their clause's end) and of hedges."""
    asks_why = re.search(r"\bwhy\b", item.question.lower()) is not None
    refusals: list[tuple[int, int]] = []
    hedges: list[tuple[int, int]] = []
    for m in _STRONG.finditer(text.low):
        rest = text.low[m.end():]
        if _NOT_REFUSAL.match(rest) or (not asks_why and _WHY.match(rest)):
            continue
        qualified = _QUALIFIED.match(rest)
        if qualified:
            hedges.append((m.start(), m.end() + qualified.end()))
        else:
            refusals.append((m.start(), _clause_end(text.low, m.end())))
    refusals += _refusal_option_spans(text, item)
    for m in _HEDGE.finditer(text.low):
        if not any(s <= m.start() < e for s, e in refusals):
            hedges.append(m.span())
    return refusals, hedges


def _refusal_option_spans(text: _Text, item: KBFItem) -> list[tuple[int, int]]:
    words = [m.group() for m in TOKEN.finditer(item.options.get(REFUSAL_LETTER, "").translate(_QUOTES).lower())]
    if not words:
        return []
    pattern = re.compile(r"\b" + r"\W+".join(re.escape(w) for w in words) + r"\b")
    return [(m.start(), _clause_end(text.low, m.end())) for m in pattern.finditer(text.low)]


def _clause_end(low: str, start: int) -> int:
    end = _CLAUSE_END.search(low, start)
    return end.start() if end else len(low)


# ---------------------------------------------------------------------------
# Pass 2: negation

_NEGATOR = re.compile(r"\b(?:not|never|neither|nor|cannot|\w+n't)\b")
_INVERTED = re.compile(r"\s+(?:it|he|she|they|that|there|you|i|we)\b")
_NEGATION_END = re.compile(r"[,;.:!?\n]|\u2014|\u2013|\s-\s|\b(?:but|rather|instead|though)\b")


def _negations(text: _Text, protected: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    spans = []
    for m in _NEGATOR.finditer(text.low):
        if any(s <= m.start() < e for s, e in protected):
            continue
        if m.group().endswith("n't") and _INVERTED.match(text.low, m.end()):
            continue
        end = _NEGATION_END.search(text.low, m.end())
        spans.append((m.start(), end.start() if end else len(text.low)))
    return spans


# ---------------------------------------------------------------------------
# Pass 3: explicit letters

_CANDIDATE = re.compile(r"(?<![\w'])(\()?([A-Ea-e])(\))?(?![\w'])(?!\.\w)(?!-\w)")
_MARKER = re.compile(
    r"(?:\banswer|\bchoice|\bchoose|\bchose|\bpick|\bpicked|\bselect|\bgo with|\bgoing with|\bsay|\bguess"
    r"|\bsettle on|\bsettled on|\bit's|\bit is|\bit was|\bmust be|\bwould be|'d be|\bshould be)"
    r"(?:\W+(?:is|was|would|be|must|option|letter|choice|then|surely|definitely|probably|certainly))*\W*$")
_KEYWORD = re.compile(r"\b(?:option|choice|letter|answer)\W*(?:is\W*)?$")
_A_VERBS = frozenset({"is", "or", "and", "it's", "seems", "then", "would", "sounds"})
_NOT_A_LETTER_AFTER = frozenset({"plan", "vitamin", "type", "grade", "class", "size", "mr", "mrs", "ms", "dr", "st"})
_CONNECTOR = re.compile(r"(?:[\s,/&()]|\bor\b|\band\b|\bmaybe\b|\bperhaps\b|\bpossibly\b|\boption\b|\bletter\b)*")


@dataclass(frozen=True)
class _Letter:
    letter: str
    start: int
    end: int
    marked: bool


def _letters(text: _Text, original: _Text) -> _Answer | None:
    found = [c for m in _CANDIDATE.finditer(text.raw) if (c := _letter(m, text, original)) is not None]
    if not found:
        return None
    groups: list[list[_Letter]] = [[found[0]]]
    for previous, current in zip(found, found[1:]):
        between = text.low[previous.end:current.start]
        if _CONNECTOR.fullmatch(between):
            groups[-1].append(current)
        else:
            groups.append([current])
    marked = [g for g in groups if any(c.marked for c in g)]
    chosen = marked[-1] if marked else [c for g in groups for c in g]
    letters = frozenset(c.letter for c in chosen)
    pos = chosen[-1].start
    if len(letters) == 1:
        return _Answer(next(iter(letters)), LETTER, pos, letters)
    return _Answer(None, AMBIGUOUS, pos, letters)


def _letter(m: re.Match[str], text: _Text, original: _Text) -> _Letter | None:
    opened, char, closed = m.group(1), m.group(2), m.group(3)
    start, end = m.start(), m.end()
    before = text.raw[max(0, start - 60):start]
    at_start = original.low[:start].strip(" \t\r\n\"'([{") == ""
    if not _is_letter(opened, char, closed, before, text.raw[end:], at_start):
        return None
    return _Letter(char.upper(), start, end, at_start or bool(_MARKER.search(before.lower())))


def _is_letter(opened: str | None, char: str, closed: str | None, before: str, after: str, at_start: bool) -> bool:
    """Whether a lone A-E is a letter, from the text `before` and `after` it (case kept)."""
    if opened and closed:
        return True
    previous = before.split()[-1].strip(".,;:\"'") if before.split() else ""
    if char.islower():
        if closed and (at_start or before.endswith("\n")):
            return True  # "b) the cask nearest the door"
        keyed = bool(_KEYWORD.search(before.lower()) or _MARKER.search(before.lower()))
        return keyed and not re.match(r"\s+[a-z]", after)  # "answer: b", not "answer: a cask"
    if previous.lower() in _NOT_A_LETTER_AFTER:
        return False
    if not closed and re.match(r"\.\s+[A-Z][a-z]", after) and previous[:1].isupper() and not at_start:
        return False  # an initial: "Captain C. Dask"
    next_word = re.match(r"\s+([A-Za-z']+)", after)
    is_article = char == "A" and not closed and next_word is not None and next_word.group(1).lower() not in _A_VERBS
    return not is_article  # "A silver crown" opens a noun phrase


# ---------------------------------------------------------------------------
# Pass 4: option texts

_TEXT_MARKER = re.compile(
    r"\b(?:answer is|answer would be|answer:|answer must be|go with|going with|i choose|i pick|i'd pick|i'd say"
    r"|i would say|i'll say|my answer|settle on|i'd guess|my guess is|i'd wager)\b")


@dataclass(frozen=True)
class _Options:
    """The item's answer options as the matcher reads them."""

    phrases: dict[str, tuple[str, ...]]  # letter -> stems, for verbatim quotes (empty: not quotable)
    terms: dict[str, set[str]]  # letter -> content stems, question words removed
    weight: dict[str, float]  # stem -> rarity among the options

    @classmethod
    def of(cls, item: KBFItem) -> _Options:
        question_terms = _terms(item.question)
        question_phrase = " ".join(_phrase(item.question))
        phrases, terms = {}, {}
        for letter in ANSWER_LETTERS:
            text = item.options.get(letter, "")
            phrase = _phrase(text)
            quotable = phrase and f" {' '.join(phrase)} " not in f" {question_phrase} "
            phrases[letter] = phrase if quotable else ()
            own = _terms(text)
            terms[letter] = (own - question_terms) or own
        df: dict[str, int] = {}
        for letter_terms in terms.values():
            for term in letter_terms:
                df[term] = df.get(term, 0) + 1
        n = len(ANSWER_LETTERS)
        return cls(phrases, terms, {t: math.log((n + 1) / d) for t, d in df.items()})


def _quotes(tokens: Sequence[_Token], options: _Options) -> dict[str, list[tuple[int, int]]]:
    """Where each option is quoted verbatim, as token index ranges."""
    stems = [t.stem for t in tokens]
    found: dict[str, list[tuple[int, int]]] = {}
    for letter, phrase in options.phrases.items():
        k = len(phrase)
        spans = [(i, i + k) for i in range(len(stems) - k + 1) if k and tuple(stems[i:i + k]) == phrase]
        if spans:
            found[letter] = spans
    inside = {letter for letter, spans in found.items()
              if all(any(o != letter and s >= os and e <= oe and (s, e) != (os, oe)
                         for o, others in found.items() for os, oe in others) for s, e in spans)}
    return {letter: spans for letter, spans in found.items() if letter not in inside}


def _option_text(tokens: Sequence[_Token], options: _Options) -> _Answer | None:
    quoted = _quotes(tokens, options)
    if len(quoted) == 1:
        letter, spans = next(iter(quoted.items()))
        return _Answer(letter, OPTION_TEXT, tokens[spans[-1][0]].start, frozenset({letter}))
    if quoted:
        pos = max(tokens[s].start for spans in quoted.values() for s, _ in spans)
        return _Answer(None, AMBIGUOUS, pos, frozenset(quoted))
    return _paraphrase(tokens, options)


def _paraphrase(tokens: Sequence[_Token], options: _Options) -> _Answer | None:
    last: dict[str, int] = {t.stem: t.start for t in tokens if t.content}
    coverage: dict[str, float] = {}
    for letter, terms in options.terms.items():
        total = sum(options.weight[t] for t in terms)
        coverage[letter] = sum(options.weight[t] for t in terms if t in last) / total if total else 0.0
    ranked = sorted(coverage, key=lambda letter: -coverage[letter])
    best, second = coverage[ranked[0]], coverage[ranked[1]]
    named = [letter for letter in ranked if coverage[letter] >= FLOOR]
    if not named:
        return None
    pos = max(last[t] for letter in named for t in options.terms[letter] if t in last)
    if best - second >= MARGIN:
        return _Answer(ranked[0], PARAPHRASE, pos, frozenset({ranked[0]}))
    if len(named) > 1:
        return _Answer(None, AMBIGUOUS, pos, frozenset(named))
    return None


def _texts(text: _Text, options: _Options) -> _Answer | None:
    tokens = _tokens(text.low)
    markers = list(_TEXT_MARKER.finditer(text.low))
    if markers:
        start = markers[-1].end()
        end = _clause_end(text.low, start)
        marked = _option_text([t for t in tokens if start <= t.start < end], options)
        if marked is not None and marked.letter is not None:
            return marked
    return _option_text(tokens, options)


# ---------------------------------------------------------------------------
# The matcher


def match_reply(reply: str, item: KBFItem) -> Match:
    """The letter `reply` chooses for `item`, and the rule that decided (see the module docstring)."""
    if not reply or not reply.strip():
        return Match(None, EMPTY)
    original = _Text.of(reply)
    refusals, hedges = _disclaimers(original, item)
    undisclaimed = original.blank(refusals + hedges)
    options = _Options.of(item)
    tokens = _tokens(undisclaimed.low)
    protected = [(tokens[s].start, tokens[e - 1].end) for spans in _quotes(tokens, options).values() for s, e in spans]
    content = undisclaimed.blank(_negations(undisclaimed, protected))
    answer = _combine(_letters(content, original), _texts(content, options))
    last_refusal = max((start for start, _ in refusals), default=None)
    if answer is None:
        return Match(REFUSAL_LETTER, REFUSAL) if refusals or hedges else Match(None, UNMATCHED)
    if last_refusal is not None and last_refusal > answer.pos and answer.letter != REFUSAL_LETTER:
        return Match(REFUSAL_LETTER, REFUSAL)
    return Match(answer.letter, answer.how)


def _combine(letters: _Answer | None, texts: _Answer | None) -> _Answer | None:
    """An explicit letter outranks the option texts; the texts may settle ambiguous letters."""
    if letters is None:
        return texts
    if letters.letter is not None:
        return letters
    if texts is not None and texts.letter in letters.candidates:
        return texts
    return letters


def matched_letter(reply: str, item: KBFItem, choice: str | None = None) -> str | None:
    """The letter an answer stands for: its own `choice` when it made one, else the reply matched."""
    if choice is not None and choice.strip().upper() in LETTERS:
        return choice.strip().upper()
    return match_reply(reply, item).letter
