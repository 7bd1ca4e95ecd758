"""Which sentence of a reply each fact it rests on supports, decided without a model.

A reply is cut with the project's one splitter for short texts (`split_sentences`), and words are
compared through the offline reader's lexical view (`terms`, `term_set`, `Rarity`,
`fact_passage`). A used fact supports a sentence when the sentence

- quotes it: a run of `QUOTE_RUN` consecutive content terms of the sentence (all of them when it
  has fewer, but at least `MIN_QUOTE_TERMS`) occurs in order in the fact's passage (its statement
  and source sentence); or
- shares its rarest content words: of the `RAREST` rarest terms of the fact's statement (book
  rarity, the asked character's own names left out; a term as rare as the last of them counts
  too, so ties never depend on word order), the sentence holds at least two (all of them when
  there are fewer).

Only the facts the reply is said to use are candidates, so a refusal (no used fact) has no
supporting fact on any sentence. An option chosen offline rests on the facts it was chosen from.
The result is deterministic: same reply, facts and rarity, same marks.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from reveriemem.core.text import split_sentences
from reveriemem.inference.offline_reader import Rarity, fact_passage, term_set, terms
from reveriemem.inference.trace import RecalledFact

QUOTE_RUN = 4  # consecutive content terms that make a quotation
MIN_QUOTE_TERMS = 3  # a shorter sentence can only share rare words, not quote
RAREST = 3  # rarest terms of a fact's statement that a sentence may share


@dataclass(frozen=True)
class SentenceSupport:
    """One sentence of a reply and the used facts that support it, in the trace's order."""

    index: int
    text: str
    facts: list[RecalledFact] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "text": self.text,
                "facts": [{"id": f.fact_id, "source_start": f.source_start, "source_end": f.source_end}
                          for f in self.facts]}


def _contains_run(needle: Sequence[str], haystack: Sequence[str]) -> bool:
    n = len(needle)
    return any(list(haystack[i: i + n]) == list(needle) for i in range(len(haystack) - n + 1))


def quotes(sentence_terms: Sequence[str], passage_terms: Sequence[str]) -> bool:
    """True when a run of `QUOTE_RUN` consecutive sentence terms (all, if fewer) occurs in the passage."""
    if len(sentence_terms) < MIN_QUOTE_TERMS:
        return False
    run = min(QUOTE_RUN, len(sentence_terms))
    return any(_contains_run(sentence_terms[i: i + run], passage_terms)
               for i in range(len(sentence_terms) - run + 1))


def rarest_terms(statement: str, rarity: Rarity, ignore: frozenset[str] = frozenset()) -> list[str]:
    """The `RAREST` rarest content terms of a fact's statement, with every term tied with the last."""
    seen = list(dict.fromkeys(t for t in terms(statement) if t not in ignore))
    ranked = sorted(seen, key=lambda t: (-rarity.weight(t), seen.index(t)))
    if len(ranked) <= RAREST:
        return ranked
    last = rarity.weight(ranked[RAREST - 1])
    return [t for t in ranked if rarity.weight(t) >= last]


def supports(sentence: str, fact: RecalledFact, rarity: Rarity, ignore: frozenset[str] = frozenset()) -> bool:
    """Whether `sentence` quotes `fact` or shares its rarest content words."""
    said = terms(sentence)
    if quotes(said, terms(fact_passage({"text": fact.text, "evidence": fact.evidence}))):
        return True
    rare = rarest_terms(fact.text, rarity, ignore)
    return bool(rare) and len(set(rare) & set(said)) >= min(2, len(rare))


def sentence_support(reply: str, used: Sequence[RecalledFact], rarity: Rarity | None = None,
                     names: Iterable[str] = (), option: bool = False) -> list[SentenceSupport]:
    """Each sentence of `reply` with the facts of `used` that support it.

    `rarity` is the book's (the offline reasoner's); without it the used facts' own passages give
    it. `names` are the asked character's surface forms, whose terms are never rare words. With
    `option`, the reply opens on the option the offline reader chose ("(A) Jefferson Hope."), and
    that first sentence rests on the used facts it was chosen from, whatever words they share.
    """
    weights = rarity or Rarity(fact_passage({"text": f.text, "evidence": f.evidence}) for f in used)
    ignore = frozenset().union(*(term_set(name) for name in names))
    return [SentenceSupport(i, sentence, [f for f in used if (option and i == 0)
                                          or supports(sentence, f, weights, ignore)])
            for i, sentence in enumerate(split_sentences(reply))]
