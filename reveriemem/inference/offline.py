"""The offline reasoner: how the agent decides when no model is configured (`handle.lm is None`).

It reads only the bounded pool the reasoning chain recalled (the character's visible facts and
its own scene notes), with the project's one offline reader
(`reveriemem.inference.offline_reader`), so it can say nothing the character does not know.

- A question that carries options, typed as a user would ("A) ...", "A. ...", "(A) ...", on
  one line or several; `parse_options`), is answered by the option its memory supports best
  (`SupportIndex.support`), or refused when that support is not above the option floor. The
  reply names the letter and the option; an option that is itself a refusal ("I cannot
  answer ...") is the letter of a refusal.
- A free-form question is answered extractively, quoting the fact whose passage holds the
  largest share of the question's rarity mass (ties: cosine similarity), or refused when that
  share is not above the question floor: a fact that only shares a name is not an answer.

Both floors are calibrated per book and character on generated train items when the memory is
built (the `reader_calibration` asset) and read from storage (`load_calibration`); an older build
without them uses `DEFAULT_CALIBRATION`, and the trace says which was used.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from reveriemem.core.errors import StorageError
from reveriemem.core.storage import MemoryStore, PartitionRef
from reveriemem.inference.memory_reader import similarity_of
from reveriemem.inference.offline_reader import OptionReading, Rarity, SupportIndex, best_option, fact_passage
from reveriemem.inference.trace import AnchoredScene
from reveriemem.inference.turn_text import clip

READER_VERSION = "offline-reader-v3"  # a stored calibration of another version is not used
EXTRACTIVE_METHOD = f"heuristic:{READER_VERSION}"
MIN_SCORE = 0.3  # kept for callers that pass it: the least cosine similarity of a fact worth quoting
REFUSAL = "I can't tell you that; it is nothing I saw or heard for myself."
QUOTE_WORDS = 60


@dataclass(frozen=True)
class ReaderCalibration:
    """The offline reasoner's floors and where they came from."""

    option_floor: float  # an option is chosen only when its support is above this
    question_floor: float  # a free-form answer is given only when its context share is above this
    source: str
    n_train: int = 0
    kbf_train: float | None = None
    calibrated: bool = True
    reader: str = READER_VERSION

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


DEFAULT_CALIBRATION = ReaderCalibration(
    option_floor=0.3, question_floor=0.5, calibrated=False,
    source="default floors: no calibration of this reader is stored with the build (rebuild the book)")


def load_calibration(book: str, character: str, store: MemoryStore | None = None) -> ReaderCalibration:
    """The calibration stored with the build of `book` for `character`, else `DEFAULT_CALIBRATION`."""
    store = store or MemoryStore.for_home()
    try:
        rows = store.read("reader_calibration", PartitionRef(book, character)).to_dicts()
    except StorageError:
        return DEFAULT_CALIBRATION
    row = rows[0] if rows else None
    if row is None or row.get("reader") != READER_VERSION:
        return DEFAULT_CALIBRATION
    return ReaderCalibration(option_floor=float(row["option_floor"]), question_floor=float(row["question_floor"]),
                             source=str(row["source"]), n_train=int(row["n_train"] or 0),
                             kbf_train=row.get("kbf_train"), calibrated=bool(row.get("calibrated", True)))


def load_rarity(book: str, store: MemoryStore | None = None) -> Rarity:
    """Term rarity over the whole book's stored facts (counts only: no fact is read into a reply)."""
    store = store or MemoryStore.for_home()
    facts = store.read("facts", PartitionRef(book)).select("text", "evidence").to_dicts()
    return Rarity(fact_passage(row) for row in facts)


# -- options typed in the question -------------------------------------------------------------

