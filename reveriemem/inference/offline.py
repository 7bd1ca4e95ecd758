"""The offline reply: what the agent says when no model is configured (`handle.lm is None`).

The reply is extractive: the evidence of the recalled fact most similar to the question (cosine),
framed in the first person, among the facts at least `min_score` similar that share a content
word with the question (`reveriemem.inference.turn_text.content_words`, a check that does not
depend on the embedder); with no such fact, an in-character refusal (`REFUSAL`). It reads only
the bounded pool the reasoning chain recalled, so it can say nothing the character does not know.
"""

from __future__ import annotations

from typing import Any

from reveriemem.inference.memory_reader import similarity_of
from reveriemem.inference.turn_text import clip, content_words

AGENT_VERSION = "agent-v1"
EXTRACTIVE_METHOD = f"heuristic:extractive-{AGENT_VERSION}"
MIN_SCORE = 0.3  # extractive path: the least cosine similarity of a fact worth quoting
REFUSAL = "I can't tell you that; it is nothing I saw or heard for myself."


def extract_reply(question: str, pool: list[dict[str, Any]], min_score: float) -> tuple[str, list[str], str]:
    """(reply, the fact ids it quotes, stop reason): the fact most similar to the question among
    those at least `min_score` similar (cosine) that share a content word with it; else a refusal."""
    asked = content_words(question)
    scored = [row for row in pool if (similarity_of(row) or 0.0) >= min_score
              and asked & content_words(f"{row.get('text') or ''} {row.get('evidence') or ''}")]
    if not scored:
        return REFUSAL, [], "refusal"
    best = max(scored, key=lambda row: similarity_of(row) or 0.0)
    quote = clip(str(best.get("evidence") or best.get("text") or ""), 60)
    return f'As I remember it: "{quote}"', [str(best["fact_id"])], "extractive"
