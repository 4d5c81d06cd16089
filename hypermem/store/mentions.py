r"""Memories that a text names: the mention term of the neighbours' vote.

A text often names where it belongs.  A dictionary definition names its genus ("kookaburra:
Australian *kingfisher* having a loud cackling cry"), a compound's head word is often its
hypernym ("absolute *ceiling*": the substring-inclusion rule of taxonomy induction, e.g.
Bordea et al., "SemEval-2016 Task 13: Taxonomy Extraction Evaluation", where it was a strong
baseline), and an agent's note names the thing it is about ("the *dishwasher* filter needs
rinsing every month").  A memory's **title** is its text up to the first title separator
(:data:`SEPARATORS`: ``": "`` as in "lemma: definition", or a spaced dash as in a manual page's
NAME line "strace - trace system calls and signals"; the whole text when there is none) written
as BM25 terms (:func:`~hypermem.retrieval.bm25.tokenize`:
lower case, stop words dropped, Porter stems, so "trees" names "tree" and "the dishwasher"
names "dishwasher") when that is 1 to :data:`TITLE_TERMS` terms (and at most
:data:`TITLE_CHARS` characters); longer texts have no title.
A text **mentions** a memory when the memory's title occurs as a run of the text's terms,
other than the text's own title (a word's other senses are not its parents).

The vote (:func:`~hypermem.store.vote.neighbour_vote`) adds :data:`MENTION_SHARE` ``mu`` to
the share of each memory the text mentions, so that a mentioned memory that its neighbours
also vote for comes first::

    score(c) = vote(c) / sum_n w_n + mu [text mentions c]

:class:`Mentions` keeps the titles of a store's memories by their terms and follows the
store's adds, rewrites and removals through the record table's journal, as the lexical index
does (:mod:`hypermem.store.lexical`).
"""

from __future__ import annotations

from ..retrieval.bm25 import STOPWORDS, tokenize, words

__all__ = ["MENTION_SHARE", "SEPARATORS", "TITLE_CHARS", "TITLE_TERMS", "Mentions", "add_title", "first_mentioned",
           "mentioned", "title_end", "title_terms"]

TITLE_TERMS = 4
"""The most terms a title has (a longer text names nothing)."""
TITLE_CHARS = 80
"""The longest title in characters (a longer head is not read further: a large store's titles
are found in one pass that skips its long texts)."""
SEPARATORS = (": ", " - ", " \u2013 ", " \u2014 ")
"""What ends a title: a colon, or a hyphen, en dash or em dash with a space each side (the
earliest of them in the text).  An unspaced hyphen ("able-bodied", "backend-buckets") is part
of a word.  A manual page's NAME line ("strace - trace system calls") then names its title the
way a "lemma: definition" text does (measured in benchmarks/RESULTS.md, "walk 69")."""
MENTION_SHARE = 0.1
"""``mu``: the share a mentioned memory adds to its vote share, chosen on the validation nouns of
WordNet's unseen-entity split (mu 0 / 0.1 / 0.15 / 0.2, the best mean within-2-hops rate over the
ball and the twin on definitions and the ball on lemmas; benchmarks/RESULTS.md, "names")."""


def title_end(text: str) -> int:
    """Where ``text``'s title ends: the earliest :data:`SEPARATORS` within the first
    :data:`TITLE_CHARS` characters (a farther one is past any title), else ``len(text)``."""
    end = len(text)
    for sep in SEPARATORS:
        cut = text.find(sep, 0, min(end, TITLE_CHARS) + len(sep))
        if 0 <= cut < end:
            end = cut
    return end


def title_terms(text: str) -> tuple[str, ...] | None:
    """The title of a memory's ``text`` as terms (module docstring), or None when it has none."""
    head = text[:title_end(text)]
    if len(head) > TITLE_CHARS or sum(w not in STOPWORDS for w in words(head)) > TITLE_TERMS:
        return None   # a long text: no stemming
    terms = tuple(tokenize(head))
    return terms if 0 < len(terms) <= TITLE_TERMS else None


