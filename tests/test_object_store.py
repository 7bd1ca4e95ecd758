"""One storage URI for every writer: the store's locations, S3 settings from the environment, the shared registry."""

from __future__ import annotations

from pathlib import Path

import pytest

from reveriemem.core.errors import StorageError
from reveriemem.core.object_store import Files, S3Settings, is_remote, lance_storage_options
from reveriemem.core.storage import BuildManifest, MemoryStore, PartitionRef
from tests.conftest import write_book


def test_only_paths_and_s3_uris_name_a_store() -> None:
    assert not is_remote("/data/store") and not is_remote(Path("s3-lookalike")) and not is_remote("file:///x")
    assert is_remote("s3://bucket/prefix")
    with pytest.raises(StorageError, match="not supported"):
        is_remote("gs://bucket/prefix")


def test_s3_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REVERIEMEM_S3_ENDPOINT", "http://127.0.0.1:9000")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    options = lance_storage_options("s3://bucket/reveriemem/lancedb")
    assert options == {"region": "eu-west-1", "endpoint": "http://127.0.0.1:9000", "allow_http": "true",
                       "aws_access_key_id": "key", "aws_secret_access_key": "secret"}
    assert lance_storage_options("/local/lancedb") is None
    filesystem = S3Settings.from_env().filesystem()
    assert filesystem.region == "eu-west-1"


def test_files_replace_whole_files(tmp_path: Path) -> None:
    files = Files(tmp_path / "root")
    assert files.read_bytes("a/b.json") is None and not files.exists("a/b.json")
    files.write_bytes("a/b.json", b"one")
    files.write_bytes("a/b.json", b"two")
    assert files.read_bytes("a/b.json") == b"two"
    assert sorted(p.name for p in (tmp_path / "root" / "a").iterdir()) == ["b.json"]  # no staging file left


def test_a_store_uri_holds_tables_and_manifests_apart_from_the_data_home(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REVERIEMEM_STORE", str(tmp_path / "shared"))
    store = MemoryStore.for_home()
    assert store.uri == str(tmp_path / "shared" / "lancedb")
    store.write("scene_rosters", PartitionRef("b"), [])
    assert store.stored_rows("scene_rosters", PartitionRef("b")) == 0
    assert (tmp_path / "shared" / "parquet" / "scene_rosters" / "book=b" / "part.parquet").exists()
    store.write_manifest(BuildManifest.now("b", "none", "hash-384", 384))
    assert MemoryStore.for_home().manifest("b").dim == 384  # type: ignore[union-attr]
    assert (tmp_path / "shared" / "manifests" / "b.json").exists()
    assert not (Path(store.home) / "parquet").exists()


def test_a_worker_takes_a_book_registered_elsewhere_from_the_store(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from reveriemem.core.registry import load_book, prepare_book, remove_book
    from reveriemem.core.registry import write_book as register

    monkeypatch.setenv("REVERIEMEM_STORE", str(tmp_path / "shared"))
    characters = tmp_path / "tale.yaml"
    characters.write_text("characters:\n  - name: Ada\n", encoding="utf-8")
    body = "Ada walked to the harbour and spoke with the keeper of the light about the storm. " * 5
    book, _ = prepare_book(write_book(tmp_path, body), characters)
    register(book, home=tmp_path / "launcher")

    worker_home = tmp_path / "worker"
    taken = load_book(book.slug, home=worker_home)
    assert taken.text == book.text and [c.name for c in taken.characters] == ["Ada"]
    assert (worker_home / "books" / book.slug / "source.txt").exists()

    remove_book(book.slug, home=tmp_path / "launcher")
    assert not (tmp_path / "shared" / "books" / book.slug / "book.json").exists()
