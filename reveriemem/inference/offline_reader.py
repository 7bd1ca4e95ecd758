"""The offline reader: a question, with or without options, read against passages, without a model.

The project's one reader of evidence without a model. The agent decides with it when no model
is configured (`reveriemem.inference.offline`), and every KBF-QA method run offline (the
reference baselines, the evidence answerer) uses its parts.

Words are compared through a light lexical view built on `reveriemem.core.text` (folding,
tokens, function words): `terms` folds case, curly quotes, ligatures, accents, possessives and
common inflections ("lamps", "lamp's", "lamped" -> "lamp") and drops function words; `Rarity`
weights a term by its inverse document frequency over the book's passages (its facts), so a rare
word ("cask", "Brixton") weighs more than a common one ("door").

`SupportIndex(passages, rarity)` scores each option of a question by the best passage (or window
of `window` consecutive passages) that supports it:

    support(p, o) = context(p) x addition(p, o)

- `context(p)`: the share of the question's rarity mass that p contains (the question's terms,
  the asked character's own names left out: addressing Watson is not evidence);
- `addition(p, o)`: the share of the option's rarity mass that p contains, counting only the
  option's terms the question does not already have, so an option scores by what it adds.

Both factors are in [0, 1]; a passage stating the question's context together with the option
scores near 1. Two options a passage supports equally (a list of effects names every one) are told
apart by the same product within one sentence (`Support.near`): the option told in the sentence
that holds what is asked is the answer. A question without options is supported by `context` alone
(`SupportIndex.context`). The index is inverted (term -> passages), so a question only touches
passages that share a term with it.
"""

from __future__ import annotations

import bisect
import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from reveriemem.core.text import FUNCTION_WORDS, fold, tokens

# Least support at which `read_options` commits to an option by default; below it the reader
# refuses. Low on purpose: one passage that states part of the question with the option is enough.
OFFLINE_FLOOR = 0.1
_TIE = 1e-6  # supports closer than this are equal


# -- the lexical view ------------------------------------------------------------------------


def stem(word: str) -> str:
    """A light, deterministic stem: enough to meet "lamps"/"lamp" and "filled"/"fill", an irregular verb
    and its base ("found"/"find", "struck"/"strike", "written"/"write"), and the British and American
    spellings of a word ("colour"/"color", "realised"/"realized", "grey"/"gray")."""
    word = word.removesuffix("'s").removesuffix("'")
    base = _IRREGULAR.get(word) or _suffixes(word)
    return _spelling(_silent_e(_SPELLINGS.get(base, base)))


def _silent_e(word: str) -> str:
    """A final silent "e" dropped where a cut "-ed" or "-ing" would not put it back (Porter's step 5a), so
    "cause" meets "caused" ("caus") as "hate" meets "hated" ("hate")."""
    if len(word) > 3 and word.endswith("e") and not word.endswith("ee") and word not in _KEEP_E:
        base = word[:-1]
        if _measure(base) > 1 or (_measure(base) == 1 and not _short_syllable(base)):
            return base
    return word


# Words whose "e" is no silent e a cut could have taken: without it they are other words ("quit", "born").
_KEEP_E = frozenset(("quite", "haste", "humane", "borne", "route", "severe", "suite", "tinge", "corpse"))