_MARKER = re.compile(r"(?:(?<=\s)|^)(?:\(([A-E])\)|([A-E])[).:])(?=\s)")
_REFUSING = re.compile(r"\b(?:can ?not|can't|cannot|don't|do not|couldn't|could not)\s+(?:answer|know|say|tell)\b"
                       r"|\bno idea\b|\bnot know\b|\bnone of (?:these|the above)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Question:
    text: str  # the question without its options
    options: dict[str, str] = field(default_factory=dict)  # letter -> option, in order
    refusal: str | None = None  # the option that is itself a refusal, if any

    @property
    def answers(self) -> dict[str, str]:
        """The options read against memory (the refusal option is not one)."""
        return {k: v for k, v in self.options.items() if k != self.refusal}


def parse_options(text: str) -> Question:
    """The question and its options when it carries at least two, lettered from A in order."""
    text = " ".join(text.split())
    found: list[tuple[str, int, int]] = []
    for m in _MARKER.finditer(text):
        letter = m.group(1) or m.group(2)
        if letter == "ABCDE"[len(found)] if len(found) < 5 else False:
            found.append((letter, m.start(), m.end()))
    if len(found) < 2:
        return Question(text)
    options = {}
    for i, (letter, _, end) in enumerate(found):
        stop = found[i + 1][1] if i + 1 < len(found) else len(text)
        options[letter] = text[end:stop].strip()
    if any(not v for v in options.values()):
        return Question(text)
    refusal = next((k for k, v in options.items() if _REFUSING.search(v)), None)
    return Question(text[: found[0][1]].strip(), options, refusal)


# -- deciding ------------------------------------------------------------------------------------


@dataclass
class OfflineDecision:
    reply: str
    used: list[str]  # fact ids the reply rests on
    stop: str  # option | extractive | refusal
    detail: dict[str, Any]  # what the trace shows of the decision


class OfflineReasoner:
    """Reads one bounded pool against a question; `names` are the character's own surface forms."""

    def __init__(self, rarity: Rarity | None, calibration: ReaderCalibration, names: Sequence[str]):
        self.rarity = rarity
        self.calibration = calibration
        self.names = list(names)

    def _index(self, pool: Sequence[Mapping[str, Any]], anchored: Sequence[AnchoredScene]) -> SupportIndex:
        passages = [fact_passage(row) for row in pool] + [scene.note for scene in anchored]
        return SupportIndex(passages, self.rarity or Rarity(passages), window=1)

    def read_options(self, question: Question, pool: Sequence[Mapping[str, Any]],
                     anchored: Sequence[AnchoredScene]) -> OptionReading:
        """The best-supported answer option and its support (no decision yet)."""
        answers = question.answers
        first = next(iter(answers))
        if not pool and not anchored:
            return OptionReading(None, first, 0.0)
        support = self._index(pool, anchored).support(question.text, answers, self.names)
        letter, score = best_option(support)
        return OptionReading(letter, letter, score, support[letter].passage)

    def read_question(self, question: str, pool: Sequence[Mapping[str, Any]]) -> tuple[int | None, float]:
        """The pool fact best supporting a free-form question, and its context share (no decision yet)."""
        if not pool:
            return None, 0.0
        shares = self._index(pool, []).context(question, self.names)
        if not shares:
            return None, 0.0
        best = max(shares, key=lambda i: (round(shares[i], 6), similarity_of(pool[i]) or 0.0))
        return best, shares[best]

    def decide(self, question: Question, pool: Sequence[Mapping[str, Any]],
               anchored: Sequence[AnchoredScene]) -> OfflineDecision:
        cal = self.calibration
        detail: dict[str, Any] = {"reader": READER_VERSION, "calibration": cal.to_dict()}
        if question.options and question.answers:
            reading = self.read_options(question, pool, anchored)
            chosen = reading.support > cal.option_floor
            fact = _fact_at(pool, reading.passage) if chosen else None
            detail.update(options=question.options, best=reading.best, support=round(reading.support, 4),
                          floor=cal.option_floor, letter=reading.best if chosen else question.refusal)
            if chosen:
                reply = f"({reading.best}) {question.options[reading.best]}. That much I know for myself."
                return OfflineDecision(reply, [str(fact["fact_id"])] if fact else [], "option", detail)
            if question.refusal:
                reply = f"({question.refusal}) {question.options[question.refusal]} {REFUSAL}"
            else:
                reply = REFUSAL
            return OfflineDecision(reply, [], "refusal", detail)
        where, share = self.read_question(question.text, pool)
        detail.update(support=round(share, 4), floor=cal.question_floor,
                      fact=None if where is None else str(pool[where]["fact_id"]))
        if where is None or share <= cal.question_floor:
            return OfflineDecision(REFUSAL, [], "refusal", detail)
        row = pool[where]
        return OfflineDecision(f"As I remember it: {quoted(str(row.get('evidence') or row.get('text') or ''))}",
                               [str(row["fact_id"])], "extractive", detail)


def _fact_at(pool: Sequence[Mapping[str, Any]], passage: int | None) -> Mapping[str, Any] | None:
    return pool[passage] if passage is not None and passage < len(pool) else None  # else a scene note


def quoted(text: str) -> str:
    """`text` clipped and in double quotes, once: a line of dialogue keeps its own quotation marks."""
    text = clip(" ".join(text.split()), QUOTE_WORDS)
    bare = text.strip("\"“”'‘’ ")
    if text[:1] in "\"“" and bare and not re.search(r"[\"“”]", bare):
        return f'"{bare}"'
    return text if text[:1] in "\"“" else f'"{text}"'
