"""Personality clustering: a character's behaviour units, their features, and their grouping.

1. **Behaviour units.** A character's annotated utterances are cut into
   units: a run of consecutive utterances in one scene, broken where the
   register changes (a new non-neutral emotion) or the run grows long
   (`MAX_UNIT_UTTERANCES`, `MAX_UNIT_WORDS`). A scene is therefore one unit
   or several, which gives hdbscan enough points for a main character.
2. **Features.** A unit's text vector is the normalised mean of its lines'
   embeddings. Its behaviour profile is the intensity-weighted emotion
   histogram, the act histogram (question, command, ...), the mean intensity
   and the mean length. Both parts are L2-normalised and weighted equally
   (`combine`), so the cosine of two units is the mean of their text and
   profile cosines.
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
   otherwise it stays a group of its own (`origin = "noise"`), because a
   one-off register (a single outburst) is what a style anchor is for.
   Without hdbscan, units are grouped in story order by a similarity floor
   (`THRESHOLD_FLOOR`, `origin = "threshold"`): for a character with one or
   two units, when all units are identical, or when hdbscan finds no cluster
   at all.

`reveriemem.source_to_memory.patterns` turns the groups into patterns.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dspy_programs.personality import EMOTIONS
from reveriemem.source_to_memory.emotions import ACTS

MAX_UNIT_UTTERANCES = 4
MAX_UNIT_WORDS = 120
TEXT_WEIGHT = 0.5  # share of the text embedding in the unit cosine; the profile has the rest
MIN_HDBSCAN_UNITS = 3
ATTACH_FLOOR = 0.6
MIN_SAMPLES = 2
THRESHOLD_FLOOR = 0.6


@dataclass
class Unit:
    scene_id: int
    records: list[int]  # indexes into the character's records



@dataclass
class Clustering:
    groups: list[list[int]]  # unit indexes per group
    origins: list[str]
    attached: list[int]  # noise units attached per group
    label: str  # how the groups were made



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


def unit_norm(matrix: np.ndarray) -> np.ndarray:
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
    return unit_norm(np.concatenate([emotions, acts, np.array([intensity, length], dtype=np.float32)]))


def combine(text_vectors: np.ndarray, profiles: np.ndarray) -> np.ndarray:
    """Text and profile, each unit length, weighted so the result has unit length."""
    return np.concatenate([unit_norm(text_vectors) * math.sqrt(TEXT_WEIGHT),
                           unit_norm(profiles) * math.sqrt(1.0 - TEXT_WEIGHT)], axis=1).astype(np.float32)


# -- clustering ---------------------------------------------------------------


def min_cluster_size_for(units: int) -> int:
    """Grows slowly with the number of units: 2 up to 12 units, 3 up to 30, ... 8 from about 240."""
    return max(2, min(8, round(math.sqrt(units) / 2)))


def reduced_dimensions(units: int) -> int:
    """Dimensions kept for hdbscan: 5 for a handful of units, up to 12 for hundreds."""
    return min(units - 1, max(5, min(12, units // 6)))


def centroid(vectors: np.ndarray) -> np.ndarray:
    return unit_norm(vectors.mean(axis=0))


def reduce(vectors: np.ndarray, dimensions: int) -> np.ndarray:
    """The leading principal components of the vectors, each row normalised again (empty if all rows are equal)."""
    centred = vectors - vectors.mean(axis=0)
    _, singular, components = np.linalg.svd(centred, full_matrices=False)
    keep = [i for i in range(min(dimensions, len(singular))) if singular[i] > 1e-6]
    return unit_norm(centred @ components[keep].T) if keep else np.zeros((len(vectors), 0))


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
        centre = centroid(vectors[group])
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
    centres = np.stack([centroid(vectors[g]) for g in groups])
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
        home = next((g for g in groups if float(centroid(vectors[g]) @ vector) >= THRESHOLD_FLOOR), None)
        if home is None:
            groups.append([i])
        else:
            home.append(i)
    return Clustering(groups, ["threshold"] * len(groups), [0] * len(groups),
                      f"threshold(floor={THRESHOLD_FLOOR}): {why}")
