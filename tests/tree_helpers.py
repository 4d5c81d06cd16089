"""Small trees shared by the hierarchy tests."""


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
