"""The Semantic layer, step one: per-scene extraction of scene graphs.

`extract_scene_graphs` runs the extraction program per scene, per passage of
at most `PASSAGE_WORDS` words, and keeps the model's entities, relations and
reported accounts (with no model, nothing: the offline path makes evidence
units in `reveriemem.source_to_memory.facts` instead). Quotations are located
in the source (`locate`), so every relation and account keeps its offsets.

The later steps: `reveriemem.source_to_memory.entities` unifies names into
canonical entities; `reveriemem.source_to_memory.facts` deduplicates relations
into SPOCV facts and assigns their visibility.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from reveriemem.core.errors import ModelOutputError
from reveriemem.core.registry import Book
from reveriemem.core.text import sentence_runs, split_paragraphs
from reveriemem.models import ModelHandle, map_calls, run_program

PASSAGE_WORDS = 2500
EXTRACTION_VERSION = "kg-v1"
QUOTES = str.maketrans({"“": '"', "”": '"', "‘": "'", "’": "'", "—": "-", "–": "-"})


# ---------------------------------------------------------------- extraction


@dataclass
class Passage:
    scene_id: int
    index: int
    start: int
    end: int


@dataclass
class SceneGraph:
    """What one passage yielded: raw entities, relations and accounts, located in the source."""

    scene_id: int
    passage: int
    start: int
    end: int
    method: str
    error: str | None = None
    entities: list[dict[str, Any]] = field(default_factory=list)
    relations: list[dict[str, Any]] = field(default_factory=list)  # with evidence_start/evidence_end
    accounts: list[dict[str, Any]] = field(default_factory=list)  # with source_start/source_end/offset

    @property
    def failed(self) -> bool:
        return self.error is not None

    def payload(self) -> str:
        return json.dumps({"entities": self.entities, "relations": self.relations, "accounts": self.accounts},
                          ensure_ascii=False)


def scene_passages(text: str, scene_id: int, start: int, end: int, limit: int = PASSAGE_WORDS) -> list[Passage]:
    """Split a scene into passages of whole paragraphs, at most `limit` words where paragraphs allow."""
    pieces = [piece for p in split_paragraphs(text, start, end) for piece in _split_long(text, p.start, p.end, limit)]
    if not pieces:
        pieces = [(start, end)]
    passages: list[Passage] = []
    first, last, words = pieces[0][0], pieces[0][0], 0
    for a, b in pieces:
        n = len(text[a:b].split())
        if words and words + n > limit:
            passages.append(Passage(scene_id, len(passages), first, last))
            first, words = a, 0
        last = b
        words += n
    passages.append(Passage(scene_id, len(passages), first, last))
    return passages


def _split_long(text: str, start: int, end: int, limit: int) -> list[tuple[int, int]]:
    """A paragraph longer than `limit` words, cut after sentence ends (or anywhere past twice the limit)."""
    if len(text[start:end].split()) <= limit:
        return [(start, end)]
    pieces: list[tuple[int, int]] = []
    cursor, count = start, 0
    for match in re.finditer(r"\S+", text[start:end]):
        count += 1
        if count >= limit and (re.search(r"[.!?][\"'”’)]*$", match.group()) or count >= 2 * limit):
            pieces.append((cursor, start + match.end()))
            cursor, count = start + match.end(), 0
    if text[cursor:end].strip():
        pieces.append((cursor, end))
    return pieces


def character_labels(book: Book) -> list[str]:
    return [f"{c.name} ({', '.join(c.aliases)})" if c.aliases else c.name for c in book.characters]


def extract_scene_graphs(
    book: Book,
    scenes: Sequence[tuple[int, int, int]],
    handle: ModelHandle,
    on_scene_done: Any = None,
) -> list[SceneGraph]:
    """Run the extraction program over every passage of every (scene_id, start, end)."""
    from dspy_programs.knowledge import scene_graph_program

    program = scene_graph_program()
    labels = character_labels(book)
    graphs: list[SceneGraph] = []
    passages = [scene_passages(book.text, scene_id, start, end) for scene_id, start, end in scenes]

    def ask(passage: Passage) -> Any:
        return run_program(handle, program, passage=book.text[passage.start:passage.end], focus_characters=labels)

    answers = iter(map_calls(handle, ask, [p for scene in passages for p in scene]))
    for (scene_id, _start, _end), scene in zip(scenes, passages):
        for passage in scene:
            method = f"model:{handle.name}"
            try:
                prediction = next(answers).result()
            except ModelOutputError as exc:
                graphs.append(SceneGraph(scene_id, passage.index, passage.start, passage.end,
                                         method=f"failed:{handle.name}", error=str(exc)))
                continue
            graphs.append(locate_graph(book.text, passage, prediction, method))
        if on_scene_done is not None:
            on_scene_done(scene_id)
    return graphs


def locate_graph(text: str, passage: Passage, prediction: Any, method: str) -> SceneGraph:
    """Turn a prediction into a SceneGraph with source offsets; relations whose quote is not found keep the passage."""
    graph = SceneGraph(passage.scene_id, passage.index, passage.start, passage.end, method=method)
    for entity in prediction.entities or []:
        graph.entities.append(_dump(entity))
    for relation in prediction.relations or []:
        record = _dump(relation)
        span = locate(text, str(record.get("evidence", "")), passage.start, passage.end)
        record["located"] = span is not None
        record["evidence_start"], record["evidence_end"] = span or (passage.start, passage.end)
        graph.relations.append(record)
    for account in prediction.accounts or []:
        record = _dump(account)
        here = locate(text, str(record.get("evidence", "")), passage.start, passage.end)
        source = locate(text, str(record.get("source_opening", "")), 0, passage.end)
        if here is None or source is None or source[0] >= here[0]:
            continue  # an account must point back to an earlier passage we can find
        closing = locate(text, str(record.get("source_closing", "")), source[1], here[0]) if record.get(
            "source_closing") else None
        record["offset"] = here[0]
        record["source_start"] = source[0]
        record["source_end"] = closing[1] if closing else _scene_end_guess(text, source[0], here[0])
        graph.accounts.append(record)
    return graph


def _scene_end_guess(text: str, start: int, limit: int) -> int:
    """Without a closing quotation an account runs to the next scene break or heading before `limit`."""
    match = re.search(r"\n\s*(?:\*\s*){3,}\s*\n|\n\s*(?:CHAPTER|Chapter|BOOK|PART)\b", text[start:limit])
    return start + match.start() if match else limit


def _dump(value: Any) -> dict[str, Any]:
    if hasattr(value, "model_dump"):
        return dict(value.model_dump())
    return dict(value)


def _normal_with_map(text: str) -> tuple[str, list[int]]:
    """Lower-cased text with quotes unified and whitespace collapsed, and each character's source index."""
    out: list[str] = []
    where: list[int] = []
    previous_space = False
    for i, ch in enumerate(text.translate(QUOTES)):
        if ch.isspace():
            if previous_space:
                continue
            previous_space = True
            out.append(" ")
        else:
            previous_space = False
            out.append(ch.lower())
        where.append(i)
    return "".join(out), where


