"""The personality layer: each character's behavioural patterns (paper:
"Personality clustering", second half).

1. **Behaviour units.** A character's annotated utterances are cut into
   units: a run of consecutive utterances in one scene, broken where the
   register changes (a new non-neutral emotion) or the run grows long
   (`MAX_UNIT_UTTERANCES`, `MAX_UNIT_WORDS`). A scene is therefore one unit
   or several, which gives hdbscan enough points for a main character.
2. **Features.** The character's own lines are embedded once; a unit's text
   vector is the normalised mean of its lines. Its behaviour profile is the
   intensity-weighted emotion histogram, the act histogram (question,
   command, ...), the mean intensity and the mean length. Both parts are
   L2-normalised and weighted equally, so the cosine of two units is the mean
   of their text and profile cosines.
3. **Clustering.** The unit vectors are centred and projected on their
   leading principal components (5 to 12, `reduced_dimensions`), normalised
   again, and clustered by hdbscan with the euclidean metric (on unit
   vectors it orders pairs as cosine does). Density clustering of a few dozen
   points in 400 dimensions calls almost everything noise; in a handful of
   dimensions it finds the groups. `min_cluster_size` grows with the number
   of units (`min_cluster_size_for`), so the number of patterns is not fixed.
   Every member of a cluster pattern must reach cosine `ATTACH_FLOOR` with
   its cluster's centre in the full space; one the projection misplaced is
   treated as noise. **Noise** is handled so: a noise unit joins the cluster
   whose centre it reaches with cosine `ATTACH_FLOOR` (the nearest such);
   otherwise it stays a pattern of its own (`origin = "noise"`), because a
   one-off register (a single outburst) is what a style anchor is for.
   Without hdbscan, units
   are grouped in story order by a similarity floor (`THRESHOLD_FLOOR`,
   `origin = "threshold"`): for a character with one or two units, when all
   units are identical, or when hdbscan finds no cluster at all. No
   utterances, no patterns.
4. **Patterns.** Each pattern keeps up to three canonical excerpts: verbatim
   slices of the book's text from the character's own quoted speech (a quote,
   or a few of its sentences up to `MAX_EXCERPT_WORDS` words), those nearest
   the pattern centre, one per unit first; its scenes and utterance offsets;
   and a one-line description, written by the model
   (`DescribePattern`) or, offline or when the output never parses, by a
   template from the dominant emotion, intensity, acts, addressee and
   characteristic words (`heuristic:pattern-v1`). The description is
   embedded for retrieval.
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
from reveriemem.core.text import Paragraph, normalise_space
from reveriemem.models import ModelHandle, run_program
from reveriemem.source_to_memory.dialogue import quote_spans
from reveriemem.source_to_memory.emotions import ACTS

log = logging.getLogger(__name__)

PATTERN_VERSION = "pattern-v1"
HEURISTIC_METHOD = f"heuristic:{PATTERN_VERSION}"
MAX_UNIT_UTTERANCES = 4
MAX_UNIT_WORDS = 120
MAX_EXCERPT_WORDS = 40
MIN_EXCERPT_WORDS = 3  # shorter lines are excerpts only when nothing longer is near the centre
EXCERPTS = 3
PROMPT_LINES = 4
PROMPT_LINE_WORDS = 25
TEXT_WEIGHT = 0.5  # share of the text embedding in the unit cosine; the profile has the rest
MIN_HDBSCAN_UNITS = 3
ATTACH_FLOOR = 0.6
MIN_SAMPLES = 2
THRESHOLD_FLOOR = 0.6

_SENTENCE_END = re.compile(r"[.!?]+[\"'”’)]*\s+")
_WORDS = re.compile(r"[A-Za-z][A-Za-z'’]+")
_STOPWORDS = frozenset(str.split(
    "the a an and or but if then so of to in on at by for with from as is are was were be been being am it its it's "
    "this that these those there here i me my mine we us our you your yours he him his she her hers they them their "
    "what which who whom whose when where why how not no nor do does did done have has had having will would shall "
    "should can could may might must i'm i've i'll i'd you're you've you'll he's she's we're they're don't didn't "
    "can't won't isn't wasn't aren't weren't let's one all any some more most very just only also too than such "
    "now well yes oh ah out up down over into about again said say says tell told know see come go get got like "
    "man men sir upon much many own same other yet still ever never nothing anything something shall"
))

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
class Unit:
    scene_id: int
    records: list[int]  # indexes into the character's records


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


@dataclass
class Clustering:
    groups: list[list[int]]  # unit indexes per group
    origins: list[str]
    attached: list[int]  # noise units attached per group
    label: str  # how the groups were made


# -- excerpts ------------------------------------------------------------


def excerpts_of(text: str, paragraph: Paragraph, start: int, end: int, record: int) -> list[Excerpt]:
    """The verbatim pieces of one utterance's quoted speech, each at most `MAX_EXCERPT_WORDS` words.

    A quote is stripped of its marks, surrounding space and a trailing comma
    or dash (the place of a speech tag); a long quote is cut into runs of
    whole sentences (a single overlong sentence is cut at a word).
    """
    out: list[Excerpt] = []
    spans, _ = quote_spans(paragraph)
    for a, b in spans:
        if a < start or b > end:
            continue
        while a < b and text[a] in "\"“‘' \t\r\n":
            a += 1
        while b > a and text[b - 1] in "\"”’' \t\r\n,;:—–-":
            b -= 1
        if b <= a or not re.search(r"[A-Za-z]", text[a:b]):
            continue
        out.extend(_chunks(text, a, b, record))
    return out


def _chunks(text: str, a: int, b: int, record: int) -> list[Excerpt]:
    sentences: list[tuple[int, int]] = []
    cursor = a
    for match in _SENTENCE_END.finditer(text, a, b):
        sentences.append((cursor, match.end() - len(match.group(0)) + len(match.group(0).rstrip())))
        cursor = match.end()
    if cursor < b:
        sentences.append((cursor, b))
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


# -- units and features ------------------------------------------------------


def behaviour_units(records: Sequence[dict[str, Any]]) -> list[Unit]:
    """Consecutive utterances of one scene, cut where the register changes or the run grows long."""
    units: list[Unit] = []
    mood: str | None = None
    words = 0
    for index, record in enumerate(records):
        emotion = record["emotion"]
        length = len(str(record["text"]).split())
        current = units[-1] if units else None
        shift = emotion != "neutral" and mood is not None and emotion != mood
        if current is None or current.scene_id != record["scene_id"] or shift \
                or len(current.records) >= MAX_UNIT_UTTERANCES or words + length > MAX_UNIT_WORDS:
            units.append(Unit(scene_id=int(record["scene_id"]), records=[index]))
            mood, words = (emotion if emotion != "neutral" else None), length
            continue
        current.records.append(index)
        words += length
        if emotion != "neutral":
            mood = emotion
    return units


def _unit_norm(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=-1, keepdims=True)
    return matrix / np.where(norms == 0, 1.0, norms)


def profile(records: Sequence[dict[str, Any]]) -> np.ndarray:
    """Emotion histogram (intensity-weighted), act histogram, mean intensity and length; unit length."""
    emotions = np.zeros(len(EMOTIONS), dtype=np.float32)
    acts = np.zeros(len(ACTS), dtype=np.float32)
    for record in records:
        emotions[EMOTIONS.index(record["emotion"]) if record["emotion"] in EMOTIONS else -1] += record["intensity"]
        acts[ACTS.index(record["act"]) if record["act"] in ACTS else -1] += 1.0
    emotions /= max(float(emotions.sum()), 1e-9)
    acts /= max(float(acts.sum()), 1e-9)
    intensity = float(np.mean([r["intensity"] for r in records])) / 5.0
    length = min(1.0, float(np.mean([len(str(r["text"]).split()) for r in records])) / 60.0)
    return _unit_norm(np.concatenate([emotions, acts, np.array([intensity, length], dtype=np.float32)]))


def combine(text_vectors: np.ndarray, profiles: np.ndarray) -> np.ndarray:
    """Text and profile, each unit length, weighted so the result has unit length."""
    return np.concatenate([_unit_norm(text_vectors) * math.sqrt(TEXT_WEIGHT),
                           _unit_norm(profiles) * math.sqrt(1.0 - TEXT_WEIGHT)], axis=1).astype(np.float32)


# -- clustering ---------------------------------------------------------------


def min_cluster_size_for(units: int) -> int:
    """Grows slowly with the number of units: 2 up to 12 units, 3 up to 30, ... 8 from about 240."""
    return max(2, min(8, round(math.sqrt(units) / 2)))


def reduced_dimensions(units: int) -> int:
    """Dimensions kept for hdbscan: 5 for a handful of units, up to 12 for hundreds."""
    return min(units - 1, max(5, min(12, units // 6)))


def _centre(vectors: np.ndarray) -> np.ndarray:
    return _unit_norm(vectors.mean(axis=0))


def reduce(vectors: np.ndarray, dimensions: int) -> np.ndarray:
    """The leading principal components of the vectors, each row normalised again (empty if all rows are equal)."""
    centred = vectors - vectors.mean(axis=0)
    _, singular, components = np.linalg.svd(centred, full_matrices=False)
    keep = [i for i in range(min(dimensions, len(singular))) if singular[i] > 1e-6]
    return _unit_norm(centred @ components[keep].T) if keep else np.zeros((len(vectors), 0))


def cluster_units(vectors: np.ndarray) -> Clustering:
    """Group unit vectors (rows, unit length) into patterns; see the module docstring."""
    n = len(vectors)
    if n == 0:
        return Clustering([], [], [], "none")
    if n < MIN_HDBSCAN_UNITS:
        return _threshold(vectors, f"few units ({n})")
    reduced = reduce(vectors, reduced_dimensions(n))
    if reduced.shape[1] == 0:
        return _threshold(vectors, "identical units")
    import hdbscan  # imported here: it takes a moment and only this step needs it

    size = min_cluster_size_for(n)
    clusterer = hdbscan.HDBSCAN(min_cluster_size=size, min_samples=MIN_SAMPLES, metric="euclidean",
                                cluster_selection_method="eom", core_dist_n_jobs=1)
    labels = [int(x) for x in clusterer.fit_predict(reduced.astype(np.float64))]
    label = f"hdbscan(pca={reduced.shape[1]},min_cluster_size={size},min_samples={MIN_SAMPLES})"
    groups = [[i for i in range(n) if labels[i] == c] for c in sorted({x for x in labels if x >= 0})]
    # a member far from its cluster's centre in the full space (the projection put it there) is noise too
    noise = [i for i in range(n) if labels[i] < 0]
    for group in groups:
        centre = _centre(vectors[group])
        far = [i for i in group if float(centre @ vectors[i]) < ATTACH_FLOOR]
        if len(far) < len(group):
            noise.extend(far)
            group[:] = [i for i in group if i not in far]
        else:  # nobody near the centre: not a cluster at all
            noise.extend(group)
            group.clear()
    groups = [g for g in groups if g]
    if not groups:
        return _threshold(vectors, f"{label} found no cluster")
    origins = ["cluster"] * len(groups)
    attached = [0] * len(groups)
    centres = np.stack([_centre(vectors[g]) for g in groups])
    for i in sorted(noise):
        sims = centres @ vectors[i]
        best = int(np.argmax(sims))
        if sims[best] >= ATTACH_FLOOR:
            groups[best].append(i)
            attached[best] += 1
        else:
            groups.append([i])
            origins.append("noise")
            attached.append(0)
    return Clustering([sorted(g) for g in groups], origins, attached, f"{label}+noise(floor={ATTACH_FLOOR})")


def _threshold(vectors: np.ndarray, why: str) -> Clustering:
    """Without hdbscan: in story order, a unit joins the first group whose centre it reaches `THRESHOLD_FLOOR` with."""
    groups: list[list[int]] = []
    for i, vector in enumerate(vectors):
        home = next((g for g in groups if float(_centre(vectors[g]) @ vector) >= THRESHOLD_FLOOR), None)
        if home is None:
            groups.append([i])
        else:
            home.append(i)
    return Clustering(groups, ["threshold"] * len(groups), [0] * len(groups),
                      f"threshold(floor={THRESHOLD_FLOOR}): {why}")


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
    documents = [set(w.lower().replace("’", "'") for w in _WORDS.findall(t)) for t in unit_texts]
    counts = Counter(w.lower().replace("’", "'") for t in pattern_texts for w in _WORDS.findall(t))
    scored = []
    for word, count in counts.items():
        if word in _STOPWORDS or word in exclude or "'" in word or len(word) < 4 \
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
) -> CharacterPatterns:
    """One character's patterns from their dialogue records (any order; sorted here by offset)."""
    ordered = sorted(records, key=lambda r: r["start"])
    units = behaviour_units(ordered)
    by_index = {p.index: p for p in paragraphs}
    excerpts: list[Excerpt] = []
    for index, record in enumerate(ordered):
        paragraph = by_index.get(int(record["paragraph"]))
        if paragraph is not None:
            excerpts.extend(excerpts_of(text, paragraph, int(record["start"]), int(record["end"]), index))
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
            unit_text[u] = _unit_norm(line_vectors[rows].mean(axis=0))
    unit_vectors = combine(unit_text, np.stack([profile([ordered[r] for r in unit.records]) for unit in units]))
    clustering = cluster_units(unit_vectors)
    line_features = (combine(line_vectors, record_profiles[[e.record for e in excerpts]])
                     if excerpts else np.zeros((0, unit_vectors.shape[1]), dtype=np.float32))
    unit_of_record = {r: u for u, unit in enumerate(units) for r in unit.records}
    unit_texts = [" ".join(ordered[r]["text"] for r in unit.records) for unit in units]
    name_words = frozenset(w.lower() for n in (name, *names.values()) for w in _WORDS.findall(n))

    patterns: list[Pattern] = []
    for group, origin, attached in zip(clustering.groups, clustering.origins, clustering.attached):
        pattern = Pattern(units=group, origin=origin, clustering=clustering.label, attached_noise=attached)
        centre = _centre(unit_vectors[group])
        in_group = {r for u in group for r in units[u].records}
        candidates = [i for i, e in enumerate(excerpts) if e.record in in_group]
        pattern.excerpts = _pick_excerpts(excerpts, candidates, line_features, centre, unit_of_record)
        patterns.append(pattern)
    patterns.sort(key=lambda p: min(ordered[r]["start"] for u in p.units for r in units[u].records))

    if on_start is not None:
        on_start(len(patterns))
    program = describe_pattern_program() if handle.lm is not None else None
    failures: list[str] = []
    for number, pattern in enumerate(patterns, start=1):
        members = [ordered[r] for u in pattern.units for r in units[u].records]
        words = characteristic_words([ordered[r]["text"] for u in pattern.units for r in units[u].records], unit_texts,
                                     exclude=name_words)
        fallback = template_description(members, names, words)
        if program is None:
            pattern.description = fallback
        else:
            centre = _centre(unit_vectors[pattern.units])
            member_set = {r for u in pattern.units for r in units[u].records}
            nearest = sorted((i for i, e in enumerate(excerpts) if e.record in member_set),
                             key=lambda i: -float(line_features[i] @ centre))[:PROMPT_LINES]
            lines = [prompt_line(excerpts[i].text, ordered[excerpts[i].record]) for i in nearest] or [
                prompt_line(str(m["text"]), m) for m in members[:PROMPT_LINES]]
            try:
                prediction = run_program(handle, program, character=name, lines=lines)
                description = normalise_space(str(prediction.description or ""))
                if not description:
                    raise ModelOutputError(f"The model {handle.name} wrote an empty description.")
                pattern.description, pattern.method = description, f"model:{handle.name}"
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
