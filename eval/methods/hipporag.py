"""`hipporag`: HippoRAG-style retrieval by personalised PageRank over an entity-passage graph.

Nodes are the book's entities (the names and aliases of the stored `entities`
of the built memory, merged with the book's focus characters) and the book's
~200-word chunks; an entity is linked to every chunk that names it (a
case-sensitive, word-bounded match of any of its surface forms). The query
entities are the graph's entities named in the question and its options A-D
(with a model, the names `dspy_programs.baselines.ExtractQueryEntities` lists,
linked to the graph the same way; the surface match when none link). Each seed
is weighted by its specificity (1 / the number of chunks naming it), as
HippoRAG weights its query nodes. Personalised PageRank (power iteration,
damping `DAMPING` = 0.5 as in HippoRAG; the mass of nodes without edges returns
to the seeds, so the vector always sums to 1) spreads that mass over the graph,
and a chunk scores the PPR mass of the entities it names. The top k chunks form
the context. A question naming no entity of the graph falls back to dense top-k.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from dspy_programs.baselines import query_entities_program
from eval.items import ANSWER_LETTERS, KBFItem, render_question
from eval.memory import load_book_memory
from eval.methods.base import Answer
from eval.methods.common import TOP_K, BaselineMethod, Chunk, book_chunks, book_rarity, chunk_vectors, dense_search
from reveriemem.core.text import FUNCTION_WORDS
from reveriemem.models import run_program

DAMPING = 0.5  # probability of following an edge at each step
PPR_ROUNDS = 100
PPR_TOLERANCE = 1e-10


@dataclass(frozen=True)
class Entity:
    name: str
    forms: tuple[str, ...]


def _key(form: str) -> str:
    return " ".join(form.split())


def book_entities(memory_entities: Sequence[dict], characters: Sequence) -> list[Entity]:
    """The memory's entities with the focus characters' names merged in (one entity per character)."""
    by_character = {c.slug: c for c in characters}
    out: list[Entity] = []
    seen: set[str] = set()
    for row in memory_entities:
        forms = {str(row["name"]), *(str(a) for a in row.get("aliases") or [])}
        character = by_character.get(str(row.get("character") or ""))
        if character is not None:
            forms |= {character.name, *character.aliases}
            seen.add(character.slug)
        out.append(Entity(str(row["name"]), _usable(forms)))
    for character in characters:
        if character.slug not in seen:
            out.append(Entity(character.name, _usable({character.name, *character.aliases})))
    return [e for e in out if e.forms]


def _usable(forms: set[str]) -> tuple[str, ...]:
    keep = {_key(f) for f in forms if len(f.strip()) > 1 and f.strip().casefold() not in FUNCTION_WORDS}
    return tuple(sorted(keep, key=lambda f: (-len(f), f)))


class SurfaceMatcher:
    """Finds which entities a text names: one word-bounded alternation over every surface form."""

    def __init__(self, entities: Sequence[Entity]):
        self.owners: dict[str, list[int]] = {}
        for i, entity in enumerate(entities):
            for form in entity.forms:
                self.owners.setdefault(form, []).append(i)
        forms = sorted(self.owners, key=lambda f: (-len(f), f))
        alternation = "|".join(r"\s+".join(re.escape(w) for w in f.split()) for f in forms)
        self.pattern = re.compile(r"(?<![^\W_])(?:" + alternation + r")(?![^\W_])") if forms else None

    def find(self, text: str) -> set[int]:
        if self.pattern is None:
            return set()
        return {i for m in self.pattern.finditer(text) for i in self.owners.get(_key(m.group(0)), ())}


def personalized_pagerank(incidence: np.ndarray, seeds: np.ndarray, damping: float = DAMPING,
                          rounds: int = PPR_ROUNDS) -> tuple[np.ndarray, np.ndarray]:
    """PPR over the bipartite graph of `incidence` (chunks x entities), restarting at `seeds` (over entities).

    Returns (entity mass, chunk mass); together they sum to 1.
    """
    seeds = seeds / seeds.sum()
    chunk_degree = incidence.sum(axis=1)
    entity_degree = incidence.sum(axis=0)
    safe_chunk = np.where(chunk_degree > 0, chunk_degree, 1.0)
    safe_entity = np.where(entity_degree > 0, entity_degree, 1.0)
    entities, chunks = seeds.copy(), np.zeros(incidence.shape[0])
    for _ in range(rounds):
        stranded = entities[entity_degree == 0].sum() + chunks[chunk_degree == 0].sum()
        to_entities = incidence.T @ (chunks / safe_chunk)
        to_chunks = incidence @ np.where(entity_degree > 0, entities / safe_entity, 0.0)
        new_entities = (1 - damping) * seeds + damping * (to_entities + stranded * seeds)
        new_chunks = damping * to_chunks
        change = np.abs(new_entities - entities).sum() + np.abs(new_chunks - chunks).sum()
        entities, chunks = new_entities, new_chunks
        if change < PPR_TOLERANCE:
            break
    return entities, chunks


class HippoRAGMethod(BaselineMethod):
    name = "hipporag"

    def _prepare(self) -> None:
        self.chunks: list[Chunk] = book_chunks(self.ctx.book)
        self._rarity = book_rarity(self.chunks)
        self.vectors = chunk_vectors(self.ctx, self.chunks)
        memory = load_book_memory(self.ctx.book.slug, self.ctx.uri)
        self.entities = book_entities(memory.entities, self.ctx.book.characters)
        self.matcher = SurfaceMatcher(self.entities)
        self.incidence = np.zeros((len(self.chunks), len(self.entities)))
        for chunk in self.chunks:
            for e in self.matcher.find(chunk.text):
                self.incidence[chunk.id, e] = 1.0

    def query_entities(self, item: KBFItem) -> set[int]:
        """Graph entities the question and its options A-D name (with a model: the ones it lists)."""
        surface = self.matcher.find(" ".join([item.question, *(item.options[k] for k in ANSWER_LETTERS)]))
        if self.offline:
            return surface
        names = run_program(self.ctx.handle, query_entities_program(), question=render_question(item)).entities
        folded = {form.casefold(): i for i, e in enumerate(self.entities) for form in e.forms}
        linked = {folded[_key(str(n)).casefold()] for n in names if _key(str(n)).casefold() in folded}
        for name in names:
            linked |= self.matcher.find(str(name))
        return linked or surface

    def seed_vector(self, seeds: set[int]) -> np.ndarray:
        weights = np.zeros(len(self.entities))
        degree = self.incidence.sum(axis=0)
        for e in seeds:
            weights[e] = 1.0 / max(degree[e], 1.0)
        return weights

    def retrieve(self, item: KBFItem) -> tuple[list[int], dict]:
        self.prepare()
        seeds = self.query_entities(item)
        names = sorted(self.entities[e].name for e in seeds)
        if not seeds:
            hits = dense_search(self.ctx, item, self.vectors)
            return [i for i, _ in hits], {"seeds": names, "fallback": "dense"}
        entity_mass, _ = personalized_pagerank(self.incidence, self.seed_vector(seeds))
        scores = self.incidence @ entity_mass
        order = [int(i) for i in np.argsort(-scores, kind="stable")[:TOP_K] if scores[i] > 0]
        return order, {"seeds": names}

    def _respond(self, item: KBFItem) -> Answer:
        rows, detail = self.retrieve(item)
        return self.reply_from(item, [self.chunks[i].text for i in rows], detail={"chunks": rows, **detail})
