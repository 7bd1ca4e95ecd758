"""`raptor`: a RAPTOR-style summary tree with collapsed-tree retrieval.

Leaves are the book's ~200-word chunks. Level by level, the current nodes'
vectors are clustered with a deterministic spherical k-means (k = ceil(n /
`BRANCHING`), centroids seeded at evenly spaced nodes in story order, at most
`KMEANS_ROUNDS` rounds), and every cluster becomes a parent node whose text
summarises its children: with a model, `dspy_programs.baselines.SummariseForTree`;
offline (or when the model's output never parses for that cluster), an
extractive summary: the cluster's most central sentences (cosine of a
sentence's rarity-weighted terms with the whole cluster's), up to
`SUMMARY_WORDS` words, in story order. Building stops once a level has at most
`BRANCHING` nodes or after `MAX_LEVELS` summary levels. Retrieval searches all
nodes of every level at once (the collapsed tree) and keeps the top k.

The tree (texts, children) is cached as JSON in the work folder with its node
vectors, keyed by the embedder, the book's text and the summariser (model name
or extractive); a second run reuses both.
"""

from __future__ import annotations

import json
import logging
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from dspy_programs.baselines import summarise_program
from eval.items import KBFItem
from eval.methods.base import Answer
from eval.methods.common import (
    BaselineMethod,
    book_chunks,
    book_rarity,
    chunk_vectors,
    dense_search,
    embed_texts,
    load_vectors,
    save_vectors,
    text_key,
    vectors_path,
)
from reveriemem.core.text import Paragraph, sentences_of
from reveriemem.inference.offline_reader import Rarity, terms
from reveriemem.models import ModelHandle, run_or_fallback, run_program

logger = logging.getLogger(__name__)

BRANCHING = 8  # target children per node
MAX_LEVELS = 3  # summary levels above the leaves, at most
KMEANS_ROUNDS = 25
SUMMARY_WORDS = 120
EXTRACTIVE = "heuristic:raptor-extractive-v1"


@dataclass
class Node:
    id: int
    level: int  # 0: a chunk
    text: str
    children: list[int]
    method: str  # "chunk", EXTRACTIVE, "model:<name>" or "failed:<name>+extractive"


def kmeans(vectors: np.ndarray, k: int, rounds: int = KMEANS_ROUNDS) -> np.ndarray:
    """Deterministic spherical k-means: a cluster label per row (labels renumbered 0.. in order of first row)."""
    n = len(vectors)
    k = max(1, min(k, n))
    centroids = vectors[np.linspace(0, n - 1, k).round().astype(int)].copy()
    labels = np.full(n, -1)
    for _ in range(rounds):
        new = np.argmax(vectors @ centroids.T, axis=1)
        if np.array_equal(new, labels):
            break
        labels = new
        for c in range(k):
            members = vectors[labels == c]
            if len(members):
                mean = members.sum(axis=0)
                norm = np.linalg.norm(mean)
                centroids[c] = mean / norm if norm > 0 else mean
    order = {label: i for i, label in enumerate(dict.fromkeys(labels.tolist()))}
    return np.array([order[label] for label in labels.tolist()])


def model_summary(handle: ModelHandle, texts: Sequence[str]) -> str:
    """The model's summary of a cluster's texts, on one line."""
    prediction = run_program(handle, summarise_program(), passages="\n\n".join(texts))
    return " ".join(str(prediction.summary).split())


