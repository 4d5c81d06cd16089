"""Formulas of episodic memory: S-expressions, eventualities, keys and pattern matching."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hypermem.episodic import (
    ArgKey,
    Eventuality,
    SExprSyntaxError,
    format_sexpr,
    has_variables,
    is_variable,
    lookup_key,
    match,
    matches,
    negated,
    parse_sexpr,
    predicate_of,
    substitute,
    to_sexpr,
    wff_keys,
)

# ---------------------------------------------------------------------- S-expressions


@pytest.mark.parametrize("text, expr", [
    ("(Block1 between.p ?x Block2)", ("Block1", "between.p", "?x", "Block2")),
    ("((^you reply-to.v E1) ** E3)", (("^you", "reply-to.v", "E1"), "**", "E3")),
    ("  between.p  ", "between.p"),
    ("()", ()),
    ("(a (b (c d)) ())", ("a", ("b", ("c", "d")), ())),
    ('(^me say-to.v ^you "hello (there)" ?)', ("^me", "say-to.v", "^you", '"hello (there)"', "?")),
    ("(a\n\t b)", ("a", "b")),
    ('(say "two\\\nlines" "a \\"quote\\"")', ("say", '"two\\\nlines"', '"a \\"quote\\""')),
])
def test_parse_and_format_round_trip(text, expr):
    assert parse_sexpr(text) == expr
    assert parse_sexpr(format_sexpr(expr)) == expr


def test_format_accepts_lists_and_prints_brackets():
    assert format_sexpr(["Block1", "between.p", ["?x", "y"], "Block2"]) == "(Block1 between.p (?x y) Block2)"
    assert to_sexpr(["a", ["b"]]) == ("a", ("b",))


@pytest.mark.parametrize("text", ["", "   ", "(a b", "((a) b", "a)", "(a))", "(a) b", "a b", '"abc', '(a "b)'])
def test_malformed_text_is_a_syntax_error(text):
    with pytest.raises(SExprSyntaxError):
        parse_sexpr(text)
    assert issubclass(SExprSyntaxError, ValueError)


def test_bad_expressions_are_refused():
    with pytest.raises(TypeError, match="got int"):
        to_sexpr(("a", 3))
    with pytest.raises(TypeError):
        parse_sexpr(b"(a)")
    with pytest.raises(ValueError, match="not a symbol"):
        format_sexpr(("a b", "c"))
    with pytest.raises(ValueError, match="not a symbol"):
        to_sexpr("")


def test_variables():
    assert is_variable("?x") and is_variable("?ep2")
    assert not is_variable("?")  # the question mark of ULF is a plain symbol
    assert not is_variable("x?") and not is_variable(("?x",))
    assert has_variables(("a", ("b", ("?c",))))
    assert not has_variables(("a", ("b", "?")))


symbols = st.sampled_from(["a", "b", "between.p", "?x", "?y", "^you", "E1", "**", "?", '"hi there"', "not"])
sexprs = st.recursive(symbols, lambda inner: st.lists(inner, max_size=4).map(tuple), max_leaves=20)


@settings(max_examples=200, deadline=None)
@given(sexprs)
def test_round_trip_property(expr):
    assert parse_sexpr(format_sexpr(expr)) == expr
    assert matches(expr, substitute(expr, {}))  # a formula matches itself (its variables bind to themselves)


# ---------------------------------------------------------------------- eventualities


def test_eventuality_from_the_document_example():
    e = Eventuality.from_text("((^you reply-to.v E1) ** E3)")
    assert e.wff == ("^you", "reply-to.v", "E1") and e.ep == "E3"
    assert str(e) == "((^you reply-to.v E1) ** E3)"
    assert Eventuality.from_sexpr(e.to_sexpr()) == e
    assert Eventuality(["^you", "reply-to.v", "E1"], "E3") == e  # lists become tuples; hashable
    assert len({e, Eventuality(("^you", "reply-to.v", "E1"), "E3")}) == 1


@pytest.mark.parametrize("text, error", [
    ("(^you reply-to.v E1)", ValueError),
    ("((a b) ** (E3))", ValueError),
    ("((a b) * E3)", ValueError),
    ("((a b) ** E3", SExprSyntaxError),
])
def test_eventuality_bad_text(text, error):
    with pytest.raises(error):
        Eventuality.from_text(text)


def test_eventuality_bad_fields():
    with pytest.raises(ValueError, match="episode symbol"):
        Eventuality(("a", "b"), ("E1",))
    with pytest.raises(ValueError, match="episode symbol"):
        Eventuality(("a", "b"), "E 1")
    with pytest.raises(TypeError):
        Eventuality(("a", 1.5), "E1")


# ---------------------------------------------------------------------- keys


def design(key):
    """The design document's tuple form of a key (an ArgKey drops the None padding)."""
    return key.as_tuple() if isinstance(key, ArgKey) else key