def locate(text: str, quote: str, lo: int, hi: int) -> tuple[int, int] | None:
    """Source offsets of `quote` within text[lo:hi]: exact, then normalised, then the closest sentence."""
    quote = quote.strip().strip("\"'“”‘’").strip()
    if len(quote) < 3:
        return None
    found = text.find(quote, lo, hi)
    if found >= 0:
        return found, found + len(quote)
    window, where = _normal_with_map(text[lo:hi])
    needle, _ = _normal_with_map(quote)
    needle = needle.strip()
    found = window.find(needle)
    if found >= 0:
        return lo + where[found], lo + where[found + len(needle) - 1] + 1
    best, best_ratio = None, 0.0
    for match in sentence_runs(text, lo, hi):
        sentence = match.group().strip()
        if not sentence:
            continue
        ratio = difflib.SequenceMatcher(None, needle, _normal_with_map(sentence)[0]).ratio()
        if ratio > best_ratio:
            best, best_ratio = match, ratio
    if best is not None and best_ratio >= 0.6:
        begin = best.start() + len(best.group()) - len(best.group().lstrip())
        return begin, best.end()
    return None



def graphs_from_rows(rows: Iterable[dict[str, Any]]) -> list[SceneGraph]:
    """SceneGraphs back from stored `scene_graphs` rows."""
    graphs = []
    for row in rows:
        payload = json.loads(row["payload"] or "{}")
        graphs.append(SceneGraph(int(row["scene_id"]), int(row["passage"]), int(row["start"]), int(row["end"]),
                                 method=row["method"], error=row["error"], entities=payload.get("entities", []),
                                 relations=payload.get("relations", []), accounts=payload.get("accounts", [])))
    return sorted(graphs, key=lambda g: (g.scene_id, g.passage))


def graph_rows(book: Book, graphs: Sequence[SceneGraph]) -> list[dict[str, Any]]:
    return [{"book": book.slug, "scene_id": g.scene_id, "passage": g.passage, "start": g.start, "end": g.end,
             "method": g.method, "error": g.error, "entities": len(g.entities), "relations": len(g.relations),
             "accounts": len(g.accounts), "payload": g.payload()} for g in graphs]
