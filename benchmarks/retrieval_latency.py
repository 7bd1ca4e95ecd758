"""Latency of visibility-bounded fact retrieval (VIS-RETRIEVE) on synthetic `facts` tables.

    python benchmarks/retrieval_latency.py [--sizes 10000,100000,1000000] [--queries 50] [--fts]

For each size, a temporary LanceDB `facts` table with the project's schema
(`reveriemem.core.schemas.FACTS`): 384-d random unit float32 vectors, visibility lists
of one or two of 10 characters (each character sees about 15% of the facts),
`visible_from` aligned with them, written in batches of 100,000 rows. Prints the
machine, then for each size the median and p95 latency (ms, over `--queries`
queries after warm-up, k = 8) of:

- `unfiltered`: exact search over the whole table;
- `bounded`: the query `MemoryReader.vis_retrieve` sends for one probe (the
  visibility filter inside LanceDB, prefiltered, exact search);
- `bounded+as_of`: the same with a cut point in the middle of the story;

under three index configurations: `none` (flat scan); `scalar` (the scalar
indexes `reveriemem.inference.bounded_search.prepare_fact_indexes` makes: LABEL_LIST on
`visibility`, BITMAP on `book`, BTREE on `source_start`; flat scan); and
`scalar+IVF_FLAT` (plus the IVF_FLAT index MemoryReader builds for tables of
5,000 rows or more, probed in every partition, so still exact: the script
checks it returns the flat scan's top k).

Then the in-memory pool `MemoryReader` searches by default (`FactPool`): the
one-time read of `character-00`'s bounded set (the visibility filter inside the
LanceDB query; rows, MB, seconds), the per-probe exact search over it (`bounded`
and `bounded+as_of` columns; checked against LanceDB's bounded top k), and
`MemoryReader.vis_retrieve` itself for one probe (hashing embedder, dense) with
the pool loaded (`pool="memory"`) and through the per-query LanceDB path
(`pool="lancedb"`), timed in turn probe by probe; with `--fts` also hybrid,
with BM25 over random-word text (`reveriemem.inference.lexical`). Targets: p50 <= 10 ms at
100k facts, <= 50 ms at 1M, for `vis_retrieve` dense with the pool loaded; the
script says whether they are met.
The load average is printed: other jobs on the machine slow every figure.

    python benchmarks/retrieval_latency.py --library [--books 1000 --facts-per-book 2500 --dir DIR]

instead times the library case (benchmarks/retrieval_library.py): one character of one book
in a `facts` table of 1,000 books.

    python benchmarks/retrieval_latency.py --demo-recall all-MiniLM-L6-v2

instead builds the demo story offline in a scratch data home and compares dense
and hybrid VIS-RETRIEVE: for the 15 gold questions about facts a character knows,
and for every gold fact's "subject predicate object" as a probe for each
character who knows it, is the evidence unit holding the gold quotation among
the top k (only where the offline build makes it visible to that character)?
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.machine import cpu_model  # noqa: E402
from reveriemem.core.embeddings import HashEmbedder  # noqa: E402
from reveriemem.core.schemas import DEFAULT_DIM as EMBEDDING_DIM  # noqa: E402
from reveriemem.core.schemas import EPISODES, FACTS  # noqa: E402
from reveriemem.core.storage import LanceStore, PartitionRef  # noqa: E402
from reveriemem.inference.bounded_search import (  # noqa: E402
    ALL_PARTITIONS,
    dense_search,
    fact_filter,
    prepare_fact_indexes,
)
from reveriemem.inference.fact_pool import FactPool  # noqa: E402
from reveriemem.inference.memory_reader import MemoryReader  # noqa: E402

BOOK = "synthetic"
CHARACTERS = [f"character-{n:02d}" for n in range(10)]
BATCH = 100_000
STEP = 100  # source offset between consecutive facts
TARGETS_MS = {100_000: 10.0, 1_000_000: 50.0}
HEADER = f"{'facts':>9} | {'indexes':<15} | {'unfiltered':>15} | {'bounded':>15} | {'bounded+as_of':>15}"
WORDS = [f"w{n:04d}" for n in range(5000)]
FEW_QUERIES_FROM = 500_000  # flat scans of tables this large are timed over 20 queries


def _batch(rng: np.random.Generator, start: int, rows: int, with_text: bool) -> pa.Table:
    vectors = rng.standard_normal((rows, EMBEDDING_DIM), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    ids = np.arange(start, start + rows)
    offsets = ids.astype(np.int64) * STEP
    first = rng.integers(0, len(CHARACTERS), rows)
    second = (first + rng.integers(1, len(CHARACTERS), rows)) % len(CHARACTERS)
    two = rng.random(rows) < 0.5
    visibility, routes, since = [], [], []
    for i in range(rows):
        seen = sorted({CHARACTERS[first[i]], CHARACTERS[second[i]]}) if two[i] else [CHARACTERS[first[i]]]
        visibility.append(seen)
        routes.append(["observation"] * len(seen))
        # an account read out later: the second character knows it 5,000 offsets after it is stated
        since.append([int(offsets[i]) + (5000 if two[i] and c == seen[-1] else 0) for c in seen])
    if with_text:
        picks = rng.integers(0, len(WORDS), (rows, 12))
        text = [" ".join(WORDS[j] for j in row) for row in picks]
    else:
        text = [f"fact {n}" for n in ids]
    columns: dict[str, pa.Array] = {
        "book": pa.array([BOOK] * rows, pa.string()),
        "character": pa.array([""] * rows, pa.string()),
        "fact_id": pa.array([f"{BOOK}:f{n:07d}" for n in ids], pa.string()),
        "scene_id": pa.array((ids // 50).astype(np.int32)),
        "text": pa.array(text, pa.string()),
        "source_start": pa.array(offsets),
        "source_end": pa.array(offsets + 80),
        "visibility": pa.array(visibility, pa.list_(pa.string())),
        "routes": pa.array(routes, pa.list_(pa.string())),
        "visible_from": pa.array(since, pa.list_(pa.int64())),
        "common": pa.array(np.zeros(rows, dtype=bool)),
        "method": pa.array(["synthetic"] * rows, pa.string()),
        "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), EMBEDDING_DIM),
    }
    arrays = [columns[f.name] if f.name in columns else pa.nulls(rows, f.type) for f in FACTS]
    return pa.Table.from_arrays(arrays, schema=FACTS)


def build(uri: str, size: int, with_text: bool) -> float:
    store = LanceStore(uri)
    rng = np.random.default_rng(size)
    began = time.perf_counter()
    table = store.open("facts", FACTS)
    for start in range(0, size, BATCH):
        table.add(_batch(rng, start, min(BATCH, size - start), with_text))
        gc.collect()
    episode: dict[str, Any] = {name: None for name in EPISODES.names}
    episode.update(book=BOOK, character=CHARACTERS[0], scene_id=1, scene_start=0, scene_end=STEP, text="scene",
                   vector=[1.0] + [0.0] * (EMBEDDING_DIM - 1))
    for character in CHARACTERS:
        store.write("episodes", PartitionRef(BOOK, character), [{**episode, "character": character}], EPISODES)
    return time.perf_counter() - began


def _ids(rows: object) -> list[str]:
    return [row["fact_id"] for row in rows]  # type: ignore[attr-defined]


def _p50_p95(times: list[float]) -> tuple[float, float]:
    times = sorted(times)
    return statistics.median(times), times[min(len(times) - 1, int(round(0.95 * (len(times) - 1))))]


def measure(run: Callable[[int], object], queries: int, warmup: int) -> tuple[float, float]:
    return measure_alternately([run], queries, warmup)[0]


def measure_alternately(runs: list[Callable[[int], object]], queries: int, warmup: int) -> list[tuple[float, float]]:
    """p50 / p95 (ms) of each run, timed in turn query by query: compared under the same load."""
    for n in range(warmup):
        for run in runs:
            run(n)
    times: list[list[float]] = [[] for _ in runs]
    for n in range(queries):
        for run, spent in zip(runs, times):
            began = time.perf_counter()
            run(warmup + n)
            spent.append((time.perf_counter() - began) * 1000)
    return [_p50_p95(spent) for spent in times]


def _queries(table: Any, columns: list[str], probes: np.ndarray, cut: int, k: int,
             ivf_flat: bool) -> list[Callable[[int], object]]:
    """The three searches timed, as MemoryReader sends them (dense_search, fact_filter)."""

    def unfiltered(n: int) -> object:
        query = table.search(probes[n]).distance_type("cosine")
        query = query.nprobes(ALL_PARTITIONS) if ivf_flat else query.bypass_vector_index()
        return query.select([*columns, "_distance"]).limit(k).to_arrow().to_pylist()

    def bounded(n: int) -> object:
        where = fact_filter(BOOK, CHARACTERS[n % len(CHARACTERS)])
        return dense_search(table, probes[n], where, k, columns, ivf_flat=ivf_flat)

    def bounded_as_of(n: int) -> object:
        where = fact_filter(BOOK, CHARACTERS[n % len(CHARACTERS)], cut)
        return dense_search(table, probes[n], where, k, columns, ivf_flat=ivf_flat)

    return [unfiltered, bounded, bounded_as_of]


def run_size(size: int, args: argparse.Namespace, print_header: bool) -> dict[str, float]:
    """Build one synthetic table, time the searches; returns the p50s (ms) the targets are checked on."""
    import lancedb

    folder = tempfile.mkdtemp(prefix="reveriemem-retrieval-bench-")
    try:
        uri = str(Path(folder) / "lancedb")
        seconds = build(uri, size, args.fts)
        table = lancedb.connect(uri).open_table("facts")
        columns = [n for n in table.schema.names if n != "vector"]
        rng = np.random.default_rng(7)
        probes = rng.standard_normal((args.queries + args.warmup, EMBEDDING_DIM), dtype=np.float32)
        probes /= np.linalg.norm(probes, axis=1, keepdims=True)
        cut = size * STEP // 2
        share = table.count_rows(fact_filter(BOOK, CHARACTERS[0])) / size
        print(f"{size:,} facts written in {seconds:.1f} s; {CHARACTERS[0]} sees {share:.1%}")
        if print_header:
            print(HEADER)
        bounded_p50 = []
        for label in ("none", "scalar", "scalar+IVF_FLAT"):
            ivf_flat = label.endswith("IVF_FLAT")
            if label != "none":
                began = time.perf_counter()
                prepare_fact_indexes(table, vector_min_rows=0 if ivf_flat else size + 1)
                print(f"{'':>9} | indexes for '{label}' built in {time.perf_counter() - began:.1f} s")
            # a flat scan of a million rows takes seconds: fewer queries there
            count = args.queries if ivf_flat or size < FEW_QUERIES_FROM else min(args.queries, 20)
            searches = _queries(table, columns, probes, cut, args.k, ivf_flat)
            figures = [measure(f, count, args.warmup if count == args.queries else 2) for f in searches]
            bounded_p50.append(figures[1][0])
            print(f"{size:>9,} | {label:<15} | " + " | ".join(f"{a:6.1f} / {b:6.1f}" for a, b in figures)
                  + ("" if count == args.queries else f"  ({count} queries)"))
        flat = _queries(table, columns, probes, cut, args.k, False)[2]
        indexed = _queries(table, columns, probes, cut, args.k, True)[2]
        count = args.queries if size < FEW_QUERIES_FROM else min(args.queries, 20)
        same = sum(_ids(flat(n)) == _ids(indexed(n)) for n in range(count))
        print(f"{'':>9} | IVF_FLAT probed in every partition returned the flat scan's top {args.k} "
              f"(bounded+as_of) for {same} of {count} queries")

        embedder = HashEmbedder()
        texts = [" ".join(f"w{(n * 37 + j) % len(WORDS):04d}" for j in range(6)) for n in range(args.queries + 20)]
        figures_ms = {"lancedb_bounded": min(bounded_p50)}
        reader = MemoryReader(BOOK, CHARACTERS[0], embedder, uri=uri, hybrid=False)
        gc.collect()
        began = time.perf_counter()
        loaded = reader.fact_pool()
        load = time.perf_counter() - began
        if loaded is None:
            raise SystemExit(f"{CHARACTERS[0]}'s bounded set is above the pool cap: no in-memory pool to time.")
        pool: FactPool = loaded
        print(f"{'':>9} | in-memory pool of {CHARACTERS[0]}: {len(pool):,} facts, {pool.nbytes / 2**20:.0f} MB, "
              f"read once from LanceDB (filter inside the query) in {load:.2f} s")
        def pool_bounded(n: int) -> object:
            return pool.search(probes[n], args.k)

        def pool_bounded_as_of(n: int) -> object:
            return pool.search(probes[n], args.k, cut)

        figures = [measure(f, args.queries, args.warmup) for f in (pool_bounded, pool_bounded_as_of)]
        figures_ms["pool_search"] = figures[0][0]
        print(f"{size:>9,} | {'in-memory pool':<15} | {'-':>15} | "
              + " | ".join(f"{a:6.1f} / {b:6.1f}" for a, b in figures) + f"  ({CHARACTERS[0]} only)")
        exact = 0
        for n in range(args.queries):
            as_of = cut if n % 2 else None
            where = fact_filter(BOOK, CHARACTERS[0], as_of)
            expected = _ids(dense_search(table, probes[n], where, args.k, columns, ivf_flat=True))
            exact += _ids(pool.search(probes[n], args.k, as_of)) == expected
        print(f"{'':>9} | the pool returned LanceDB's bounded top {args.k} (IVF_FLAT, every partition; half with "
              f"as_of) for {exact} of {args.queries} queries")

        through = MemoryReader(BOOK, CHARACTERS[0], embedder, uri=uri, hybrid=False, pool="lancedb")
        def retrieve(reader: MemoryReader) -> Callable[[int], object]:
            return lambda n: reader.vis_retrieve([texts[n]], k=args.k)

        # timed in turn, probe by probe, so that both see the same load
        timed = measure_alternately([retrieve(through), retrieve(reader)], args.queries, args.warmup)
        for name, (p50, p95) in zip(("pool=lancedb (per-query LanceDB)", "pool=memory (pool loaded)"), timed):
            print(f"{size:>9,} | MemoryReader.vis_retrieve, one probe, dense, {name}: {p50:.1f} / {p95:.1f}")
        figures_ms["vis_retrieve"] = timed[1][0]
        if args.fts:
            began = time.perf_counter()
            hybrid = MemoryReader(BOOK, CHARACTERS[0], embedder, uri=uri)
            hybrid.vis_retrieve([texts[0]], k=args.k)
            print(f"{'':>9} | the pool read and its lexical (BM25) index built in {time.perf_counter() - began:.1f} s")
            hybrid_lancedb = MemoryReader(BOOK, CHARACTERS[0], embedder, uri=uri, pool="lancedb")
            timed = measure_alternately([retrieve(hybrid_lancedb), retrieve(hybrid)], args.queries, args.warmup)
            for name, (p50, p95) in zip(("pool=lancedb", "pool=memory"), timed):
                print(f"{size:>9,} | MemoryReader.vis_retrieve, one probe, hybrid dense + FTS, {name}: "
                      f"{p50:.1f} / {p95:.1f}")
        return figures_ms
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def demo_recall(embedder_name: str, k: int) -> None:
    """Dense vs hybrid VIS-RETRIEVE on the demo story's gold facts (offline build, in a scratch home)."""
    home = tempfile.mkdtemp(prefix="reveriemem-recall-")
    os.environ["REVERIEMEM_HOME"] = home
    os.environ.pop("DAGSTER_HOME", None)
    os.environ["REVERIEMEM_LM"] = "none"
    os.environ["REVERIEMEM_EMBEDDER"] = embedder_name
    try:
        _demo_recall(embedder_name, k)
    finally:
        shutil.rmtree(home, ignore_errors=True)


