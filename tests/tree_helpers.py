"""Small trees shared by the hierarchy tests."""

from hypermem.hierarchy import children_map, transitive_closure


def balanced_tree(branching, depth):
    """``(parent, child)`` edges of the complete ``branching``-ary tree of ``depth`` levels
    below the root ``0`` (nodes numbered in breadth-first order)."""
    edges, frontier, nxt = [], [0], 1
    for _ in range(depth):
        new = []
        for p in frontier:
            for _ in range(branching):
                edges.append((p, nxt))
                new.append(nxt)
                nxt += 1
        frontier = new
    return edges


def balanced_isa(branching, depth):
    """The ``(hyponym, hypernym)`` pairs of the transitive closure of :func:`balanced_tree`."""
    edges = balanced_tree(branching, depth)
    ch, roots = children_map(edges)
    return [(d, a) for a, d in transitive_closure(ch, roots[0])]  # (hyponym, hypernym)
