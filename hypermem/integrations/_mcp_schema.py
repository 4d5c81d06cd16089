"""What the MCP tools' schemas and descriptions tell a client: this server's own limits, the
score's real composition, plain text (no docstring indentation, no RST quotes)."""

from __future__ import annotations

import inspect
from typing import Annotated, Any

from pydantic import Field

from ..store.lexical import FAMILY_SHARE, NEIGHBOUR_SHARE
from ..store.nearest_floor import FLOOR_MIN_MEMORIES

PARENT = ('The id of a memory this one belongs under, or "auto": the server picks it (its hierarchy encoder, or the '
          "vote of the nearest memories' parents once the store holds a tree). A text unlike every filed memory "
          f"stays a root only once the store holds {FLOOR_MIN_MEMORIES} filed memories (memories with a parent or "
          "children), which set its nearest-neighbour floor; below that there is no floor, and even an unrelated "
          "text is filed under the tree there is")


def plain(doc: str) -> str:
    """A docstring as a tool description: one paragraph (:func:`inspect.cleandoc`, lines joined),
    without reStructuredText's double backquotes."""
    return " ".join(inspect.cleandoc(doc).split()).replace("``", "")


def _sized(kind: Any, description: str, limit: int) -> Any:
    """``kind`` whose JSON schema says ``maxLength: limit`` (checked by the tool itself, with a
    message that says what to do: :func:`.mcp_app.check_text`)."""
    return Annotated[kind, Field(description=description, json_schema_extra={"maxLength": limit})]


def limited_args(max_text: int, max_meta: int) -> dict[str, Any]:
    """The argument types whose limits are this server's (``max_text``, ``max_meta``): schema
    and description name the value a call is held to."""
    meta = f"at most {max_meta} characters as JSON"
    return {
        "text": _sized(str, f"The memory's text: one self-contained fact, at most {max_text} characters", max_text),
        "query": _sized(str, f"What to look for, in words (at most {max_text} characters)", max_text),
        "new_text": _sized(str | None, f"New text (re-embedded; at most {max_text} characters)", max_text),
        "meta": Annotated[dict[str, Any] | None, Field(description='Metadata: a JSON object, e.g. {"kind": '
                                                       f'"preference"}}, that recall\'s filters can match ({meta})')],
        "new_meta": Annotated[dict[str, Any] | None, Field(description=f"New metadata (replaces the old; {meta})")],
    }


def recall_description(memory: Any) -> str:
    """``recall``'s description, with the score as ``memory`` composes it: with a keyword term
    (``hybrid`` > 0, a semantic embedder's default 0.3, :mod:`hypermem.store.lexical`) a score
    can be positive, ``-d + time + hybrid (l + nu l_neighbour + rho l_family)``, each ``l`` <= 1."""
    hybrid = float(getattr(memory, "hybrid", 0) or 0)
    depth = float(getattr(memory, "depth_bias", 0) or 0)
    terms = "minus the memory's distance to the query, plus a time term (0 or less)"
    if depth:
        terms += f", plus {depth:g} x its depth"
    if hybrid > 0:
        top = hybrid * (1 + NEIGHBOUR_SHARE + FAMILY_SHARE)
        terms += (f", plus a keyword bonus of {hybrid:g} x (its BM25 match of the query's words + {NEIGHBOUR_SHARE:g}"
                  f" x its best adjacent sibling's + {FAMILY_SHARE:g} x its parent family's, each at most 1), up to "
                  f"{top:.2f}: a score can be positive")
    elif not depth:
        terms += ", so 0 or less (this store has no keyword term)"
    return ("Recall the k memories that best match the query, best first. score: higher is better; compare scores "
            f"within one answer. In nearest mode it is {terms}; for ancestors without root, about 0-1. Memories "
            "whose valid_until is before the query time are left out unless include_expired. warnings (when "
            "present) say why a result may be empty, e.g. a misspelled metadata key.")
