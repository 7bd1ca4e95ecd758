"""Domain exceptions. Each carries one sentence a user can act on; the CLI
prints it and exits non-zero."""

from __future__ import annotations


class ReverieMemError(Exception):
    """Base class of every error the project raises on purpose."""


class BookInputError(ReverieMemError):
    """A book file is missing, empty, binary or cannot be decoded."""


class CharacterFileError(ReverieMemError):
    """A character file is malformed or does not fit its book."""


class RegistryError(ReverieMemError):
    """A book is unknown, already registered, or its registration is damaged."""


class ModelUnavailableError(ReverieMemError):
    """The configured language or embedding model cannot be reached or loaded."""


class ModelOutputError(ReverieMemError):
    """The model kept returning output that does not parse, after retries."""


class StorageError(ReverieMemError):
    """Reading or writing the project's data home failed."""


class EmbedderMismatchError(ReverieMemError):
    """A memory is asked with another embedder than the one that built it."""


# The note `build_book` adds to an exception that ended a build: the step and partition it stopped in.
FAILED_STEP_NOTE = "reveriemem-build-step: "