def extractive_summary(texts: Sequence[str], rarity: Rarity, words: int = SUMMARY_WORDS) -> str:
    """The most central sentences of `texts` (rarity-weighted term cosine with the whole), in order."""
    sentences = [s.text for t in texts for s in sentences_of(Paragraph(0, 0, len(t), t))]
    weighted = [{term: n * rarity.weight(term) for term, n in Counter(terms(s)).items()} for s in sentences]
    whole: Counter[str] = Counter()
    for vector in weighted:
        whole.update(vector)
    whole_norm = math.sqrt(sum(v * v for v in whole.values())) or 1.0

    def centrality(i: int) -> float:
        vector = weighted[i]
        norm = math.sqrt(sum(v * v for v in vector.values()))
        if not norm or len(sentences[i].split()) < 5:
            return 0.0
        return sum(v * whole[t] for t, v in vector.items()) / (norm * whole_norm)

    chosen: list[int] = []
    total = 0
    for i in sorted(range(len(sentences)), key=lambda i: (-centrality(i), i)):
        length = len(sentences[i].split())
        if chosen and total + length > words:
            continue
        chosen.append(i)
        total += length
        if total >= words * 0.9:
            break
    return " ".join(sentences[i] for i in sorted(chosen))


class RaptorMethod(BaselineMethod):
    name = "raptor"

    def _prepare(self) -> None:
        chunks = book_chunks(self.ctx.book)
        self._rarity = book_rarity(chunks)
        leaves = chunk_vectors(self.ctx, chunks)
        summariser = EXTRACTIVE if self.offline else f"model:{self.ctx.handle.name}"
        key = text_key(self.ctx, [(c.start, c.end) for c in chunks], "raptor", summariser)
        tree_path = self.ctx.work_dir / f"raptor-tree-{key}.json"
        vector_path = vectors_path(self.ctx, "raptor-nodes", key)
        if tree_path.is_file():
            self.nodes = [Node(**n) for n in json.loads(tree_path.read_text(encoding="utf-8"))]
            cached = load_vectors(vector_path, len(self.nodes))
            if cached is not None:
                self.vectors = cached
                return
        self.nodes = [Node(c.id, 0, c.text, [], "chunk") for c in chunks]
        self.vectors = self._grow(leaves)
        save_vectors(vector_path, self.vectors)
        self.ctx.work_dir.mkdir(parents=True, exist_ok=True)
        tree_path.write_text(json.dumps([asdict(n) for n in self.nodes]), encoding="utf-8")

    def _grow(self, leaves: np.ndarray) -> np.ndarray:
        layer = list(range(len(self.nodes)))
        layer_vectors = leaves
        all_vectors = [leaves]
        for level in range(1, MAX_LEVELS + 1):
            if len(layer) <= BRANCHING:
                break
            labels = kmeans(layer_vectors, math.ceil(len(layer) / BRANCHING))
            groups = [[layer[j] for j in np.flatnonzero(labels == c)] for c in range(int(labels.max()) + 1)]
            parents = []
            for members in groups:
                text, method = self._summarise([self.nodes[m].text for m in members])
                parents.append(Node(len(self.nodes), level, text, members, method))
                self.nodes.append(parents[-1])
            layer = [p.id for p in parents]
            layer_vectors = embed_texts(self.ctx, [p.text for p in parents])
            all_vectors.append(layer_vectors)
        return np.concatenate(all_vectors)

    def _summarise(self, texts: list[str]) -> tuple[str, str]:
        outcome = run_or_fallback(self.ctx.handle, lambda handle: model_summary(handle, texts),
                                  lambda: extractive_summary(texts, self.rarity), fallback_method=EXTRACTIVE,
                                  failed_method=f"failed:{self.ctx.handle.name}+extractive")
        if outcome.error is not None:
            logger.warning("RAPTOR summary fell back to the extractive one: %s", outcome.error)
        return outcome.value, outcome.method

    def retrieve(self, item: KBFItem) -> list[tuple[int, float]]:
        self.prepare()
        return dense_search(self.ctx, item, self.vectors)

    def _respond(self, item: KBFItem) -> Answer:
        hits = self.retrieve(item)
        detail = {"chunks": [i for i, _ in hits], "levels": [self.nodes[i].level for i, _ in hits]}
        return self.reply_from(item, [self.nodes[i].text for i, _ in hits], detail=detail)
