"""The offline reasoner: how the agent decides when no model is configured (`handle.lm is None`).

It reads only the bounded pool the reasoning chain recalled (the character's visible facts and
its own scene notes), with the project's one offline reader
(`reveriemem.inference.offline_reader`), so it can say nothing the character does not know.
Every name is read as one (`NameFolding`: the character file's aliases and descriptors and the
book's entity table), so "the doctor" or "Mr. Holmes" meets the facts naming Livesey or Holmes.

- A question that carries options, typed as a user would ("A) ...", "a. ...", "(1) ...", on
  one line or several; `reveriemem.inference.options.parse_options`), is answered by the option its memory supports best
  (`SupportIndex.support`). Whether to answer at all compares that support with the best
  support the whole book gives any option (`BookEvidence`, read for the comparison only,
  never quoted): the book answers and the character's memory does not (their ratio is below
  the ratio floor) -> "I never saw that"; nothing in the book answers (below the option
  floor) -> "I don't know". The reply names the letter and the option; an option that is
  itself a refusal ("I cannot answer ...") is the letter of a refusal.
- A free-form question is answered extractively, quoting the fact whose passage holds the
  largest share of the question's rarity mass (ties: cosine similarity), its rarest asked word
  and all its asked words but a few; a fact that only shares a name, or misses what is asked
  about ("said the captain shortly" to "Who killed the captain?"), is not an answer. Below the question floor it refuses the same two ways, by the whole book.
- A question about someone or something by name and nothing else ("Who is Jefferson Hope?", "Tell
  me about the doctor", `asked_about`) quotes the fact of the pool that presents the name best (an
  apposition, "is a ...", "called ..."; else the earliest told, a line only calling on them last);
  when the pool never names it and the book does, "I never saw that".

The floors are calibrated per book, on the generated train items of all its focus characters,
when the memory is built (`reveriemem.inference.calibration`: the `reader_calibration` asset
stores the readings, `load_calibration` chooses the floors); an older build uses the default
floors, and the trace says which were used.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from reveriemem.core.errors import RegistryError, StorageError
from reveriemem.core.registry import load_book
from reveriemem.core.storage import MemoryStore, PartitionRef
from reveriemem.inference.calibration import READER_VERSION, ReaderCalibration
from reveriemem.inference.memory_reader import similarity_of
from reveriemem.inference.offline_reader import (
    NO_FOLDING,
    NameFolding,
    OptionReading,
    Rarity,
    SupportIndex,
    best_option,
    fact_passage,
    following,
    joined,
    term_set,
    terms,
)
from reveriemem.inference.options import Question
from reveriemem.inference.trace import AnchoredScene
from reveriemem.inference.turn_text import clip

EXTRACTIVE_METHOD = f"heuristic:{READER_VERSION}"
MIN_SCORE = 0.3  # kept for callers that pass it: the least cosine similarity of a fact worth quoting
REFUSAL = "I can't tell you that; it is nothing I saw or heard for myself."  # the book answers, my memory does not
UNKNOWN = "I don't know; nothing I remember speaks to that."  # nothing in the book answers either
REFUSALS = (REFUSAL, UNKNOWN)
QUOTE_WORDS = 60
COPY_TERMS = 4  # content words an option needs before it can be a copied line of the book


def _span(row: Mapping[str, Any]) -> tuple[int | None, int | None]:
    start, end = row.get("source_start"), row.get("source_end")
    return (None if start is None else int(start), None if end is None else int(end))


class BookEvidence(Rarity):
    """Term rarity over the whole book's facts, the book's name folding, and an index over those facts
    (each read with the next, as `joined`) that says how well the whole book supports a question:
    read only to decide whether to refuse, never quoted (a reply quotes the character's own pool)."""

    def __init__(self, passages: Sequence[str], folding: NameFolding = NO_FOLDING,
                 spans: Sequence[tuple[int | None, int | None]] | None = None):
        self.folding = folding
        folded = [folding.apply(p) for p in passages]
        super().__init__(folded)
        self.passages = joined(folded, spans) if spans is not None else folded
        self._told_parts = (folded, list(spans)) if spans is not None else None
        self._index: SupportIndex | None = None
        self._told: dict[int, SupportIndex] = {}
        self._lock = threading.Lock()

    @property
    def index(self) -> SupportIndex:
        if self._index is None:
            self._index = SupportIndex(self.passages, self, window=1)
        return self._index

    def told_by(self, as_of: int | None) -> SupportIndex:
        """The index over what the book has told by `as_of` (None: all of it): a refusal as of a point of the
        story ("I never saw that" / "I don't know") then says nothing of what the book tells later."""
        if as_of is None or self._told_parts is None:
            return self.index
        with self._lock:
            found = self._told.get(as_of)
        if found is None:  # each passage read with what follows it by then, as `joined` reads the whole book
            folded, spans = self._told_parts
            kept = [i for i, (start, _) in enumerate(spans) if start is None or start <= as_of]
            found = SupportIndex(joined([folded[i] for i in kept], [spans[i] for i in kept]), self, window=1)
            with self._lock:  # a few points of the story at a time (a chat keeps one)
                self._told = {**(self._told if len(self._told) < 8 else {}), as_of: found}
        return found


def book_folding(book: str, store: MemoryStore) -> NameFolding:
    """The book's names: each focus character's aliases and descriptors, and the entity table's aliases."""
    groups: list[tuple[str, list[str]]] = []
    try:
        for character in load_book(book, store.home).characters:
            groups.append((character.name, [*character.aliases, *character.descriptors]))
    except RegistryError:
        pass
    try:
        entities = store.read("entities", PartitionRef(book)).select("name", "aliases", "character").to_dicts()
    except StorageError:
        entities = []
    for row in entities:
        aliases = [str(a) for a in row.get("aliases") or [] if a]
        if row.get("character") is None and len(aliases) > 1:
            groups.append((str(row["name"]), aliases))
    return NameFolding(groups)


def load_rarity(book: str, store: MemoryStore | None = None) -> BookEvidence:
    """The whole book's facts as evidence: term rarity, names, and the support index the refusal compares
    with (no fact of it is read into a reply)."""
    store = store or MemoryStore.for_home()
    facts = store.read("facts", PartitionRef(book)).select("text", "evidence", "source_start", "source_end").to_dicts()
    return BookEvidence([fact_passage(row) for row in facts], book_folding(book, store), [_span(r) for r in facts])


# -- deciding ------------------------------------------------------------------------------------


@dataclass
class OfflineDecision:
    reply: str
    used: list[str]  # fact ids the reply rests on
    stop: str  # option | extractive | refusal
    detail: dict[str, Any]  # what the trace shows of the decision


@dataclass(frozen=True)
class Comparison:
    """A question read against the character's memory and against the whole book (no decision yet)."""

    reading: OptionReading  # options: the best-supported option in memory; free-form: the best fact
    book: float  # the best support the whole book gives (at least the memory's own)
    on_point: bool = True  # free-form: the memory's best passage holds the question's rarest word
    book_on_point: bool = True  # free-form: the book's best passage does
    unheld_copy: bool = False  # options: the best one copies a line of the book that memory does not hold

    @property
    def ratio(self) -> float:
        return self.reading.support / self.book if self.book > 0 else 0.0


class OfflineReasoner:
    """Reads one bounded pool against a question; `names` are the character's own surface forms."""

    def __init__(self, rarity: Rarity | None, calibration: ReaderCalibration, names: Sequence[str]):
        self.rarity = rarity
        self.calibration = calibration
        self.book = rarity if isinstance(rarity, BookEvidence) else None
        self.folding = self.book.folding if self.book is not None else NO_FOLDING
        self.names = list(names)
        self.ignored = [self.folding.apply(n) for n in self.names] + self.names
        self.own_terms = frozenset().union(*(term_set(n) for n in self.ignored))  # the words of the character's names

    def _index(self, pool: Sequence[Mapping[str, Any]], anchored: Sequence[AnchoredScene],
               after: Mapping[str, Sequence[Mapping[str, Any]]] | None = None) -> SupportIndex:
        """The pool's facts and the character's own scene notes, as passages; a passage's index is its
        fact's index in `pool`. Each fact is read with the facts the character knows that the book tells
        closely after it (`after`, by fact id: `MemoryReader.follow`), as the whole book is read; without
        them, with the pool facts that the book tells closely after it."""
        facts = joined([self.folding.apply(fact_passage(row)) for row in pool], [_span(row) for row in pool])
        for i, row in enumerate(pool):
            following = (after or {}).get(str(row.get("fact_id")))
            if following:
                facts[i] = self.folding.apply(" ".join([fact_passage(row), *map(fact_passage, following)]))
        passages = facts + [self.folding.apply(s.note) for s in anchored]
        return SupportIndex(passages, self.rarity or Rarity(passages), window=1)

    def compare_options(self, question: Question, pool: Sequence[Mapping[str, Any]],
                        anchored: Sequence[AnchoredScene],
                        after: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
                        as_of: int | None = None) -> Comparison:
        """The best-supported answer option in memory and the whole book's best support, the book read up
        to `as_of` when given (no decision yet)."""
        answers = {k: self.folding.apply(v) for k, v in question.answers.items()}
        text = self.folding.apply(question.text)
        first = next(iter(answers))
        held: SupportIndex | None = None
        if not pool and not anchored:
            reading = OptionReading(None, first, 0.0)
        else:
            held = self._index(pool, anchored, after)
            support = held.support(text, answers, self.ignored)
            letter, score = best_option(support)
            reading = OptionReading(letter, letter, score, support[letter].passage)
        if self.book is None:
            return Comparison(reading, reading.support)
        told = self.book.told_by(as_of)
        _, book = best_option(told.support(text, answers, self.ignored))
        copied = self._copy_unheld(answers[reading.best], held, told)
        return Comparison(reading, max(book, reading.support), unheld_copy=copied)

    def _copy_unheld(self, option: str, memory: SupportIndex | None, book: SupportIndex) -> bool:
        """Does the option copy a line of the book (its content words, `COPY_TERMS` or more, in the same order
        with nothing between) that no passage of the memory holds so? A character who lived that line holds it
        whole; its words scattered over passages of theirs, or told in another order, are not it."""
        said = [t for t in terms(option) if t not in self.own_terms]
        return len(set(said)) >= COPY_TERMS and _copied(said, book) and not (memory is not None and _copied(said, memory))

    def read_options(self, question: Question, pool: Sequence[Mapping[str, Any]],
                     anchored: Sequence[AnchoredScene]) -> OptionReading:
        """The best-supported answer option and its support (no decision yet)."""
        return self.compare_options(question, pool, anchored).reading

    def _rarest(self, text: str) -> frozenset[str]:
        """The question's rarest word that the book knows and that names no one (the character's own
        names and every name the book's folding knows left out): what the question asks about."""
        names = self.own_terms | self.folding.terms
        asked = [t for t in term_set(text) - names if self.rarity is None or self.rarity.df.get(t, 0) > 0]
        if not asked:
            return frozenset()
        weight = (self.rarity or Rarity([])).weight
        top = max(weight(t) for t in asked)
        return frozenset(t for t in asked if weight(t) >= top - 1e-9)

    def _asked(self, text: str) -> frozenset[str]:
        """The words a question asks with, the character's own names left out."""
        return term_set(text) - self.own_terms

    def _holds(self, text: str, rarest: frozenset[str]) -> Callable[[str], bool]:
        """Does a passage hold what a free-form question asks: its rarest asked word, and all its asked
        words but a few (none of two, one of three or four, two of five or six...)?"""
        asked = self._asked(text)
        spare = max(0, (len(asked) - 1) // 2)

        def holds(passage: str) -> bool:
            words = term_set(passage)
            return bool(rarest) and rarest <= words and len(asked - words) <= spare
        return holds

    def compare_question(self, question: str, pool: Sequence[Mapping[str, Any]],
                         after: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
                         as_of: int | None = None) -> Comparison:
        """The pool fact best supporting a free-form question, its context share, and the whole book's best
        (the book read up to `as_of` when given)."""
        text = self.folding.apply(question)
        rarest = self._rarest(text)
        holds = self._holds(text, rarest)
        reading, on_point = OptionReading(None, "", 0.0), False
        if pool:
            index = self._index(pool, [], after)
            shares = index.context(text, self.ignored)
            if shares:
                best = max(shares, key=lambda i: (not asks(pool[i]), holds(index.passages[i]),
                                                  round(shares[i], 6), similarity_of(pool[i]) or 0.0))
                reading = OptionReading(None, "", shares[best], best)
                on_point = holds(index.passages[best]) and not asks(pool[best])
        if self.book is None:
            return Comparison(reading, reading.support, on_point, on_point)
        told = self.book.told_by(as_of)
        shares = told.context(text, self.ignored)
        if not shares:
            return Comparison(reading, reading.support, on_point, on_point)
        best = max(shares, key=lambda i: (holds(told.passages[i]), shares[i]))
        book_on_point = holds(told.passages[best])
        return Comparison(reading, max(shares[best], reading.support), on_point, book_on_point or on_point)

    def read_question(self, question: str, pool: Sequence[Mapping[str, Any]]) -> tuple[int | None, float]:
        """The pool fact best supporting a free-form question, and its context share (no decision yet)."""
        reading = self.compare_question(question, pool).reading
        return reading.passage, reading.support

    def option_letter(self, compared: Comparison) -> str | None:
        """The option decided, or None to refuse."""
        cal = self.calibration
        if compared.book <= cal.option_floor or compared.reading.support <= 0 or compared.ratio < cal.ratio_floor \
                or compared.unheld_copy:
            return None
        return compared.reading.best

    def answers_question(self, compared: Comparison) -> bool:
        return (compared.reading.passage is not None and compared.on_point
                and compared.reading.support > self.calibration.question_floor)

    def refusal(self, compared: Comparison, floor: float, on_point: bool = True) -> str:
        """"I never saw that" when the whole book answers, "I don't know" when nothing does."""
        return REFUSAL if compared.book > floor and on_point else UNKNOWN

    def decide(self, question: Question, pool: Sequence[Mapping[str, Any]],
               anchored: Sequence[AnchoredScene],
               after: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
               as_of: int | None = None) -> OfflineDecision:
        """Pick an option, quote a line or refuse; with `as_of` the book is read up to that point of the story."""
        cal = self.calibration
        detail: dict[str, Any] = {"reader": READER_VERSION, "calibration": cal.to_dict()}
        if question.options and question.answers:
            compared = self.compare_options(question, pool, anchored, after, as_of)
            reading = compared.reading
            letter = self.option_letter(compared)
            fact = _fact_at(pool, reading.passage) if letter else None
            detail.update(options=question.options, best=reading.best, support=round(reading.support, 4),
                          book=round(compared.book, 4), ratio=round(compared.ratio, 4),
                          floor=cal.option_floor, ratio_floor=cal.ratio_floor, letter=letter or question.refusal,
                          copied_line_unheld=compared.unheld_copy)
            if letter:
                if fact is None and reading.passage is not None and reading.passage - len(pool) < len(anchored):
                    note = anchored[reading.passage - len(pool)]  # chosen from the character's own scene memory
                    detail.update(rests_on_scene=note.scene_id, rests_on_chars=[note.source_start, note.source_end])
                reply = f"({question.label(letter)}) {_closed(question.options[letter])} That much I know for myself."
                return OfflineDecision(reply, [str(fact["fact_id"])] if fact else [], "option", detail)
            why = self.refusal(compared, cal.option_floor)
            reply = (f"({question.label(question.refusal)}) {_closed(question.options[question.refusal])} {why}"
                     if question.refusal else why)
            return OfflineDecision(reply, [], "refusal", detail)
        subject = asked_about(question.text)
        if subject is not None and (about := self._about(subject, pool, detail, as_of)) is not None:
            return about
        compared = self.compare_question(question.text, pool, after, as_of)
        where = compared.reading.passage
        detail.update(support=round(compared.reading.support, 4), book=round(compared.book, 4),
                      on_point=compared.on_point, floor=cal.question_floor,
                      fact=None if where is None else str(pool[where]["fact_id"]))
        if not self.answers_question(compared) or where is None:
            return OfflineDecision(self.refusal(compared, cal.question_floor, compared.book_on_point), [], "refusal",
                                   detail)
        return _remembered(self._line_of(question.text, where, pool, after), detail)

    def _line_of(self, question: str, where: int, pool: Sequence[Mapping[str, Any]],
                 after: Mapping[str, Sequence[Mapping[str, Any]]] | None) -> Mapping[str, Any]:
        """The fact to quote from the passage that answered: the pool fact at `where` was read with the facts
        told just after it, and the words the question asks may stand in one of those ("The harbour lamps
        stay with the Guild." / "She did not say what she had seen from this wall before dawn"). The line
        that holds the question best (`_holds`, then its rarest asked word, then the weight of the asked words
        it holds), the first at a tie."""
        head = pool[where]
        told_after = (after or {}).get(str(head.get("fact_id"))) or \
            [pool[j] for j in following([_span(r) for r in pool])[where]]
        lines = [head, *(row for row in told_after if not asks(row))]  # a line that asks answers nothing
        if len(lines) == 1:
            return head
        text = self.folding.apply(question)
        rarest = self._rarest(text)
        holds = self._holds(text, rarest)
        asked = self._asked(text)
        weight = (self.rarity or Rarity([])).weight

        def fit(i: int) -> tuple[bool, bool, float, int]:
            passage = self.folding.apply(fact_passage(lines[i]))
            words = term_set(passage)
            return holds(passage), bool(rarest) and rarest <= words, sum(map(weight, asked & words)), -i
        return lines[max(range(len(lines)), key=fit)]

    def _about(self, subject: str, pool: Sequence[Mapping[str, Any]],
               detail: dict[str, Any], as_of: int | None = None) -> OfflineDecision | None:
        """A question about someone or something by name ("Who is Jefferson Hope?", "Tell me about the
        doctor"): the fact of the pool that presents it best (`_presents`), the character's own name
        said back, or a refusal when the pool never names it. None when the subject is not only names
        the book knows (the ordinary reading decides)."""
        folded = self.folding.apply(subject)
        named = term_set(folded) & self.folding.terms
        if not named or term_set(folded) - self.folding.terms:
            return None
        if named <= self.own_terms:
            return OfflineDecision(f"That is me: {self.names[0]}." if self.names else UNKNOWN, [], "refusal", detail)
        pattern = _presents(folded)
        found = [(i, row) for i, row in enumerate(pool) if named <= term_set(self.folding.apply(fact_passage(row)))]
        detail.update(about=subject, named=len(found))
        if not found:
            in_book = self.book is not None and any(
                named <= term_set(p) for p in self.book.told_by(as_of).passages)
            return OfflineDecision(REFUSAL if in_book else UNKNOWN, [], "refusal", detail)
        vocative = _called_on(folded)

        def rank(candidate: tuple[int, Mapping[str, Any]]) -> tuple[bool, bool, int, int]:
            i, row = candidate  # a presenting sentence first, one calling on the name last, then the earliest told
            passage = self.folding.apply(fact_passage(row))
            return pattern.search(passage) is None, vocative.search(passage) is not None, _span(row)[0] or 0, i
        _, row = min(found, key=rank)
        detail.update(fact=str(row["fact_id"]))
        return _remembered(row, detail)


# A question about someone or something by name, and nothing else: "Who is X?", "Who was X?",
# "What do you know about X?", "What do you think of X?", "Tell me about X", "Describe X", "Have you met X?".
_ABOUT = re.compile(
    r"^\s*(?:who\s+(?:is|was)|what\s+(?:do|did|can)\s+you\s+(?:know|think|remember|make)\s+(?:of|about)|"
    r"(?:can\s+you\s+|please\s+)?(?:tell\s+me|speak)\s+(?:(?:more\s+)?about|of)|describe|"
    r"have\s+you\s+(?:ever\s+)?(?:met|seen|heard\s+of))\s+(?P<subject>[^?.!]+?)\s*[?.!]*\s*$",
    re.IGNORECASE)


def asked_about(text: str) -> str | None:
    """The name a question asks about and nothing else ("Who is Jefferson Hope?" -> "Jefferson Hope"), or None."""
    found = _ABOUT.match(" ".join(text.split()))
    return found.group("subject") if found else None


def _presents(name: str) -> re.Pattern[str]:
    """A sentence presenting `name` (folded): an apposition ("Jefferson Hope, the murderer of ..."), a
    copula ("Silver is a ...", "he was called Holmes"), or a naming ("a cabby called Jefferson Hope")."""
    core = re.escape(name.strip())
    return re.compile(rf"{core}\s*,\s+(?:the|a|an|my|our|his|her|their)\s|{core}\s+(?:is|was)\s+(?:the|a|an|my|our|"
                      rf"his|her|their|not)\s|(?:called|named|name\s+(?:is|was))\s+{core}", re.IGNORECASE)


def _called_on(name: str) -> re.Pattern[str]:
    """`name` (folded) called on in speech rather than spoken of ("Do you remember the case, Gregson?")."""
    core = re.escape(name.strip())
    return re.compile(rf",\s*{core}\s*[,?!.]|[\"“‘]\s*{core}\s*,", re.IGNORECASE)


_QUOTED = re.compile(r"[\"“]([^\"“”]+)[\"”]")  # the quoted parts of a line of dialogue


def asks(row: Mapping[str, Any]) -> bool:
    """Is the fact itself a question ("And he took pages out of the ledger?", '"Is that you, Jim?" said the
    captain')? Every quoted part of a line of dialogue, else the sentence, ends with a question mark. It
    states nothing, so it answers nothing: quoted back to "Who took the ledger?", it would only repeat the
    doubt."""
    said = " ".join(str(row.get("evidence") or row.get("text") or "").split())
    parts = _QUOTED.findall(said) or [said]
    return all(part.strip().rstrip("\"'”’) ").endswith("?") for part in parts)


def _remembered(row: Mapping[str, Any], detail: dict[str, Any]) -> OfflineDecision:
    """The extractive reply quoting one fact of the pool."""
    return OfflineDecision(f"As I remember it: {quoted(str(row.get('evidence') or row.get('text') or ''))}",
                           [str(row["fact_id"])], "extractive", detail)


def _copied(said: list[str], index: SupportIndex) -> bool:
    """Does a passage of `index` hold the terms `said`, in that order, with no other term between?"""
    holding: set[int] | None = None
    for word in set(said):
        found = set(index.postings.get(word, ()))
        holding = found if holding is None else holding & found
        if not holding:
            return False
    n = len(said)
    for i in sorted(holding or ()):
        passage = terms(index.passages[i])
        if any(passage[j: j + n] == said for j in range(len(passage) - n + 1)):
            return True
    return False


def _fact_at(pool: Sequence[Mapping[str, Any]], passage: int | None) -> Mapping[str, Any] | None:
    return pool[passage] if passage is not None and passage < len(pool) else None  # else a scene note


def _closed(option: str) -> str:
    """An option as a sentence of the reply: ended by a stop unless it ends with one ("I cannot answer this.")."""
    option = option.strip()
    return option if option.endswith((".", "!", "?", "\"", "”", "'")) else f"{option}."


def quoted(text: str) -> str:
    """`text` clipped and in double quotes, once: a line of dialogue keeps its own quotation marks, and a
    sentence cut from inside a quotation loses the stray mark at its edge ("Jefferson Hope, the murderer
    of Enoch Drebber.”" is quoted once)."""
    text = clip(" ".join(text.split()), QUOTE_WORDS)
    bare = text.strip("\"“” ")
    if bare and not re.search(r"[\"“”]", bare):
        return f'"{bare}"'
    return text if text[:1] in "\"“" else f'"{text}"'
