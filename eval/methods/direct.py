"""`direct`: character-profile prompting without retrieval.

The context is the character's profile from the book's character file (name,
aliases, descriptors, gender) and the book's title; nothing from the text.
Offline, the reader has only that profile to go on, so it refuses unless the
profile itself supports an option.
"""

from __future__ import annotations

from eval.items import KBFItem
from eval.methods.base import Answer
from eval.methods.common import BaselineMethod, profile


class DirectMethod(BaselineMethod):
    name = "direct"

    def _respond(self, item: KBFItem) -> Answer:
        return self.reply_from(item, [], head=profile(self.ctx.book, item.character), detail={"chunks": []})
