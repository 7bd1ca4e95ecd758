"""Words as evaluation code compares them: light stems, content terms, rarity.

The lexical view the item generator, the evidence answerer and the offline
readers of the baselines share, built on the primitives of
`reveriemem.core.text` (folding, tokens, function words). `terms` folds case,
curly quotes, ligatures and accents, possessives and common inflections
("lamps", "lamp's", "lamped" -> "lamp"), and drops function words; `Rarity`
weights a term by its inverse document frequency over a collection of
passages (the book's evidence), so "cask" counts for more than "door".
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence

from reveriemem.core.text import FUNCTION_WORDS, tokens


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
