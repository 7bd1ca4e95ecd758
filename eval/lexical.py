"""Words as evaluation code compares them: tokens, light stems, function words, rarity.

One place for the lexical view the item generator, the evidence answerer and the
offline readers of the baselines share. `terms` folds case, curly quotes,
ligatures and accents, possessives and common inflections ("lamps", "lamp's", "lamped" -> "lamp"), and
drops function words; `Rarity` weights a term by its inverse document frequency
over a collection of passages (the book's evidence), so "cask" counts for more
than "door".
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence

_TOKEN = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
FUNCTION_WORDS = frozenset(["a", "about", "above", "after", "again", "against", "all", "am", "an", "and", "any", "are", "aren't", "as", "at", "be", "because", "been", "before", "being", "below", "between", "both", "but", "by", "can", "cannot", "could", "couldn't", "did", "didn't", "do", "does", "doesn't", "doing", "don't", "down", "during", "each", "few", "for", "from", "further", "had", "hadn't", "has", "hasn't", "have", "haven't", "having", "he", "he'd", "he'll", "he's", "her", "here", "here's", "hers", "herself", "him", "himself", "his", "how", "how's", "i", "i'd", "i'll", "i'm", "i've", "if", "in", "into", "is", "isn't", "it", "it's", "its", "itself", "let's", "me", "more", "most", "mustn't", "my", "myself", "no", "nor", "not", "of", "off", "on", "once", "only", "or", "other", "ought", "our", "ours", "ourselves", "out", "over", "own", "same", "shan't", "she", "she'd", "she'll", "she's", "should", "shouldn't", "so", "some", "such", "than", "that", "that's", "the", "their", "theirs", "them", "themselves", "then", "there", "there's", "these", "they", "they'd", "they'll", "they're", "they've", "this", "those", "through", "to", "too", "under", "until", "up", "very", "was", "wasn't", "we", "we'd", "we'll", "we're", "we've", "were", "weren't", "what", "what's", "when", "when's", "where", "where's", "which", "while", "who", "who's", "whom", "why", "why's", "with", "won't", "would", "wouldn't", "you", "you'd", "you'll", "you're", "you've", "your", "yours", "yourself", "yourselves", "upon", "shall", "will", "may", "might", "must", "one", "two", "also", "yet", "thus", "thee", "thou", "thy", "thine", "ye", "unto", "said", "says", "say", "tell", "told", "know", "knew", "known", "did", "does", "do", "you", "your", "yes", "sir", "mr", "mrs", "miss", "dr", "doctor"])


def stem(word: str) -> str:
    """A light, deterministic stem: enough to meet "lamps"/"lamp" and "filled"/"fill"."""
    word = word.removesuffix("'s").removesuffix("'")
    for suffix, keep in (("ies", "y"), ("ied", "y"), ("ing", ""), ("ed", ""), ("es", ""), ("s", ""), ("ly", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            if suffix == "s" and word.endswith(("ss", "us", "is")):
                return word
            if suffix == "es" and not word.endswith(("ches", "shes", "sses", "xes", "zes")):
                continue
            base = word[: -len(suffix)] + keep
            if suffix in ("ing", "ed") and len(base) >= 4 and base[-1] == base[-2] and base[-1] not in "lsz":
                base = base[:-1]  # "stopped" -> "stop"
            return base
    return word


_LIGATURES = str.maketrans({"æ": "ae", "œ": "oe", "ß": "ss", "ø": "o", "đ": "d", "ł": "l", "’": "'", "‘": "'"})


def fold(text: str) -> str:
    """Case, curly quotes, ligatures and accents folded away: "Hæmoglobin" -> "haemoglobin",
    "Bohème" -> "boheme" (a question typed without the book's accents still meets it)."""
    decomposed = unicodedata.normalize("NFKD", text.casefold().translate(_LIGATURES))
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(fold(text))


def terms(text: str) -> list[str]:
    """Content terms of a text, stemmed, in order (repeats kept)."""
    return [stem(t) for t in tokens(text) if len(t) > 1 and t not in FUNCTION_WORDS]


def term_set(text: str) -> frozenset[str]:
    return frozenset(terms(text))


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
        return sum(self.weight(w) for w in set(words))


def overlap(a: Sequence[str] | frozenset[str], b: Sequence[str] | frozenset[str]) -> float:
    """Jaccard overlap of two term collections."""
    sa, sb = set(a), set(b)
    return len(sa & sb) / len(sa | sb) if sa or sb else 0.0