# The past and participle forms of common irregular verbs, read as the verb's base: a question asks
# "What did you find?" of a book that says "I found". Forms that are as often another word are left
# out ("rose", "lay", "ground", "left", "bore", "wound", "bit", "bound"; "saw" is kept: in a novel it is
# nearly always "see"), and a noun told by the same form goes with it ("thoughts", "shots"). Each base
# reads as itself ("spring" is not cut to "spr").
_IRREGULAR = {form: base for base, forms in (
    ("arise", "arose arisen"), ("awake", "awoke awoken"), ("become", "became"), ("begin", "began begun"),
    ("bend", "bent"), ("bid", "bade bidden"), ("bite", "bitten"), ("bleed", "bled"),
    ("blow", "blew blown"), ("break", "broke broken"), ("breed", "bred"), ("bring", "brought"),
    ("build", "built"), ("burn", "burnt"), ("buy", "bought"), ("catch", "caught"), ("choose", "chose chosen"), ("come", "came"),
    ("cling", "clung"), ("creep", "crept"), ("deal", "dealt"), ("dig", "dug"), ("draw", "drew drawn"),
    ("dream", "dreamt"), ("drink", "drank drunk"), ("drive", "drove driven"), ("eat", "ate eaten"),
    ("fall", "fell fallen"), ("feed", "fed"), ("feel", "felt"), ("fight", "fought"), ("find", "found"),
    ("flee", "fled"), ("fling", "flung"), ("fly", "flew flown"), ("forbid", "forbade forbidden"),
    ("forget", "forgot forgotten"), ("forgive", "forgave forgiven"), ("freeze", "froze frozen"),
    ("die", "dying"), ("lie", "lying"), ("tie", "tying"), ("get", "got gotten"), ("give", "gave given"), ("go", "went gone going goes"), ("grow", "grew grown"),
    ("hang", "hung"), ("hear", "heard"), ("hide", "hid hidden"), ("hold", "held"), ("keep", "kept"),
    ("kneel", "knelt"), ("lead", "led"), ("lean", "leant"), ("leap", "leapt"), ("lend", "lent"),
    ("lose", "lost"), ("make", "made"), ("mean", "meant"), ("pay", "paid"), ("ride", "rode ridden"),
    ("ring", "rang rung"), ("rise", "risen"), ("run", "ran"), ("see", "saw seen"), ("seek", "sought"),
    ("sell", "sold"), ("send", "sent"), ("shake", "shook shaken"), ("shine", "shone"), ("shoot", "shot shots"),
    ("shrink", "shrank shrunk"), ("sing", "sang sung"), ("sink", "sank sunk"), ("sit", "sat"),
    ("slay", "slew slain"), ("sleep", "slept"), ("slide", "slid"), ("sling", "slung"), ("speak", "spoke spoken"),
    ("spend", "spent"), ("spin", "spun"), ("spring", "sprang sprung"), ("stand", "stood"),
    ("steal", "stole stolen"), ("stick", "stuck"), ("sting", "stung"), ("stride", "strode"),
    ("strike", "struck stricken"), ("swear", "swore sworn"), ("sweep", "swept"), ("swim", "swam swum"),
    ("swing", "swung"), ("take", "took taken"), ("teach", "taught"), ("tear", "tore torn"),
    ("think", "thought thoughts"), ("throw", "threw thrown"), ("wake", "woke woken"), ("wear", "wore worn"),
    ("weep", "wept"), ("win", "won"), ("write", "wrote written"),
) for form in (base, *forms.split())}


