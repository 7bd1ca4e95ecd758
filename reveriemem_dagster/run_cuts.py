"""A build's runs cut so that every model step starts as soon as what it reads exists, in few Dagster runs.

With calls that may overlap (`build_book` above concurrency 1), a build does not go one Dagster run per
partition, the characters' after the whole book's. Each asset that asks the model (it needs the `lm`
resource) gets a run of its own, which starts as soon as the runs it reads from have ended: the book's
rosters, extraction and dialogue annotation ask together once the scenes exist, and a character's
episodic notes go once the scenes and rosters exist, beside the book's entities and facts. An asset that
does not ask the model (rules, embeddings) joins a run of its own partition that already waits for
everything it reads, preferring one holding an asset it reads, as long as whatever else reads it needs
that run's model step anyway; only when there is none does it get a run of its own. Joining never makes
it, or what reads it, wait for a model step it does not need, and it saves a run: each Dagster run costs
a fixed start-up (a new event-log database, planned events, resource set-up), and Dagster's SQLite event
log serialises every run's reads and writes in the process, so fewer runs is less time on the critical
path. For the project's assets: the book's scenes with utterances, rosters, the scene graphs with
entities and memberships, the dialogue records, the facts; each character's scenes with its episodes,
its emotion transitions with its patterns, and its reader calibration (5 + 3 per character).

`waits` gives for each run the indexes of the earlier runs it reads from, for `run_at_once(after=...)`.
What an asset reads is what Dagster's graph says (its `dependency_keys`): a book-level asset is read by the
book's runs and every character's, a character's asset by that character's runs.
"""

from __future__ import annotations

import dataclasses
import heapq
from collections.abc import Sequence
from dataclasses import dataclass

import dagster as dg


@dataclass
class PlannedRun:
    """One Dagster run of a build: some assets of one partition (the build's plan has one per partition)."""

    partition: str | dg.MultiPartitionKey
    character: str | None  # None for the book-level run
    assets: list[dg.AssetsDefinition]  # to materialise, in dependency order

    @property
    def label(self) -> str:
        return str(self.partition)


Node = tuple[dg.AssetKey, str | None]  # an asset in a partition: (key, character or None for the book's)


def asks_model(asset: dg.AssetsDefinition) -> bool:
    return "lm" in asset.required_resource_keys


def _reads(asset: dg.AssetsDefinition, character: str | None, planned: set[Node]) -> set[Node]:
    """The planned (asset, partition) pairs `asset` in `character`'s partition reads."""
    out: set[Node] = set()
    for key in asset.dependency_keys:
        out |= {(k, c) for k, c in planned if k == key and (c is None or character is None or c == character)}
    return out


def cut_runs(runs: Sequence[PlannedRun]) -> list[PlannedRun]:
    """The runs cut as the module doc says, in an order where every run comes after the runs it reads from."""
    planned = {(a.key, run.character) for run in runs for a in run.assets}
    groups: Groups = []  # (the planned run it comes from, its assets)
    home: dict[Node, int] = {}
    reads = {(a.key, run.character): _reads(a, run.character, planned) for run in runs for a in run.assets}
    for run in runs:  # every asset that asks the model: a run of its own
        for asset in run.assets:
            if asks_model(asset):
                home[(asset.key, run.character)] = len(groups)
                groups.append((run, [asset]))
    for run in runs:  # the others, in dependency order: a run that already waits for all they read, if any
        for asset in run.assets:
            node = (asset.key, run.character)
            if node in home:
                continue
            fits = [g for g, (origin, _) in enumerate(groups) if origin is run and _fits(node, g, groups, home, reads)]
            own = [g for g in fits if any(home.get(n) == g for n in reads[node])]
            chosen = (own or fits)[0] if fits else None
            if chosen is None:
                home[node] = len(groups)
                groups.append((run, [asset]))
            else:
                home[node] = chosen
                groups[chosen][1].append(asset)
    cut = [dataclasses.replace(origin, assets=_in_plan_order(origin, assets)) for origin, assets in groups]
    needs = [{home[n] for a in assets for n in reads[(a.key, origin.character)]} - {g}
             for g, (origin, assets) in enumerate(groups)]
    return [cut[g] for g in _topological(needs)]


Groups = list[tuple[PlannedRun, list[dg.AssetsDefinition]]]


def _fits(node: Node, group: int, groups: Groups, home: dict[Node, int], reads: dict[Node, set[Node]]) -> bool:
    """Whether `node` may join `group`: the group already waits for all it reads, no run it waits for reads it,
    and whatever else reads it needs every model step of the group anyway (it waits for the group's end)."""
    nodes, waited = _before(group, groups, home, reads)
    if not reads[node] <= nodes:
        return False
    if any(node in reads[(a.key, groups[g][0].character)] for g in waited - {group} for a in groups[g][1]):
        return False
    origin, assets = groups[group]
    steps = {(a.key, origin.character) for a in assets if asks_model(a)}
    readers = [r for r, read in reads.items() if node in read and home.get(r) != group]
    return all(steps <= _needs(r, reads) for r in readers)


def _needs(node: Node, reads: dict[Node, set[Node]]) -> set[Node]:
    """Everything `node` reads, directly or through what it reads."""
    seen: set[Node] = set()
    todo = list(reads[node])
    while todo:
        n = todo.pop()
        if n not in seen:
            seen.add(n)
            todo.extend(reads[n])
    return seen


def _before(group: int, groups: Groups, home: dict[Node, int], reads: dict[Node, set[Node]]) -> tuple[set[Node], set[int]]:
    """The assets placed in `group` and in every run it waits for, transitively (all ended before it ends), and
    those runs (`group` included)."""
    seen, todo, nodes = {group}, [group], set()
    while todo:
        g = todo.pop()
        origin, assets = groups[g]
        for asset in assets:
            nodes.add((asset.key, origin.character))
            for dep in reads[(asset.key, origin.character)]:
                other = home.get(dep)
                if other is not None and other not in seen:
                    seen.add(other)
                    todo.append(other)
    return nodes, seen


def _in_plan_order(origin: PlannedRun, assets: list[dg.AssetsDefinition]) -> list[dg.AssetsDefinition]:
    return [a for a in origin.assets if a in assets]


def _topological(needs: list[set[int]]) -> list[int]:
    """The indexes in an order where each comes after those it needs; ties keep the given order."""
    left = [set(n) for n in needs]
    ready = [i for i, n in enumerate(left) if not n]
    heapq.heapify(ready)
    readers: list[list[int]] = [[] for _ in needs]
    for i, n in enumerate(needs):
        for j in n:
            readers[j].append(i)
    out: list[int] = []
    while ready:
        i = heapq.heappop(ready)
        out.append(i)
        for r in readers[i]:
            left[r].discard(i)
            if not left[r]:
                heapq.heappush(ready, r)
    if len(out) < len(needs):  # cannot happen for assets Dagster accepts (their graph has no cycle)
        raise ValueError("The build's runs wait for each other in a cycle.")
    return out


def waits(run: PlannedRun, earlier: Sequence[PlannedRun]) -> list[int]:
    """The indexes of the `earlier` runs that materialise an asset `run` reads, in a partition it reads."""
    return [i for i, other in enumerate(earlier)
            if any(_reads(asset, run.character, {(a.key, other.character) for a in other.assets}) for asset in run.assets)]
