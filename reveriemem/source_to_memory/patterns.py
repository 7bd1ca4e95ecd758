"""The personality layer: each character's behavioural patterns (paper:
"Personality clustering", second half).

The behaviour units and their clustering live in
`reveriemem.source_to_memory.clustering`; this module turns each group of
units into a pattern. Each pattern keeps up to three canonical excerpts:
verbatim slices of the book's text from the character's own quoted speech (a
quote, or a few of its sentences up to `MAX_EXCERPT_WORDS` words), those
nearest the pattern centre, one per unit first; its scenes and utterance
offsets; and a one-line description, written by the model (`DescribePattern`)
or, offline or when the output never parses, by a template from the dominant
emotion, intensity, acts, addressee and characteristic words
(`heuristic:pattern-v1`). The description is embedded for retrieval. No
utterances, no patterns.

Own lines only. The dialogue attribution gives a paragraph's quoted speech
to one speaker, but a paragraph may hold two speakers' lines ("Sit down,"
said Mara. "I would rather stand," said Tobin.). `own_quote_spans` reads
each quote's own speech tag (or the action beat before it), groups the
quotes into turns, and keeps only the character's turn: the turn naming the
character, else the first tagged turn (the tag the attribution followed); a
turn naming another focus character, or a pronoun of the other gender after
the character's name, is someone else's and is withheld. Excerpts, the
characteristic words and the lines a model is shown come from those quotes
only, never from another speaker's quote or the narration around them.
"""

from __future__ import annotations

import logging
import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dspy_programs.personality import EMOTIONS, describe_pattern_program
from reveriemem.core.embeddings import Embedder
from reveriemem.core.errors import ModelOutputError
from reveriemem.core.text import SPEECH_STOPWORDS, Paragraph, normalise_space, sentence_spans
from reveriemem.models import ModelHandle, map_calls, run_program
from reveriemem.source_to_memory.clustering import (
    Unit,
    behaviour_units,
    centroid,
    cluster_units,
    combine,
    profile,
    unit_norm,
)
from reveriemem.source_to_memory.emotions import ACTS
from reveriemem.source_to_memory.own_lines import WORD, own_quote_spans

log = logging.getLogger(__name__)

PATTERN_VERSION = "pattern-v1"
HEURISTIC_METHOD = f"heuristic:{PATTERN_VERSION}"
MAX_EXCERPT_WORDS = 40
MIN_EXCERPT_WORDS = 3  # shorter lines are excerpts only when nothing longer is near the centre
EXCERPTS = 3
PROMPT_LINES = 4
PROMPT_LINE_WORDS = 25


_EMOTION_WORD = {
    "joy": "cheerful", "trust": "assured", "fear": "anxious", "surprise": "astonished", "sadness": "sorrowful",
    "disgust": "scornful", "anger": "angry", "anticipation": "eager", "neutral": "matter-of-fact",
}
_ACT_WORDS = {
    "refusal": "refusals", "request": "requests", "command": "orders", "question": "questions",
    "greeting": "greetings", "farewell": "leave-takings", "thanks": "thanks", "apology": "apologies",
    "agreement": "assent", "exclamation": "exclamations", "assertion": "statements",
}


@dataclass
class Excerpt:
    """A verbatim slice of the book: `text == book_text[start:end]`."""

    text: str
    start: int
    end: int
    record: int  # index of its utterance in the character's records


@dataclass
class Pattern:
    units: list[int]
    origin: str  # cluster | noise | threshold
    clustering: str
    attached_noise: int = 0
    excerpts: list[Excerpt] = field(default_factory=list)
    description: str = ""
    method: str = HEURISTIC_METHOD
    error: str | None = None



def excerpts_of(text: str, paragraph: Paragraph, start: int, end: int, record: int, name: str | None = None,
                gender: str | None = None, names: dict[str, str] | None = None) -> list[Excerpt]:
    """The verbatim pieces of one utterance's quoted speech that the character speaks (`own_quote_spans`),
    each at most `MAX_EXCERPT_WORDS` words.

    A quote is stripped of its marks, surrounding space and a trailing comma
    or dash (the place of a speech tag); a long quote is cut into runs of
    whole sentences (a single overlong sentence is cut at a word).
    """
    out: list[Excerpt] = []
    for a, b in own_quote_spans(text, paragraph, start, end, name, gender, names):
        while a < b and text[a] in "\"“‘' \t\r\n":
            a += 1
        while b > a and text[b - 1] in "\"”’' \t\r\n,;:—–-":
            b -= 1
        if b <= a or not re.search(r"[A-Za-z]", text[a:b]):
            continue
        out.extend(_chunks(text, a, b, record))
    return out