def test_keys_exactly_as_the_document_lists():
    assert [design(k) for k in wff_keys(("Block1", "between.p", "Block2", "Block3"))] == [
        "between.p",
        ("Block1", "between.p", None, None),
        (None, "between.p", "Block2", None),
        (None, "between.p", None, "Block3"),
    ]
    assert wff_keys(("^you", "smile.v")) == ["smile.v", ("^you", "smile.v")]
    assert wff_keys(("raining.v",)) == ["raining.v"]
    assert wff_keys("raining.v") == ["raining.v"]
    w = ("Block1", "on.p", "Table")
    assert wff_keys(("not", w)) == [w, ("not", w)]
    assert predicate_of(("^you", "reply-to.v", "E1")) == "reply-to.v"
    assert negated(("not", w)) == w and negated(w) is None


def test_lookup_key_prefers_a_ground_argument():
    assert design(lookup_key(("Block1", "between.p", "?x", "Block2"))) == ("Block1", "between.p", None, None)
    assert design(lookup_key(("?a", "between.p", "?x", "Block2"))) == (None, "between.p", None, "Block2")
    assert lookup_key(("?a", "between.p", "?x", "Block2")) == ArgKey(4, "between.p", 3, "Block2")
    assert lookup_key(("Block1", "smile.v")) == ("Block1", "smile.v")
    assert lookup_key(("?a", "between.p", ("?x", "y"), "?b")) == "between.p"
    assert lookup_key(("?a", "?p", "Block2")) is None
    assert lookup_key("between.p") == "between.p"


# ---------------------------------------------------------------------- matching


def test_repeated_variables_bind_consistently():
    pattern = ("?x", "between.p", "?y", "?x")
    assert match(pattern, ("A", "between.p", "B", "A")) == {"?x": "A", "?y": "B"}
    assert match(pattern, ("A", "between.p", "B", "C")) is None
    assert match(("?x", "likes.v", "?x"), (("the.d", "cat.n"), "likes.v", ("the.d", "cat.n"))) == \
        {"?x": ("the.d", "cat.n")}


def test_nested_variables_at_any_depth():
    wff = ("^me", "say-to.v", "^you", ("that", ("Block1", ("on.p", ("the.d", "Table")))))
    pattern = ("?s", "say-to.v", "?h", ("that", ("?b", ("on.p", ("the.d", "?t")))))
    assert match(pattern, wff) == {"?s": "^me", "?h": "^you", "?b": "Block1", "?t": "Table"}
    assert match(("?s", "say-to.v", "?h", ("that", ("?b", ("under.p", "?t")))), wff) is None
    # a variable binds a whole sub-formula; repeated deep inside must agree
    assert match(("?a", "?p", ("?x", ("?x",))), ("A", "P", ("k", ("k",)))) == {"?a": "A", "?p": "P", "?x": "k"}
    assert match(("?a", "?p", ("?x", ("?x",))), ("A", "P", ("k", ("j",)))) is None


def test_matching_is_structural_and_one_way():
    assert match(("?x", "b"), ("a", "b", "c")) is None  # lengths differ
    assert match(("?x", "b"), "ab") is None
    assert match("?x", ("a", "b")) == {"?x": ("a", "b")}
    assert match(("a", "?y"), ("a", "?z")) == {"?y": "?z"}  # the formula's ?z is literal
    assert match(("a", "b"), ("a", "?z")) is None
    assert match(("?x", "b"), ("a", "b"), {"?x": "c"}) is None  # extends given bindings
    assert substitute(("?x", "b", ("?y",)), {"?x": ("q",), "?y": "r"}) == (("q",), "b", ("r",))


def test_deep_formulas_do_not_hit_the_recursion_limit():
    deep = "leaf"
    for _ in range(5000):
        deep = ("wrap", deep)
    pattern = deep[:1] + ("?rest",)
    assert match(pattern, deep) == {"?rest": deep[1]}