def mentioned(text: str, *titles: dict[tuple[str, ...], list[str]]) -> list[str]:
    """Ids of the memories whose title (a key of one of the ``titles`` maps) occurs as a run of
    ``text``'s terms, its own title excepted: shorter titles first, then by where they occur."""
    own = title_terms(text)
    terms = tokenize(text)
    out: dict[str, None] = {}
    for size in range(1, TITLE_TERMS + 1):
        for s in range(len(terms) - size + 1):
            run = tuple(terms[s: s + size])
            if run != own:
                for index in titles:
                    for i in index.get(run, ()):
                        out.setdefault(i)
    return list(out)


def first_mentioned(text: str, *titles: dict[tuple[str, ...], list[str]]) -> list[str]:
    """Ids of the memories whose title is the *first* one ``text`` names after its own title
    (read from where the title ends: a text that is all title, a lemma like "absolute
    ceiling", names no first memory; the head of an English compound is its last word):
    a definition's genus ("kookaburra: Australian *kingfisher* having a loud cry"), a
    note's thing ("the *dishwasher* filter needs rinsing every month").  Where titles start
    at the same term, the longest; every memory of that title (a word's senses).  Empty
    when the text names none."""
    own = title_terms(text)
    terms = tokenize(text)
    start = len(own) if own and tuple(terms[: len(own)]) == own else 0
    for s in range(start, len(terms)):
        for size in range(min(TITLE_TERMS, len(terms) - s), 0, -1):
            run = tuple(terms[s: s + size])
            if run == own:
                continue
            found = [i for index in titles for i in index.get(run, ())]
            if found:
                return list(dict.fromkeys(found))
    return []


class Mentions:
    """The titles of a store's memories (id lists by title terms), kept in step with its
    :class:`~hypermem.store.state.MemoryState` before each use."""

    def __init__(self) -> None:
        self.titles: dict[tuple[str, ...], list[str]] = {}
        self.of: dict[str, tuple[int, tuple[str, ...] | None]] = {}  # id -> (hash of its text, its title)
        self.version = -1
        self.mark: tuple | None = None  # how far the record table's journal was read

    def sync(self, state) -> None:
        """Index the texts added or rewritten since the last sync and forget removed memories
        (the record table's journal, :meth:`~hypermem.store.record_table.RecordTable.since`);
        when the rows were relaid, every row is read again and a text whose hash is unchanged
        keeps its title."""
        if self.version == state.version:
            return
        table = state.records
        ids = state.ids[: state.n]
        got = table.since(getattr(self, "mark", None))
        if got is None:
            rows, gone = range(state.n), set(self.of) - set(ids)
        else:
            rows, gone = got
        for i in gone:
            if i in self.of:
                self._drop(i)
        for r, text in zip(rows, table.texts.many(rows)):
            i, h = ids[r], hash(text)
            if i in self.of:
                if self.of[i][0] == h:
                    continue
                self._drop(i)
            t = title_terms(text)
            self.of[i] = (h, t)
            if t is not None:
                self.titles.setdefault(t, []).append(i)
        self.version = state.version
        self.mark = table.mark()

    def _drop(self, i: str) -> None:
        t = self.of.pop(i)[1]
        if t is not None:
            kept = [j for j in self.titles[t] if j != i]
            if kept:
                self.titles[t] = kept
            else:
                del self.titles[t]

    def find(self, state, text: str, *more: dict[tuple[str, ...], list[str]]) -> list[str]:
        """Ids of the stored memories (and of ``more`` title maps: a batch's earlier items, see
        :func:`add_title`) that ``text`` mentions (:func:`mentioned`)."""
        self.sync(state)
        return mentioned(text, self.titles, *more)

    def find_first(self, state, text: str, *more: dict[tuple[str, ...], list[str]]) -> list[str]:
        """:func:`first_mentioned` over the stored memories' titles (and ``more``, as :meth:`find`)."""
        self.sync(state)
        return first_mentioned(text, self.titles, *more)


def add_title(titles: dict[tuple[str, ...], list[str]], id: str, text: str) -> None:
    """Put memory ``id`` of ``text`` into a title map (when it has a title)."""
    key = title_terms(text)
    if key is not None:
        titles.setdefault(key, []).append(id)