def _chunks(text: str, a: int, b: int, record: int) -> list[Excerpt]:
    sentences = sentence_spans(text, a, b)
    out: list[Excerpt] = []
    current: tuple[int, int] | None = None
    for s, e in sentences:
        words = len(text[s:e].split())
        if words > MAX_EXCERPT_WORDS:
            if current:
                out.append(Excerpt(text[current[0]:current[1]], current[0], current[1], record))
                current = None
            cut = _clause_cut(text, s, e)
            out.append(Excerpt(text[s:cut], s, cut, record))
            continue
        if current and len(text[current[0]:e].split()) <= MAX_EXCERPT_WORDS:
            current = (current[0], e)
        else:
            if current:
                out.append(Excerpt(text[current[0]:current[1]], current[0], current[1], record))
            current = (s, e)
    if current:
        out.append(Excerpt(text[current[0]:current[1]], current[0], current[1], record))
    return out


def _clause_cut(text: str, s: int, e: int) -> int:
    """Where to cut an overlong sentence: before the last clause break within `MAX_EXCERPT_WORDS`
    words (if it leaves at least 10), else after the last of those words."""
    cut, clause = s, None
    for count, match in enumerate(re.finditer(r"\S+", text[s:e]), start=1):
        cut = s + match.end()
        if count >= 10 and text[cut - 1] in ",;:":
            clause = cut - 1
        if count == MAX_EXCERPT_WORDS:
            break
    return clause if clause is not None else cut


# -- descriptions -----------------------------------------------------------------


def _dominant(counts: Counter[str], order: Sequence[str]) -> str:
    if not counts:
        return order[-1]
    best = max(counts.values())
    return next(x for x in order if counts.get(x) == best)


def characteristic_words(pattern_texts: Sequence[str], unit_texts: Sequence[str], limit: int = 3,
                         exclude: frozenset[str] = frozenset()) -> list[str]:
    """Words frequent in the pattern and rare in the character's other units (tf x idf); no
    stopwords, contractions or `exclude`d words (the characters' names)."""
    documents = [set(w.lower().replace("’", "'") for w in WORD.findall(t)) for t in unit_texts]
    counts = Counter(w.lower().replace("’", "'") for t in pattern_texts for w in WORD.findall(t))
    scored = []
    for word, count in counts.items():
        if word in SPEECH_STOPWORDS or word in exclude or "'" in word or len(word) < 4 \
                or (count < 2 and len(pattern_texts) > 1):
            continue
        df = sum(1 for d in documents if word in d)
        scored.append((count * math.log((len(documents) + 1) / (df + 0.5)), word))
    return [w for _, w in sorted(scored, key=lambda x: (-x[0], x[1]))[:limit]]


def template_description(records: Sequence[dict[str, Any]], names: dict[str, str], words: Sequence[str]) -> str:
    """An offline one-liner: intensity, dominant emotion, main acts, usual addressee, characteristic words."""
    emotions: Counter[str] = Counter()
    for record in records:
        emotions[record["emotion"]] += record["intensity"]
    emotion = _dominant(emotions, EMOTIONS)
    acts = Counter(record["act"] for record in records)
    ranked = [a for a in ACTS if acts.get(a)]
    ranked.sort(key=lambda a: -acts[a])
    main = [ranked[0]] + [a for a in ranked[1:2] if acts[a] >= 0.3 * len(records)]
    intensity = float(np.mean([r["intensity"] for r in records]))
    tone = "calm" if intensity < 1.5 else "measured" if intensity < 2.5 else "heated" if intensity < 3.5 else "vehement"
    addressed = Counter(a for record in records for a in (record.get("addressees") or []))
    target = ""
    if addressed:
        who, count = addressed.most_common(1)[0]
        if count >= max(1, 0.4 * len(records)):
            target = f" to {names.get(who, who)}"
    about = f", often about {', '.join(words)}" if words else ""
    return f"{tone.capitalize()}, {_EMOTION_WORD.get(emotion, emotion)} {' and '.join(_ACT_WORDS[a] for a in main)}{target}{about}."