def _demo_recall(embedder_name: str, k: int) -> None:
    import re

    from click.testing import CliRunner

    from reveriemem.core.demo import DEMO_SLUG, demo_gold
    from reveriemem.core.embeddings import embedder_for_book
    from reveriemem.core.storage import MemoryStore
    from reveriemem_dagster.cli import main as cli

    result = CliRunner().invoke(cli, ["demo", "--lm", "none"])
    if result.exit_code != 0:
        raise SystemExit(result.output)
    rows = MemoryStore.for_home().read("facts", PartitionRef(DEMO_SLUG)).drop("vector").to_dicts()

    def norm(text: str) -> str:
        return re.sub(r"\W+", " ", text.lower()).strip()

    def relevant(evidence: str, character: str) -> set[str]:
        """Evidence units sharing six consecutive words with the gold quotation, known to the character."""
        words = norm(evidence).split()
        grams = {" ".join(words[i:i + 6]) for i in range(max(1, len(words) - 5))}
        return {r["fact_id"] for r in rows if character in r["visibility"] and any(g in norm(r["text"]) for g in grams)}

    gold = demo_gold()
    facts = {f["id"]: f for f in gold["facts"]}
    slug = {name: name.lower().replace(" ", "-") for f in gold["facts"] for name in f["visibility"]}
    probes: list[tuple[str, str, str, set[str]]] = []
    for item in gold["items"]:
        if item["split"] == "KRf":
            character = item["character"].lower().replace(" ", "-")
            probes.append(("question", item["question"], character, relevant(facts[item["fact"]]["evidence"], character)))
    for fact in gold["facts"]:
        text = " ".join(x for x in (fact["subject"], fact["predicate"], fact["object"] or "") if x)
        for name in fact["visibility"]:
            probes.append(("subject-predicate-object", text, slug[name], relevant(fact["evidence"], slug[name])))
    embedder = embedder_for_book(DEMO_SLUG, embedder_name)
    readers: dict[tuple[str, bool], MemoryReader] = {}
    ranks: dict[tuple[str, bool], list[int]] = {}
    for kind, text, character, wanted in probes:
        if not wanted:
            continue  # the offline build does not make this fact visible to the character
        for hybrid in (False, True):
            key = (character, hybrid)
            if key not in readers:
                readers[key] = MemoryReader(DEMO_SLUG, character, embedder, hybrid=hybrid)
            found = [r["fact_id"] for r in readers[key].vis_retrieve([text], k=k)]
            ranks.setdefault((kind, hybrid), []).append(next((i for i, f in enumerate(found) if f in wanted), k))
    print(f"demo story, offline build, {embedder_name}: is the gold fact's evidence unit among the top k?")
    for (kind, hybrid), found in sorted(ranks.items()):
        hits = np.array(found)
        print(f"  {kind:<24} n={len(hits):3d} {'hybrid' if hybrid else 'dense ':<6} hit@3 {np.mean(hits < 3):.2f} "
              f"hit@{k} {np.mean(hits < k):.2f} MRR@{k} {np.mean(np.where(hits < k, 1 / (hits + 1), 0)):.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--fts", action="store_true", help="also time hybrid vis_retrieve (random-word text)")
    parser.add_argument("--demo-recall", metavar="EMBEDDER", default="",
                        help="instead: dense vs hybrid retrieval quality on the demo story's gold facts")
    parser.add_argument("--library", action="store_true",
                        help="instead: the library case, 1,000 books in one facts table (benchmarks/retrieval_library.py)")
    args, rest = parser.parse_known_args()
    if args.library:
        from benchmarks.retrieval_library import main as library

        library([a for a in sys.argv[1:] if a != "--library"])  # all its options, --queries and --k too
        return
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    if args.demo_recall:
        demo_recall(args.demo_recall, args.k)
        return

    import lancedb

    print(f"machine: {os.cpu_count()} cores, {cpu_model()}, {platform.system()} {platform.machine()}, "
          f"Python {platform.python_version()}, lancedb {lancedb.__version__}")
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"k = {args.k}, {args.queries} queries after {args.warmup} warm-up; latency in ms (p50 / p95)\n")
    print("targets: " + ", ".join(f"p50 <= {t:.0f} ms at {n:,} facts" for n, t in TARGETS_MS.items())
          + " (MemoryReader.vis_retrieve, dense, one probe)\n")
    verdicts = []
    for number, size in enumerate(int(s) for s in args.sizes.split(",")):
        figures = run_size(size, args, print_header=number == 0)
        target = TARGETS_MS.get(size)
        if target is not None:
            for name, key in (("MemoryReader.vis_retrieve dense (pool loaded)", "vis_retrieve"),
                              ("in-memory bounded search", "pool_search"),
                              ("LanceDB bounded query (best index)", "lancedb_bounded")):
                p50 = figures[key]
                verdicts.append(f"{size:,} facts: {name} p50 {p50:.1f} ms against a target of {target:.0f} ms, "
                                f"{'met' if p50 <= target else 'MISSED'}")
        print()
    for line in verdicts:
        print(line)
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
