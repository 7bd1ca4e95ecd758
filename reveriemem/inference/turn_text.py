"""The words of a turn: how the agent reads what is said and writes memory into a prompt.

Reading: `content_words` (the offline reply's check that a fact shares a word with the
question), `mention_keys` (the words Emo-Gate looks for in the triggers of the emotion record)
and `probe_key` (when two probes are the same one). Writing: `clip`, `clean`, the numbered fact
lines Self-Probe and Memory-Fusion see (`numbered_facts`) and conversation lines
(`history_line`). Pure functions of their text.
"""

from __future__ import annotations

import re
from typing import Any

EVIDENCE_WORDS = 40  # a fact's quotation in a prompt


def numbered_facts(rows: Any) -> list[str]:
    out = []
    for i, row in enumerate(rows, 1):
        text = str(row.get("text") or "")
        evidence = clip(str(row.get("evidence") or ""), EVIDENCE_WORDS)
        quoted = f' ("{evidence}")' if evidence and evidence.strip().casefold() != text.strip().casefold() else ""
        out.append(f"[{i}] {text}{quoted}")
    return out


def history_line(item: str | tuple[str, str]) -> str:
    if isinstance(item, str):
        return " ".join(item.split())
    speaker, text = item
    return f"{speaker}: {' '.join(str(text).split())}"


def clean(value: Any) -> str:
    return " ".join(str(value or "").split()).strip(" \"'")


_FUNCTION_WORDS = frozenset({
    "what", "when", "where", "which", "while", "whom", "whose", "with", "without", "that", "this", "these",
    "those", "there", "their", "them", "they", "then", "than", "have", "has", "had", "been", "being", "were",
    "your", "yours", "about", "tell", "know", "knew", "from", "into", "onto", "upon", "over", "under", "after",
    "before", "does", "did", "done", "doing", "could", "would", "should", "shall", "will", "just", "only",
    "also", "very", "much", "many", "some", "such", "every", "list", "rules", "ignore", "remember", "recall"
})


def content_words(text: str) -> set[str]:
    """Words of four letters or more that carry meaning (an embedder-independent check of the extractive path)."""
    return {w for w in re.findall(r"[a-z0-9']+", text.casefold()) if len(w) >= 4 and w not in _FUNCTION_WORDS}


_COMMON_WORDS = frozenset({
    "said", "says", "like", "come", "came", "went", "here", "well", "good", "back", "still", "again", "away",
    "even", "ever", "once", "more", "most", "other", "something", "anything", "nothing", "someone", "anyone",
    "thing", "things", "time", "night", "morning", "evening", "today", "yesterday", "last", "first", "make", "made",
    "take", "took", "give", "gave", "want", "think", "thought", "look", "looked", "told", "asked", "yours",
    "left", "kept", "keep", "going", "know", "heard", "seen",
})


def mention_keys(text: str) -> set[str]:
    """The words a turn or a trigger names things by: four letters or more, possessives and plurals
    folded ("guild's" -> guild, "lamps" -> lamp), function and everyday words left out."""
    keys = set()
    for word in re.findall(r"[a-z0-9'’]+", text.casefold()):
        word = word.replace("’", "'").strip("'").removesuffix("'s")
        if len(word) >= 5 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
            word = word[:-1]
        if len(word) >= 4 and word not in _FUNCTION_WORDS and word not in _COMMON_WORDS:
            keys.add(word)
    return keys


def probe_key(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.casefold()))


def clip(text: str, words: int) -> str:
    parts = text.split()
    return " ".join(parts) if len(parts) <= words else " ".join(parts[:words]) + " ..."
