"""`bookworld`: a BookWorld-style character agent: the profile plus the character's own scenes.

The context is the character's profile (as for `direct`) and the `TOP_K`
chunks nearest the question drawn only from the scenes the character is
present in (roster status `present_active` or `present_silent` in the built
memory's `character_scenes`; scenes where they are only referenced are left
out), each passage headed by its scene's setting. Chunks are cut inside each
scene's span (`start`/`end` of the stored `scenes`), so none crosses into a
scene the character is absent from; their vectors are cached once for the
book. The whole scene counts, not the stretch the character is there for, and
the visibility-bounded facts of the memory are not used.
"""

from __future__ import annotations

from typing import Any

from eval.items import KBFItem
from eval.methods.base import Answer, MethodContext
from eval.methods.common import BaselineMethod, Chunk, chunk_spans, chunk_vectors, dense_search, profile
from reveriemem.core.storage import MemoryStore, PartitionRef
from reveriemem.core.text import normalise_space

PRESENT = ("present_active", "present_silent")


class BookWorldMethod(BaselineMethod):
    name = "bookworld"

    def __init__(self, ctx: MethodContext):
        super().__init__(ctx)
        self._present: dict[str, list[int]] = {}

    def _prepare(self) -> None:
        book = self.ctx.book
        scenes = MemoryStore.for_home(lancedb=self.ctx.uri).read("scenes", PartitionRef(book.slug))
        self.chunks: list[Chunk] = []
        self.headers: list[str] = []  # per chunk: its scene and setting
        for row in scenes.sort("scene_id").iter_rows(named=True):
            scene = int(row["scene_id"])
            setting = "; ".join(str(row[k]).strip() for k in ("location", "time") if str(row[k] or "").strip())
            header = f"Scene {scene}" + (f" ({setting})" if setting else "")
            for a, b in chunk_spans(book.text, int(row["start"]), int(row["end"])):
                self.chunks.append(Chunk(len(self.chunks), a, b, normalise_space(book.text[a:b]), scene))
                self.headers.append(header)
        self.vectors = chunk_vectors(self.ctx, self.chunks, tag="scene-chunks")

    def present_scenes(self, name: str) -> list[int]:
        """The scenes the character is present in, from the stored `character_scenes`."""
        slug = self.ctx.book.character(name).slug
        if slug not in self._present:
            rows = MemoryStore.for_home().read("character_scenes", PartitionRef(self.ctx.book.slug, slug))
            self._present[slug] = sorted(int(r["scene_id"]) for r in rows.iter_rows(named=True)
                                         if r["status"] in PRESENT)
        return self._present[slug]

    def retrieve(self, item: KBFItem) -> list[tuple[int, float]]:
        self.prepare()
        scenes = set(self.present_scenes(item.character))
        among = [c.id for c in self.chunks if c.scene_id in scenes]
        return dense_search(self.ctx, item, self.vectors, among=among)

    def _respond(self, item: KBFItem) -> Answer:
        hits = self.retrieve(item)
        passages = [f"{self.headers[i]}: {self.chunks[i].text}" for i, _ in hits]
        detail: dict[str, Any] = {"chunks": [i for i, _ in hits],
                                  "scenes": sorted({self.chunks[i].scene_id for i, _ in hits})}
        return self.reply_from(item, passages, head=profile(self.ctx.book, item.character), detail=detail)
