"""Text as a user typed it, made a string every later step can encode: `well_formed`.

Bytes that are not UTF-8 reach Python from a command line or a terminal as lone surrogates
(surrogateescape: b"\\xff" -> "\\udcff"), and JSON may spell one ("\\ud800"); no encoder or tokenizer
takes them. The command line, the chat, the server and the embedder all read text through here.
"""

from __future__ import annotations


def well_formed(text: str) -> str:
    """`text` with every lone surrogate replaced by U+FFFD; a surrogate pair written as two code points is
    joined into the one character it spells."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text