def prompt_line(text: str, record: dict[str, Any]) -> str:
    """A line for the description prompt: the words (the opening of a long one) and their tags."""
    words = normalise_space(text).split()
    shown = " ".join(words[:PROMPT_LINE_WORDS]) + (" ..." if len(words) > PROMPT_LINE_WORDS else "")
    return f"\"{shown}\" ({record['emotion']} {record['intensity']}, {record['act']})"


# -- the layer -------------------------------------------------------------------


@dataclass
class CharacterPatterns:
    patterns: list[Pattern]
    units: list[Unit]
    clustering: str
    failures: list[str]
    records: list[dict[str, Any]]
    vectors: np.ndarray  # description embeddings, one row per pattern


def build_patterns(
    text: str,
    paragraphs: Sequence[Paragraph],
    records: Sequence[dict[str, Any]],
    name: str,
    names: dict[str, str],
    embedder: Embedder,
    handle: ModelHandle,
    on_pattern: Callable[[int], None] | None = None,
    on_start: Callable[[int], None] | None = None,
    gender: str | None = None,
) -> CharacterPatterns:
    """One character's patterns from their dialogue records (any order; sorted here by offset).

    Excerpts, characteristic words and the lines shown to a model come only from the quotes the
    character speaks (`own_quote_spans`; `gender` helps tell a he/she tag from theirs)."""
    ordered = sorted(records, key=lambda r: r["start"])
    units = behaviour_units(ordered)
    by_index = {p.index: p for p in paragraphs}
    excerpts: list[Excerpt] = []
    own_texts: list[str] = []
    for index, record in enumerate(ordered):
        paragraph = by_index.get(int(record["paragraph"]))
        if paragraph is None:
            own_texts.append(str(record["text"]))
            continue
        start, end = int(record["start"]), int(record["end"])
        own = own_quote_spans(text, paragraph, start, end, name, gender, names)
        own_texts.append(" ".join(text[a:b].strip('"“” \r\n') for a, b in own))
        excerpts.extend(excerpts_of(text, paragraph, start, end, index, name, gender, names))
    if not units:
        if on_start is not None:
            on_start(0)
        return CharacterPatterns([], [], "none", [], ordered, np.zeros((0, embedder.dim), dtype=np.float32))
    line_vectors = embedder.embed([normalise_space(e.text) for e in excerpts]) if excerpts else np.zeros((0, 1))
    record_profiles = np.stack([profile([r]) for r in ordered])
    of_record: dict[int, list[int]] = {}
    for i, excerpt in enumerate(excerpts):
        of_record.setdefault(excerpt.record, []).append(i)
    dim = line_vectors.shape[1] if len(excerpts) else embedder.dim
    unit_text = np.zeros((len(units), dim), dtype=np.float32)
    for u, unit in enumerate(units):
        rows = [i for r in unit.records for i in of_record.get(r, [])]
        if rows:
            unit_text[u] = unit_norm(line_vectors[rows].mean(axis=0))
    unit_vectors = combine(unit_text, np.stack([profile([ordered[r] for r in unit.records]) for unit in units]))
    clustering = cluster_units(unit_vectors)
    line_features = (combine(line_vectors, record_profiles[[e.record for e in excerpts]])
                     if excerpts else np.zeros((0, unit_vectors.shape[1]), dtype=np.float32))
    unit_of_record = {r: u for u, unit in enumerate(units) for r in unit.records}
    unit_texts = [" ".join(own_texts[r] for r in unit.records) for unit in units]
    name_words = frozenset(w.lower() for n in (name, *names.values()) for w in WORD.findall(n))

    patterns: list[Pattern] = []
    for group, origin, attached in zip(clustering.groups, clustering.origins, clustering.attached):
        pattern = Pattern(units=group, origin=origin, clustering=clustering.label, attached_noise=attached)
        centre = centroid(unit_vectors[group])
        in_group = {r for u in group for r in units[u].records}
        candidates = [i for i, e in enumerate(excerpts) if e.record in in_group]
        pattern.excerpts = _pick_excerpts(excerpts, candidates, line_features, centre, unit_of_record)
        patterns.append(pattern)
    patterns.sort(key=lambda p: min(ordered[r]["start"] for u in p.units for r in units[u].records))

    if on_start is not None:
        on_start(len(patterns))
    program = describe_pattern_program() if handle.lm is not None else None
    failures: list[str] = []
    fallbacks: list[str] = []
    prompts: dict[int, list[str]] = {}  # pattern number -> the lines shown to the model
    for number, pattern in enumerate(patterns, start=1):
        members = [ordered[r] for u in pattern.units for r in units[u].records]
        words = characteristic_words([own_texts[r] for u in pattern.units for r in units[u].records], unit_texts,
                                     exclude=name_words)
        fallbacks.append(template_description(members, names, words))
        own_members = [r for u in pattern.units for r in units[u].records if own_texts[r]]
        if program is not None and own_members:  # else no line of their own to show a model
            centre = centroid(unit_vectors[pattern.units])
            member_set = {r for u in pattern.units for r in units[u].records}
            nearest = sorted((i for i, e in enumerate(excerpts) if e.record in member_set),
                             key=lambda i: -float(line_features[i] @ centre))[:PROMPT_LINES]
            prompts[number] = [prompt_line(excerpts[i].text, ordered[excerpts[i].record]) for i in nearest] or [
                prompt_line(own_texts[r], ordered[r]) for r in own_members[:PROMPT_LINES]]

    def describe(lines: list[str]) -> str:
        prediction = run_program(handle, program, character=name, lines=lines)
        description = normalise_space(str(prediction.description or ""))
        if not description:
            raise ModelOutputError(f"The model {handle.name} wrote an empty description.")
        return description

    answers = dict(zip(prompts, map_calls(handle, describe, list(prompts.values()))))
    for number, pattern in enumerate(patterns, start=1):
        fallback = fallbacks[number - 1]
        if number not in answers:
            pattern.description = fallback
        else:
            try:
                pattern.description, pattern.method = answers[number].result(), f"model:{handle.name}"
            except ModelOutputError as exc:
                failures.append(f"pattern {number}: {exc}")
                log.warning("Pattern %d of %s: fell back to the template description: %s", number, name, exc)
                pattern.description, pattern.error = fallback, f"model output never parsed, template used: {exc}"
        if on_pattern is not None:
            on_pattern(number)
    vectors = embedder.embed([p.description for p in patterns])
    return CharacterPatterns(patterns, units, clustering.label, failures, ordered, vectors)


