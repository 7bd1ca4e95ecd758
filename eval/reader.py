"""The offline option reader: a multiple-choice question read against passages, without a model.

This is the project's one reader of options without a model. `read_options`
is the whole reader (best-supported option, or refusal below a floor), used by
every reference method run offline; the evidence answerer and ReverieMem's
deterministic chain use its parts, `SupportIndex` and `best_option`, and
make their own refusal decision from the support they get.

`SupportIndex(passages, rarity)` scores each option A-D of an item by the best
passage (or window of `window` consecutive passages) that supports it:

    support(p, o) = context(p) x addition(p, o)

- `context(p)`: the share of the question's rarity mass that p contains
  (the question's terms, the asked character's own names left out);
- `addition(p, o)`: the share of the option's rarity mass that p contains,
  counting only the option's terms that the question does not already have:
  an option scores by what it adds over the question, so options that repeat
  the question's words do not win by that;
- rarity is inverse document frequency over the whole book's passages, so a
  rare word ("cask", "Brixton") weighs more than a common one ("door").

Both factors are in [0, 1]; a passage stating the question's context together
with the option scores near 1. The index is inverted (term -> passages), so a
question only touches passages that share a term with it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from eval.items import ANSWER_LETTERS, REFUSAL_LETTER, KBFItem
from eval.lexical import Rarity, term_set

# Least support (question-context share x option share, both in [0, 1]) at which `read_options`
# commits to an option; below it the reader refuses. Low on purpose: one passage that states part
# of the question together with the option is enough.
OFFLINE_FLOOR = 0.1


@dataclass(frozen=True)
class Support:
    score: float
    passage: int | None  # index of the first passage of the best window, None when nothing supports it


class SupportIndex:
    def __init__(self, passages: Sequence[str], rarity: Rarity, window: int = 2):
        self.passages = list(passages)
        self.rarity = rarity
        self.window = max(1, window)
        terms = [term_set(p) for p in self.passages]
        # window i covers passages i .. i+window-1
        self.windows: list[frozenset[str]] = [
            frozenset().union(*terms[i: i + self.window]) for i in range(len(terms))
        ]
        self.postings: dict[str, list[int]] = defaultdict(list)
        for i, window_terms in enumerate(self.windows):
            for term in window_terms:
                self.postings[term].append(i)

    def __len__(self) -> int:
        return len(self.passages)

    def _shares(self, terms: Iterable[str]) -> dict[int, float]:
        """For each window, the share of `terms`' rarity mass it contains."""
        weights = {t: self.rarity.weight(t) for t in set(terms)}
        total = sum(weights.values())
        if total <= 0:
            return {}
        shares: dict[int, float] = defaultdict(float)
        for term, weight in weights.items():
            for i in self.postings.get(term, ()):
                shares[i] += weight / total
        return shares

    def support(self, item: KBFItem, ignore: Iterable[str] = ()) -> dict[str, Support]:
        """Best support of each option A-D; `ignore` are surface names whose terms never count
        (the asked character's own names: addressing Watson is not evidence)."""
        ignored = set().union(*(term_set(name) for name in ignore)) if ignore else set()
        question = term_set(item.question) - ignored
        context = self._shares(question)
        out: dict[str, Support] = {}
        for letter in ANSWER_LETTERS:
            added = term_set(item.options[letter]) - question - ignored
            addition = self._shares(added)
            best, where = 0.0, None
            for i, share in addition.items():
                score = context.get(i, 0.0) * share
                if score > best:
                    best, where = score, i
            out[letter] = Support(best, where)
        return out


def best_option(support: dict[str, Support]) -> tuple[str, float]:
    """The option with the highest support (ties: the earlier letter) and its score."""
    letter = max(ANSWER_LETTERS, key=lambda k: (support[k].score, -ANSWER_LETTERS.index(k)))
    return letter, support[letter].score


@dataclass(frozen=True)
class OptionReading:
    """What the offline reader made of one item."""

    choice: str  # the letter decided (E when refusing)
    best: str  # the best-supported option A-D
    support: float


def read_options(item: KBFItem, passages: Sequence[str], rarity: Rarity, names: Sequence[str],
                 floor: float = OFFLINE_FLOOR) -> OptionReading:
    """The best-supported option (each passage read on its own), or E when its support is below `floor`.

    `names` are the asked character's surface forms, whose terms never count as evidence.
    """
    if not passages:
        return OptionReading(REFUSAL_LETTER, ANSWER_LETTERS[0], 0.0)
    support = SupportIndex(passages, rarity, window=1).support(item, names)
    letter, score = best_option(support)
    return OptionReading(letter if score >= floor else REFUSAL_LETTER, letter, score)
