"""A release that changes how the memory is read makes a built book stale, so `reveriemem build` redoes it."""

from assets.context import CODE_VERSION
from reveriemem.inference.calibration import READER_VERSION
from reveriemem.source_to_memory.deaths import DEATH_VERSION
from reveriemem.source_to_memory.dialogue import ATTRIBUTION_VERSION
from reveriemem.source_to_memory.emotions import EMOTION_VERSION
from reveriemem.source_to_memory.episodic import DIGEST_VERSION
from reveriemem.source_to_memory.facts import EVIDENCE_METHOD
from reveriemem.source_to_memory.mentions import MATCHER_VERSION
from reveriemem.source_to_memory.patterns import PATTERN_VERSION
from reveriemem.source_to_memory.rosters import ROSTER_VERSION
from reveriemem.source_to_memory.scenes import SEGMENTER_VERSION
from reveriemem.source_to_memory.visibility import VISIBILITY_VERSION
from reveriemem_dagster.definitions import defs


def test_the_assets_code_version_carries_every_offline_readers_version():
    for version in (SEGMENTER_VERSION, ROSTER_VERSION, ATTRIBUTION_VERSION, MATCHER_VERSION, EVIDENCE_METHOD,
                    VISIBILITY_VERSION, DIGEST_VERSION, EMOTION_VERSION, PATTERN_VERSION, DEATH_VERSION, READER_VERSION):
        assert version in CODE_VERSION
    graph = defs.resolve_asset_graph()
    for name in ("scenes", "scene_rosters", "facts", "episodes"):
        [key] = [k for k in graph.get_all_asset_keys() if k.path[-1] == name]
        assert graph.get(key).code_version == CODE_VERSION
