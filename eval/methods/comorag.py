"""`comorag`: a ComoRAG-style probe / retrieve / consolidate loop that refuses when it cannot settle.

For at most `ROUNDS` rounds:

1. probe: with a model, `ProbeForEvidence` writes the next query from the
   question and the memory workspace; offline, the probe is the question plus
   the words of the options A-D whose terms the workspace does not yet contain;
2. retrieve: dense top-k over the whole book's chunks (chunks already in the
   workspace are skipped);
3. consolidate: with a model, `ConsolidateMemory` folds the new passages into
   the workspace notes and says whether they settle the question
   (`can_answer`); offline, the passages are kept as they are and the workspace
   can answer when the reader's best support in it reaches `CAN_ANSWER`.

It answers from the workspace as soon as it can; after the last round without
that, it refuses (E), and the refusal is its own choice, not a model's reply.
"""

from __future__ import annotations

from typing import Any

from dspy_programs.baselines import consolidate_program, probe_program
from eval.items import ANSWER_LETTERS, REFUSAL_LETTER, KBFItem, render_question
from eval.methods.base import Answer
from eval.methods.common import (
    BaselineMethod,
    Chunk,
    answer_options,
    book_chunks,
    book_rarity,
    chunk_vectors,
    context_text,
    embed_queries,
    offline_answer,
    top_k,
)
from reveriemem.core.text import FUNCTION_WORDS, tokens
from reveriemem.inference.offline_reader import OptionReading, read_options, stem, term_set
from reveriemem.models import run_program

ROUNDS = 3
# Offline: the reader's best support (in [0, 1]) at which the workspace is judged enough to answer.
# Stricter than the other readers' floor: ComoRAG only answers once its memory settles the question.
CAN_ANSWER = 0.5


def offline_probe(item: KBFItem, workspace: list[str]) -> str:
    """The question plus the option words whose terms the workspace does not contain yet."""
    covered = term_set(" ".join(workspace))
    words = [w for letter in ANSWER_LETTERS for w in tokens(item.options[letter])
             if w not in FUNCTION_WORDS and len(w) > 1 and stem(w) not in covered]
    return " ".join([item.question, *dict.fromkeys(words)])


class ComoRAGMethod(BaselineMethod):
    name = "comorag"

    def _prepare(self) -> None:
        self.chunks: list[Chunk] = book_chunks(self.ctx.book)
        self._rarity = book_rarity(self.chunks)
        self.vectors = chunk_vectors(self.ctx, self.chunks)

    def _respond(self, item: KBFItem) -> Answer:
        names = self.ctx.book.character(item.character).surface_forms
        question = render_question(item)
        seen: list[int] = []
        workspace: list[str] = []  # offline: the passages kept
        notes = ""  # with a model: the consolidated notes
        rounds: list[dict[str, Any]] = []
        can_answer = False
        reading: OptionReading | None = None
        for _ in range(ROUNDS):
            if self.offline:
                probe = offline_probe(item, workspace)
            else:
                probe = str(run_program(self.ctx.handle, probe_program(), question=question, memory=notes).probe)
            hits = [i for i, _ in top_k(embed_queries(self.ctx, [probe]), self.vectors, exclude=set(seen))]
            seen += hits
            found = [self.chunks[i].text for i in hits]
            if self.offline:
                workspace += found
                reading = read_options(item.question, answer_options(item), workspace, self.rarity, names, CAN_ANSWER)
                can_answer = reading.choice is not None
            else:
                consolidated = run_program(self.ctx.handle, consolidate_program(), question=question, memory=notes,
                                           passages=context_text(found))
                notes = str(consolidated.updated_memory)
                can_answer = bool(consolidated.can_answer)
            rounds.append({"probe": probe, "chunks": hits, "can_answer": can_answer})
            if can_answer:
                break
        detail: dict[str, Any] = {"chunks": seen, "rounds": rounds}
        if reading is not None:
            detail.update(support=round(reading.support, 4), best=reading.best)
        if not can_answer:
            return offline_answer(item, REFUSAL_LETTER, detail)
        if reading is not None and reading.choice is not None:
            return offline_answer(item, reading.choice, detail)
        return self.reply_from(item, [], head=notes, detail=detail)
