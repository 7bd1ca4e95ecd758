"""Storage in one place, the build manifest, and embedders of any dimension (`hash:DIM`)."""

import pytest
from click.testing import CliRunner

from reveriemem.core.demo import DEMO_SLUG
from reveriemem.core.embeddings import embedder_for_book, open_embedder
from reveriemem.core.errors import EmbedderMismatchError, StorageError
from reveriemem.core.schemas import FACTS, facts_schema, schema_for, vector_dim
from reveriemem.core.storage import BuildManifest, MemoryStore, PartitionRef
from reveriemem_dagster.cli import main


def _fact(book: str, dim: int) -> dict:
    row = {name: None for name in FACTS.names}
    row.update(book=book, character="", fact_id=f"{book}-1", text="the lamp", vector=[1.0] + [0.0] * (dim - 1))
    return row


def test_a_store_configured_once_is_where_every_table_and_manifest_lives(tmp_path, isolated_home):
    default = MemoryStore.for_home()
    assert default.home == isolated_home.resolve() and default.uri == str(isolated_home.resolve() / "lancedb")
    other = MemoryStore.for_home(tmp_path / "elsewhere")
    other.write("facts", PartitionRef("b"), [_fact("b", 384)])
    other.write_manifest(BuildManifest.now("b", "none", "hash-384", 384))
    assert other.read("facts", PartitionRef("b")).height == 1
    assert other.stored_rows("facts", PartitionRef("b")) == 1 and other.stored_rows("entities", PartitionRef("b")) is None
    assert other.manifest("b").embedder == "hash-384"  # type: ignore[union-attr]
    assert default.manifest("b") is None
    with pytest.raises(StorageError):
        default.read("facts", PartitionRef("b"))


def test_vector_schemas_take_the_embedders_dimension():
    assert vector_dim(FACTS) == 384 and vector_dim(facts_schema(768)) == 768
    assert vector_dim(schema_for("episodes", 768)) == 768 and vector_dim(schema_for("entities")) is None
    assert open_embedder("hash").dim == 384 and open_embedder("hash").name == "hash-384"
    wide = open_embedder("hash:768")
    assert wide.dim == 768 and wide.embed(["the lamp"]).shape == (1, 768)
    assert open_embedder(wide.name).dim == 768  # a manifest's name opens the same embedder again


def test_a_lance_table_takes_a_new_dimension_only_when_no_other_book_is_in_it(tmp_path):
    store = MemoryStore.for_home(tmp_path)
    store.write("facts", PartitionRef("a"), [_fact("a", 384)])
    store.write("facts", PartitionRef("a"), [_fact("a", 768)])  # the same book rebuilt with a wider embedder
    assert vector_dim(store.lance.open("facts").schema) == 768
    store.write("facts", PartitionRef("b"), [])  # no rows fit any table
    with pytest.raises(StorageError, match="768-d vectors of other books"):
        store.write("facts", PartitionRef("b"), [_fact("b", 384)])


def test_a_memory_asked_with_another_embedder_says_so_in_one_sentence(built_demo):
    manifest = MemoryStore.for_home().manifest(DEMO_SLUG)
    assert manifest is not None and (manifest.embedder, manifest.dim) == ("hash-384", 384)
    assert manifest.code_version.startswith("reveriemem")
    assert embedder_for_book(DEMO_SLUG).name == "hash-384"
    with pytest.raises(EmbedderMismatchError):
        embedder_for_book(DEMO_SLUG, "hash:768")
    result = CliRunner().invoke(main, ["ask", DEMO_SLUG, "Mara", "Where is the lamp?", "--embedder", "hash:768"])
    assert result.exit_code == 1
    message = result.output.strip()
    assert "built with the embedder hash-384 (384-d)" in message and "hash-768" in message
    assert message.count("\n") == 0 and "Traceback" not in message


def test_an_unbuilt_book_is_refused_in_one_sentence():
    with pytest.raises(StorageError, match="not built yet"):
        embedder_for_book("never-built")


@pytest.mark.slow
def test_the_demo_builds_and_answers_with_a_768_d_embedder(monkeypatch):
    monkeypatch.setenv("REVERIEMEM_EMBEDDER", "hash:768")
    result = CliRunner().invoke(main, ["demo", "--lm", "none"])
    assert result.exit_code == 0, result.output
    manifest = MemoryStore.for_home().manifest(DEMO_SLUG)
    assert manifest is not None and (manifest.embedder, manifest.dim) == ("hash-768", 768)
    assert vector_dim(MemoryStore.for_home().read("facts", PartitionRef(DEMO_SLUG))) == 768
    result = CliRunner().invoke(main, ["ask", DEMO_SLUG, "Mara", "Where did you fill the Horn Lamp from?", "--lm", "none"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("Mara Quell: ") and ("Facts used:" in result.output or "Facts retrieved:" in result.output)
