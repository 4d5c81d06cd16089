"""Episodic memory (layer 3): eventualities with importance and time bounds, a context of
"true now" facts, hash indexes by episode and predicate pattern, and retrieval by
recency, importance and salience, on the hyperbolic :class:`hypermem.Memory`.

``Memory`` here is the design document's name for one episodic memory
(:class:`EpisodicMemory`), not the hyperbolic store :class:`hypermem.Memory`.

Example::

    >>> from hypermem.episodic import MemoryStorage
    >>> s = MemoryStorage()
    >>> _ = s.instantiate(["((^you reply-to.v E1) ** E3)", "((^you reply-to.v E1) ** E4)"])
    >>> [m.episodes for m in s.get_matching("reply-to.v")]
    [['E3', 'E4']]
"""

from .episodic_memory import DEFAULT_TELIC_PREDICATES, EpisodicMemory
from .eventuality import CHARACTERIZES, Eventuality
from .keys import ArgKey, lookup_key, predicate_of, wff_keys
from .matching import match, matches, substitute
from .negation import NOT, negated
from .sexpr import (
    SExpr,
    SExprSyntaxError,
    format_sexpr,
    has_variables,
    is_symbol,
    is_variable,
    parse_sexpr,
    quote_symbol,
    to_sexpr,
    unquote_symbol,
)
from .storage import MemoryStorage

Memory = EpisodicMemory
"""The design document's name for :class:`EpisodicMemory` (``eta.memory.Memory``), kept as an
alias for code written against it; this package's modules say ``EpisodicMemory``."""

__all__ = [
    "ArgKey",
    "CHARACTERIZES",
    "DEFAULT_TELIC_PREDICATES",
    "EpisodicMemory",
    "Eventuality",
    "Memory",
    "MemoryStorage",
    "NOT",
    "SExpr",
    "SExprSyntaxError",
    "format_sexpr",
    "has_variables",
    "is_symbol",
    "is_variable",
    "lookup_key",
    "match",
    "matches",
    "negated",
    "parse_sexpr",
    "predicate_of",
    "quote_symbol",
    "substitute",
    "to_sexpr",
    "unquote_symbol",
    "wff_keys",
]
