"""ReverieMem: perspective-bounded memory for book-based character agents."""

__version__ = "0.1.0"
