"""The several-machines deployment on 127.0.0.1: PostgreSQL, an S3 server, a Dask scheduler and two workers.

The demo story built through the cluster (offline, `--lm none`, hash
embedder) must store the same rows as a build on one machine; a worker
killed with SIGKILL mid-build, and the build launched again, must lose
nothing and materialise again no partition finished before the kill (a step
the kill catches between storing its partition and recording its success runs
once more: the stored rows are the same). Skipped, with the reason, only
where the services cannot be started (unless REVERIEMEM_REQUIRE_DEPLOY=1, as
in CI, which makes that a failure).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import polars as pl
import pytest

from reveriemem.core.demo import DEMO_SLUG, demo_book_path, demo_characters_path
from reveriemem.core.schemas import BY_ASSET
from reveriemem.core.settings import environment
from tests.loopback_cluster import LoopbackCluster, unavailable

pytestmark = pytest.mark.slow

CHARACTER_ASSETS = {"character_scenes", "episodes", "emotion_transitions", "personality_patterns"}  # progress signs


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    reason = unavailable()
    if reason:
        if os.environ.get("REVERIEMEM_REQUIRE_DEPLOY") == "1":
            pytest.fail(f"The loopback deployment cannot start: {reason}.")
        pytest.skip(f"The loopback deployment cannot start: {reason}.")
    started = LoopbackCluster.start(tmp_path_factory.mktemp("cluster"))
    yield started
    started.stop()


def _cli(env: dict[str, str], *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "reveriemem_dagster.cli", *args], env=env, capture_output=True,
                          text=True, timeout=timeout)


def _rows(asset: str, partitions: list[str]) -> pl.DataFrame:
    """Every stored row of `asset` in `partitions`, in the store the environment names, in a stable order."""
    from reveriemem.core.storage import MemoryStore
    from reveriemem_dagster.partitions import partition_ref

    store = MemoryStore.for_home()
    frames = [store.read(asset, partition_ref(part)) for part in partitions]
    frame = pl.concat([f for f in frames if f.height], how="vertical_relaxed") if any(f.height for f in frames) \
        else frames[0]
    return frame.sort(frame.columns, nulls_last=True) if frame.height else frame


def _materialisations(env: dict[str, str]) -> Counter[tuple[str, str]]:
    """How often each (asset, partition) of the demo was materialised in the cluster's instance."""
    import dagster as dg

    with environment(DAGSTER_HOME=env["DAGSTER_HOME"]), dg.DagsterInstance.get() as instance:
        counts: Counter[tuple[str, str]] = Counter()
        for name in BY_ASSET:
            records = instance.fetch_materializations(dg.AssetKey(name), limit=1000).records
            for record in records:
                partition = record.partition_key or ""
                if partition.split("|")[0] == DEMO_SLUG:
                    counts[(name, partition)] += 1
        return counts


def test_cluster_build_matches_local_and_survives_a_killed_worker(cluster: LoopbackCluster, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # the reference: the same build on one machine, in-process storage, no cluster
    local_home = tmp_path / "local"
    local_env = {k: v for k, v in cluster.env(local_home).items() if k not in ("REVERIEMEM_STORE", "DAGSTER_HOME")}
    for args in (["add-book", str(demo_book_path()), "--characters", str(demo_characters_path())],
                 ["build", DEMO_SLUG, "--lm", "none", "--embedder", "hash", "-q"]):
        done = _cli(local_env, *args)
        assert done.returncode == 0, done.stderr[-2000:]

    env = cluster.env(tmp_path / "launcher")
    done = _cli(env, "add-book", str(demo_book_path()), "--characters", str(demo_characters_path()))
    assert done.returncode == 0, done.stderr[-2000:]
    build = ["cluster-build", DEMO_SLUG, "--scheduler", cluster.scheduler, "--lm", "none", "--embedder", "hash",
             "--parallel", "3"]
    first = subprocess.Popen([sys.executable, "-m", "reveriemem_dagster.cli", *build], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    # kill -9 a worker once the book-level run is done and the character runs are under way
    deadline = time.monotonic() + 300
    while not any(asset in CHARACTER_ASSETS for asset, _ in _materialisations(env)):
        assert first.poll() is None, first.communicate()[0][-3000:]
        assert time.monotonic() < deadline, "the cluster build made no per-character progress in 300 s"
        time.sleep(0.5)
    # what was materialised a moment before the kill has had time to record its step's success; a step the kill
    # catches between storing its partition and recording its success is lost with the worker and runs again
    finished = set(_materialisations(env))
    time.sleep(1.5)
    cluster.kill("worker-1")
    first_output = first.communicate(timeout=600)[0]
    # the build may finish on the remaining worker (Dask hands it the lost step) or fail; either way, build again
    cluster.start_worker("worker-3")
    cluster.wait_for_workers(2)
    again = _cli(env, *build)
    assert again.returncode == 0, first_output[-2000:] + again.stdout[-2000:] + again.stderr[-3000:]

    counts = _materialisations(env)
    characters = sorted({part.split("|")[1] for _, part in counts if "|" in part})
    assert len(characters) == 6, counts
    assert set(BY_ASSET) >= {asset for asset, _ in counts}
    repeated = {key: n for key, n in counts.items() if n > 1}
    assert not repeated.keys() & finished, f"finished partitions materialised again: {repeated}"
    assert all(n == 2 for n in repeated.values()), f"partitions materialised more than twice: {repeated}"
    second = _cli(env, *build)
    assert second.returncode == 0 and "0 runs" in second.stdout, second.stdout + second.stderr[-2000:]

    for name in sorted({asset for asset, _ in counts}):
        partitions = sorted(part for asset, part in counts if asset == name)
        with environment(**{k: env.get(k) for k in ("REVERIEMEM_HOME", "REVERIEMEM_STORE", "REVERIEMEM_S3_ENDPOINT",
                                                      "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION")}):
            on_cluster = _rows(name, partitions)
        with environment(REVERIEMEM_HOME=str(local_home), REVERIEMEM_STORE=None):
            on_one_machine = _rows(name, partitions)
        assert on_cluster.height == on_one_machine.height, name
        assert on_cluster.equals(on_one_machine), f"{name} differs between the cluster and a local build"
