"""A build's runs, cut for calls that overlap: each model step waits only for what it reads, in few runs."""

import dagster as dg
import pytest

from assets import BOOK_ASSETS, CHARACTER_ASSETS
from assets.context import ASKS_MODEL
from reveriemem_dagster.build import PlannedRun, _in_dependency_order
from reveriemem_dagster.run_cuts import asks_model, cut_runs, waits

CHARACTERS = ["mara-quell", "tobin-reddick"]


def _plan() -> list[PlannedRun]:
    runs = [PlannedRun("ledger", None, _in_dependency_order(list(BOOK_ASSETS)))]
    return runs + [PlannedRun(dg.MultiPartitionKey({"book": "ledger", "character": c}), c,
                              _in_dependency_order(list(CHARACTER_ASSETS))) for c in CHARACTERS]


def _names(run: PlannedRun) -> set[str]:
    return {a.key.to_user_string() for a in run.assets}


def _closure(index: int, direct: list[list[int]]) -> set[int]:
    """The runs `index` waits for, directly or through them."""
    return set(direct[index]).union(*(_closure(d, direct) for d in direct[index]))


def test_the_project_build_is_cut_where_a_model_step_would_wait_for_what_it_does_not_read() -> None:
    runs = cut_runs(_plan())
    direct = [waits(run, runs[:i]) for i, run in enumerate(runs)]
    by_names = {(frozenset(_names(r)), r.character): i for i, r in enumerate(runs)}

    def index(character: str | None, *names: str) -> int:
        return by_names[(frozenset(names), character)]

    scenes, rosters = index(None, "scenes", "utterances"), index(None, "scene_rosters")
    graphs, dialogue = index(None, "scene_graphs", "entities", "memberships"), index(None, "dialogue_records")
    facts = index(None, "facts")
    assert len(runs) == 5 + 3 * len(CHARACTERS)
    for character in CHARACTERS:
        notes = index(character, "character_scenes", "episodes")
        patterns = index(character, "emotion_transitions", "personality_patterns")
        calibration = index(character, "reader_calibration")
        # the notes go once the scenes and rosters exist, not after the facts or the dialogue annotation
        assert _closure(notes, direct) == {scenes, rosters}
        assert _closure(patterns, direct) == {scenes, dialogue}
        assert _closure(calibration, direct) == {scenes, rosters, graphs, dialogue, facts, notes, patterns}
    # every asset is in exactly one run of its partition, and each run comes after the runs it reads from
    planned = sorted((a.key.to_user_string(), str(r.partition)) for r in _plan() for a in r.assets)
    assert sorted((a.key.to_user_string(), str(r.partition)) for r in runs for a in r.assets) == planned
    assert all(all(d < i for d in ds) for i, ds in enumerate(direct))


def test_no_asset_waits_for_a_run_it_does_not_need() -> None:
    runs = cut_runs(_plan())
    direct = [waits(run, runs[:i]) for i, run in enumerate(runs)]
    where = {(a.key, r.character): i for i, r in enumerate(runs) for a in r.assets}
    assets = {(a.key, r.character): a for r in runs for a in r.assets}

    def needs(node: tuple[dg.AssetKey, str | None]) -> set[tuple[dg.AssetKey, str | None]]:
        """Everything the asset reads, directly or through what it reads (a character reads the book's assets)."""
        seen: set[tuple[dg.AssetKey, str | None]] = set()
        todo = [node]
        while todo:
            key, character = todo.pop()
            for dep in assets[(key, character)].dependency_keys:
                for other in {(dep, character), (dep, None)} & set(assets) - seen:
                    seen.add(other)
                    todo.append(other)
        return seen

    for i, run in enumerate(runs):
        assert sum(asks_model(a) for a in run.assets) <= 1, _names(run)
        for asset in run.assets:
            needed = {where[n] for n in needs((asset.key, run.character))} - {i}
            assert _closure(i, direct) <= needed | {j for k in needed for j in _closure(k, direct)}, asset.key


def test_every_asset_that_asks_the_model_goes_first_among_the_steps_ready_in_its_run() -> None:
    for asset in [*BOOK_ASSETS, *CHARACTER_ASSETS]:
        tags = asset.op.tags
        assert (tags.get("dagster/priority") == ASKS_MODEL["dagster/priority"]) == asks_model(asset), asset.key


def test_a_rules_step_never_makes_what_reads_it_wait_for_a_model_step_it_does_not_need() -> None:
    @dg.asset
    def text() -> int:
        return 1

    @dg.asset
    def lines() -> int:
        return 1

    @dg.asset(required_resource_keys={"lm"})
    def summary(text: int, lines: int) -> int:
        return text + lines

    @dg.asset(required_resource_keys={"lm"})
    def title(text: int) -> int:
        return text

    @dg.asset
    def length(text: int) -> int:
        return text

    runs = cut_runs([PlannedRun("book", None, [text, lines, summary, title, length])])
    # text may not go in summary's run (title and length would wait for summary's calls), so it gets its own,
    # which length joins; lines, read by summary alone, goes in summary's run
    assert [_names(r) for r in runs] == [{"text", "length"}, {"lines", "summary"}, {"title"}]
    assert [waits(r, runs[:i]) for i, r in enumerate(runs)] == [[], [0], [0]]


@pytest.mark.parametrize("character", [None, "mara-quell"])
def test_a_run_reads_the_book_and_its_own_character_only(character: str | None) -> None:
    book = PlannedRun("ledger", None, [BOOK_ASSETS[0]])
    others = [PlannedRun(dg.MultiPartitionKey({"book": "ledger", "character": c}), c, [CHARACTER_ASSETS[1]])
              for c in CHARACTERS]
    calibration = PlannedRun("x", character, [CHARACTER_ASSETS[-1]])
    assert waits(calibration, [book, *others]) == ([1, 2] if character is None else [1])
