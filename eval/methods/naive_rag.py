"""`naive-rag`: dense top-k retrieval over the whole book, with no perspective bound.

The book's story text is cut into ~200-word chunks along paragraph breaks and
embedded with the run's embedder (cached in the work folder); the `TOP_K`
chunks nearest the question-with-options go into the context, whoever could
have witnessed them.
"""

from __future__ import annotations

import numpy as np

from eval.items import KBFItem
from eval.methods.base import Answer
from eval.methods.common import BaselineMethod, Chunk, book_chunks, book_rarity, chunk_vectors, dense_search


class NaiveRAGMethod(BaselineMethod):
    name = "naive-rag"

    def _prepare(self) -> None:
        self.chunks: list[Chunk] = book_chunks(self.ctx.book)
        self._rarity = book_rarity(self.chunks)
        self.vectors: np.ndarray = chunk_vectors(self.ctx, self.chunks)

    def retrieve(self, item: KBFItem) -> list[tuple[int, float]]:
        self.prepare()
        return dense_search(self.ctx, item, self.vectors)

    def _respond(self, item: KBFItem) -> Answer:
        hits = self.retrieve(item)
        return self.reply_from(item, [self.chunks[i].text for i, _ in hits], detail={"chunks": [i for i, _ in hits]})