def _pick_excerpts(excerpts: Sequence[Excerpt], candidates: Sequence[int], features: np.ndarray,
                   centre: np.ndarray, unit_of_record: dict[int, int]) -> list[Excerpt]:
    """Up to `EXCERPTS` lines nearest the centre: one per unit first, longer lines before very short ones."""
    ranked = sorted(candidates, key=lambda i: (len(excerpts[i].text.split()) < MIN_EXCERPT_WORDS,
                                               -float(features[i] @ centre), excerpts[i].start))
    chosen: list[int] = []
    seen_units: set[int] = set()
    seen_texts: set[str] = set()
    for relaxed in (False, True):
        for i in ranked:
            if len(chosen) == EXCERPTS:
                break
            key = normalise_space(excerpts[i].text).lower()
            unit = unit_of_record[excerpts[i].record]
            if i in chosen or key in seen_texts or (not relaxed and unit in seen_units):
                continue
            chosen.append(i)
            seen_units.add(unit)
            seen_texts.add(key)
    return [excerpts[i] for i in sorted(chosen, key=lambda i: excerpts[i].start)]


def pattern_rows(book: str, character: str, name: str, result: CharacterPatterns) -> list[dict[str, Any]]:
    """Rows of PERSONALITY_PATTERNS for one character."""
    rows = []
    for number, (pattern, vector) in enumerate(zip(result.patterns, result.vectors), start=1):
        members = [result.records[r] for u in pattern.units for r in result.units[u].records]
        members.sort(key=lambda r: r["start"])
        emotions: Counter[str] = Counter()
        for record in members:
            emotions[record["emotion"]] += record["intensity"]
        acts = Counter(record["act"] for record in members)
        rows.append({
            "book": book, "character": character, "character_name": name, "pattern_id": number,
            "description": pattern.description,
            "excerpts": [e.text for e in pattern.excerpts],
            "excerpt_starts": [e.start for e in pattern.excerpts],
            "scene_ids": sorted({int(r["scene_id"]) for r in members}),
            "utterance_starts": [int(r["start"]) for r in members],
            "units": len(pattern.units), "utterances": len(members),
            "dominant_emotion": _dominant(emotions, EMOTIONS),
            "mean_intensity": float(np.mean([r["intensity"] for r in members])),
            "dominant_act": _dominant(acts, ACTS),
            "origin": pattern.origin, "attached_noise": pattern.attached_noise, "clustering": pattern.clustering,
            "method": pattern.method, "error": pattern.error, "vector": np.asarray(vector, dtype=np.float32).tolist(),
        })
    return rows