def _suffixes(word: str) -> str:
    if len(word) == 4 and word.endswith("ied"):
        return word[:-1]  # "died" -> "die", "lied" -> "lie"
    if len(word) == 5 and word.endswith(("ied", "ies")):
        return word[:-3] + "y"  # "tried", "tries" -> "try"; "cries" -> "cry"
    if word.endswith("ly"):
        return _adverb(word)
    for suffix, keep in (("ies", "y"), ("ied", "y"), ("ing", ""), ("ed", ""), ("es", ""), ("s", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            if suffix == "s" and word.endswith(("ss", "us", "is")):
                return word
            if suffix == "es" and not word.endswith(("ches", "shes", "sses", "xes", "zes")):
                continue
            base = word[: -len(suffix)] + keep
            if suffix == "ed" and base.endswith("e"):
                return word  # "-eed" is "agree" + "d" as often as a word of its own ("speed", "proceed")
            return _restored(base) if suffix in ("ing", "ed") else base
    return word


# Words ending in "-ly" that are no adverb cut from a word ("family", "reply", "jolly"), and adverbs
# whose word is not the cut ("fully" is "full", "daily" is "day").
_NOT_ADVERBS = frozenset(("family", "reply", "comply", "apply", "supply", "imply", "jolly", "folly", "belly", "holly",
                          "bully", "gully", "tally", "rally", "sally", "billy", "silly", "early", "melancholy",
                          "ghastly", "grisly", "assembly", "anomaly", "monopoly", "butterfly", "dragonfly", "unholy",
                          "italy", "piccadilly"))  # shorter words ("holy", "ugly", "july") are never cut
_ADVERBS_OF = {"fully": "full", "truly": "true", "wholly": "whole", "duly": "due", "daily": "day", "gently": "gentle"}


def _adverb(word: str) -> str:
    """An adverb read as its word: "sadly" -> "sad", "terribly" -> "terrible", "happily" -> "happy",
    "physically" -> "physical", "hurriedly" -> "hurry" (the cut word's own ending is cut in turn)."""
    if word in _NOT_ADVERBS or len(word) < 5:
        return word
    if word in _ADVERBS_OF:
        return _ADVERBS_OF[word]
    if word.endswith(("bly", "mply")):
        return word[:-1] + "e"  # "terribly" -> "terrible", "simply" -> "simple"
    if word.endswith("ily") and len(word) >= 6:
        return word[:-3] + "y"
    base = word[:-2]
    return _suffixes(base) if base.endswith(("ing", "ed")) else base


def _restored(base: str) -> str:
    """The verb's base after "-ed" or "-ing" is cut (Porter's step 1b): a doubled consonant undone
    ("stopped" -> "stop"), and the silent "e" put back where the cut took it ("hated" -> "hate", not
    "hat"; "writing" -> "write", "loved" -> "love"), so the inflected form meets the base form."""
    if len(base) >= 4 and base[-1] == base[-2] and base[-1] not in "aeiouylsz":
        return base[:-1]
    if base.endswith(("at", "bl", "iz")):
        return base + "e"
    if _measure(base) == 1 and _short_syllable(base):
        return base + "e"
    return base


def _vowels(word: str) -> list[bool]:
    """Porter's vowels: a, e, i, o, u, and "y" after a consonant."""
    out: list[bool] = []
    for i, ch in enumerate(word):
        out.append(ch in "aeiou" or (ch == "y" and i > 0 and not out[i - 1]))
    return out


def _measure(word: str) -> int:
    """How many vowel-consonant sequences the word has (Porter's m): "hat" 1, "trouble" 2."""
    marks = _vowels(word)
    return sum(1 for i in range(1, len(marks)) if marks[i - 1] and not marks[i])


def _short_syllable(word: str) -> bool:
    """The word ends consonant-vowel-consonant, the last not w, x or y ("hop", "writ"; not "hold")."""
    marks = _vowels(word)
    return len(word) >= 3 and not marks[-3] and marks[-2] and not marks[-1] and word[-1] not in "wxy"


_SPELLINGS = {"grey": "gray", "gaol": "jail", "connexion": "connection", "waggon": "wagon", "shew": "show",
              "plough": "plow", "cheque": "check", "tyre": "tire", "whisky": "whiskey"}


def _spelling(word: str) -> str:
    """One spelling for the common British/American pairs: -our/-or, -ise/-ize, -yse/-yze, a few words."""
    word = _SPELLINGS.get(word, word)
    if len(word) >= 5 and word.endswith("our") and word not in ("flour", "scour", "devour", "detour"):
        return word[:-3] + "or"
    if len(word) >= 6 and word.endswith(("is", "ys")) and word[-3] not in "aeiou":
        return word[:-1] + "z"  # "realis(ed)" -> "realiz", "analys(ed)" -> "analyz"
    return word


_UNIT_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
               "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen")
_UNITS = {w: n for n, w in enumerate(_UNIT_WORDS)}
_TENS = {w: 10 * n for n, w in enumerate(("twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"),
                                         start=2)}


def fold_numbers(words: Sequence[str]) -> list[str]:
    """Number words as digits, so "twenty-nine", "twenty nine" and "29" meet; "one" and "two" alone stay
    words (they are mostly pronouns), and ordinals stay words ("second" is seldom a count)."""
    out: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        if word in _TENS:
            value, i = _TENS[word], i + 1
            if i < len(words) and words[i] in _UNITS and 0 < _UNITS[words[i]] < 10:
                value, i = value + _UNITS[words[i]], i + 1
            out.append(str(value))
            continue
        if word in _UNITS and word not in ("one", "two", "zero"):
            out.append(str(_UNITS[word]))
        elif word in ("hundred", "thousand") and out and out[-1].isdigit():
            out[-1] = str(int(out[-1]) * (100 if word == "hundred" else 1000))
        else:
            out.append(word)
        i += 1
    return out


def terms(text: str) -> list[str]:
    """Content terms of a text, stemmed, in order (repeats kept); number words read as digits."""
    return [stem(t) for t in fold_numbers(tokens(text)) if len(t) > 1 and t not in FUNCTION_WORDS or t.isdigit()]


# A pure function of the text, asked again and again of the same passages (every question's
# reading tests the book's passages): kept for the most recent texts, so a build's reader
# calibration terms each passage once instead of once per question (about a quarter of its time).
@lru_cache(maxsize=16384)
def term_set(text: str) -> frozenset[str]:
    return frozenset(terms(text))


class NameFolding:
    """Every name of a person or thing read as one: "Mr. Holmes", "Sherlock" and "Holmes" all as
    "Holmes", "the doctor" as "Livesey" when the character file says the doctor is Livesey.

    `groups` are (canonical name, surface forms) pairs, from the character file (aliases and
    descriptors) and the book's entity table; `apply` rewrites each form (whole words, any case,
    longest first) to its canonical name, so a question that calls someone otherwise than the
    book's sentence does still shares the name's term with it. A form claimed by two groups is
    ambiguous and left as it is.
    """

    def __init__(self, groups: Iterable[tuple[str, Iterable[str]]]):
        owner: dict[str, str] = {}
        clashes: set[str] = set()
        for canonical, forms in groups:
            for form in {canonical, *forms}:
                key = " ".join(tokens(form))
                if not key or key in FUNCTION_WORDS and " " not in key:
                    continue
                if key in owner and owner[key] != canonical:
                    clashes.add(key)
                owner.setdefault(key, canonical)
        self.names = {k: v for k, v in owner.items() if k not in clashes and " ".join(tokens(v)) != k}
        self.terms = frozenset().union(*(term_set(f) for f in owner))  # every name's terms
        forms = sorted(self.names, key=lambda k: (-len(k), k))
        self._pattern = (re.compile(r"(?<![a-z0-9])(?:" + "|".join(r"[^a-z0-9]+".join(map(re.escape, k.split())) for k in forms)
                                    + r")(?![a-z0-9])") if forms else None)

    def apply(self, text: str) -> str:
        if self._pattern is None:
            return text
        folded = fold(text)
        return self._pattern.sub(lambda m: self.names[" ".join(tokens(m.group()))], folded)


NO_FOLDING = NameFolding(())


class Rarity:
    """Inverse document frequency of terms over a collection of passages."""

    def __init__(self, passages: Iterable[str]):
        df: Counter[str] = Counter()
        n = 0
        for passage in passages:
            n += 1
            df.update(term_set(passage))
        self.n = max(n, 1)
        self.df = df

    def weight(self, term: str) -> float:
        """log((N + 1) / (df + 0.5)): an unseen term weighs most, a term in every passage least."""
        return math.log((self.n + 1) / (self.df.get(term, 0) + 0.5))

    def mass(self, words: Iterable[str]) -> float:
        return sum(self.weight(w) for w in sorted(set(words)))  # sorted: the same sum in every process


def overlap(a: Sequence[str] | frozenset[str], b: Sequence[str] | frozenset[str]) -> float:
    """Jaccard overlap of two term collections."""
    sa, sb = set(a), set(b)
    return len(sa & sb) / len(sa | sb) if sa or sb else 0.0


NEIGHBOUR_GAP = 200  # characters between two facts read together (a sentence and the next)


def joined(passages: Sequence[str], spans: Sequence[tuple[int | None, int | None]]) -> list[str]:
    """Each passage with the passages the book tells within `NEIGHBOUR_GAP` characters after it ends,
    in story order: a sentence and what follows it, read together ("I telegraphed to Cleveland" /
    "The answer was conclusive." / "It told me that Drebber had applied for the protection of the law")."""
    after = following(spans)
    return [" ".join([passage, *(passages[j] for j in after[i])]) if after[i] else passage
            for i, passage in enumerate(passages)]


def following(spans: Sequence[tuple[int | None, int | None]]) -> list[list[int]]:
    """For each span, the indices of the spans that start within `NEIGHBOUR_GAP` characters after it ends, in
    story order (what `joined` reads with it)."""
    order = sorted((i for i in range(len(spans)) if spans[i][0] is not None), key=lambda i: spans[i][0] or 0)
    starts = [spans[i][0] or 0 for i in order]
    out: list[list[int]] = []
    for i, (_, end) in enumerate(spans):
        if end is None:
            out.append([])
            continue
        lo, hi = bisect.bisect_left(starts, end), bisect.bisect_right(starts, end + NEIGHBOUR_GAP)
        out.append([j for j in order[lo:hi] if j != i])
    return out


def fact_passage(row: Mapping[str, Any]) -> str:
    """The text a fact is read by: its statement and, when different, its source sentence."""
    text = " ".join(str(row.get("text") or "").split())
    evidence = " ".join(str(row.get("evidence") or "").split())
    return text if not evidence or evidence == text else f"{text} {evidence}"


# -- support -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Support:
    score: float
    passage: int | None  # index of the first passage of the best window, None when nothing supports it
    near: float = 0.0  # the same product within one sentence of that passage: breaks a tie (`best_option`)


# A sentence ends at a stop and space, not after a lone letter ("Enoch J. Drebber" is one name).
_SENTENCE_END = re.compile(r"(?<![^\w]\w)(?<!^\w)[.!?;]+[\"'\u201d\u2019)]*\s+")


# A sentence opening on a time it does not name ("Until then the boy will keep the ledger") is about
# the time the sentence before it names: the two are read as one.
_BACK_IN_TIME = re.compile(r"^\W*(?:until|till|by|since|before|from)\s+then\b|^\W*after\s+that\b", re.IGNORECASE)


def passage_sentences(passage: str) -> list[str]:
    """The sentences of a passage (its facts, joined, are each at least one)."""
    found: list[str] = []
    for part in _SENTENCE_END.split(passage):
        if not part.strip():
            continue
        if found and _BACK_IN_TIME.match(part):
            found[-1] = f"{found[-1]} {part}"
        else:
            found.append(part)
    return found


class SupportIndex:
    def __init__(self, passages: Sequence[str], rarity: Rarity, window: int = 2):
        self.passages = list(passages)
        self.rarity = rarity
        self.window = max(1, window)
        passage_terms = [term_set(p) for p in self.passages]
        # window i covers passages i .. i+window-1
        self.windows: list[frozenset[str]] = [
            frozenset().union(*passage_terms[i: i + self.window]) for i in range(len(passage_terms))
        ]
        self.postings: dict[str, list[int]] = defaultdict(list)
        for i, window_terms in enumerate(self.windows):
            for term in window_terms:
                self.postings[term].append(i)

    def __len__(self) -> int:
        return len(self.passages)

    def _shares(self, words: Iterable[str]) -> dict[int, float]:
        """For each window, the share of `words`' rarity mass it contains."""
        weights = {t: self.rarity.weight(t) for t in sorted(set(words))}  # sorted: the same sums in every process
        total = sum(weights.values())
        if total <= 0:
            return {}
        shares: dict[int, float] = defaultdict(float)
        for term, weight in weights.items():
            for i in self.postings.get(term, ()):
                shares[i] += weight / total
        return shares

    @staticmethod
    def _ignored(ignore: Iterable[str]) -> frozenset[str]:
        return frozenset().union(*(term_set(name) for name in ignore))

    def context(self, question: str, ignore: Iterable[str] = ()) -> dict[int, float]:
        """Each window's share of the question's rarity mass (`ignore`: names that never count)."""
        return self._shares(term_set(question) - self._ignored(ignore))

    def support(self, question: str, options: Mapping[str, str], ignore: Iterable[str] = ()) -> dict[str, Support]:
        """Best support of each option (letter -> text); `ignore` are surface names whose terms never
        count (the asked character's own names)."""
        ignored = self._ignored(ignore)
        asked = term_set(question) - ignored
        context = self._shares(asked)
        out: dict[str, Support] = {}
        for letter, text in options.items():
            added = term_set(text) - asked - ignored
            addition = self._shares(added)
            best, where = 0.0, None
            for i, share in addition.items():
                score = context.get(i, 0.0) * share
                if score > best:
                    best, where = score, i
            ties = [i for i, share in addition.items() if best > 0 and context.get(i, 0.0) * share >= best - _TIE]
            near = max((self._near(i, asked, added) for i in ties), default=0.0)
            out[letter] = Support(best, where, near)
        return out

    def _near(self, passage: int, asked: frozenset[str], added: frozenset[str]) -> float:
        """The best support within one sentence of the passage (its window's passages): the question's
        context and the option told together, not in neighbouring sentences."""
        mass = self.rarity.mass  # summed in sorted order: the same float in every process
        asked_mass, added_mass = mass(asked) or 1.0, mass(added) or 1.0
        best = 0.0
        for text in self.passages[passage: passage + self.window]:
            for sentence in passage_sentences(text):
                words = term_set(sentence)
                best = max(best, mass(asked & words) / asked_mass * mass(added & words) / added_mass)
        return best


def best_option(support: Mapping[str, Support]) -> tuple[str, float]:
    """The option with the highest support and its score. Equal support (two options stated beside the
    question's context, as a list of a dead man's effects states them all) goes to the option told in
    the same sentence as the context (`Support.near`); then to the earlier letter."""
    letters = list(support)
    letter = max(letters, key=lambda k: (round(support[k].score / _TIE), round(support[k].near / _TIE),
                                         -letters.index(k)))
    return letter, support[letter].score


@dataclass(frozen=True)
class OptionReading:
    """What the offline reader made of one question with options."""

    choice: str | None  # the letter decided (None: refused)
    best: str  # the best-supported option
    support: float
    passage: int | None = None  # the passage supporting `best`


def read_options(question: str, options: Mapping[str, str], passages: Sequence[str], rarity: Rarity,
                 names: Sequence[str], floor: float = OFFLINE_FLOOR) -> OptionReading:
    """The best-supported option (each passage read on its own), or None when its support is below `floor`.

    `names` are the asked character's surface forms, whose terms never count as evidence.
    """
    first = next(iter(options))
    if not passages:
        return OptionReading(None, first, 0.0)
    support = SupportIndex(passages, rarity, window=1).support(question, options, names)
    letter, score = best_option(support)
    return OptionReading(letter if score >= floor else None, letter, score, support[letter].passage)
