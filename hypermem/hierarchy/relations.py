"""A relation (a set of node pairs, e.g. a transitive closure) coded as integer tensors.

Training and evaluation need two things fast and in bulk: the list of pairs as an
``(E, 2)`` index tensor, and membership tests "is ``(u, v)`` related?" for millions of
sampled pairs.  :class:`Relations` keeps the pairs as sorted ``int64`` keys
``u * n + v`` and answers membership with one :func:`torch.searchsorted` call, on the
CPU or a GPU, with no Python loop per pair.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence

import torch

from ..data.dag import check_acyclic
from .node_ids import check_node_ids

_DENSE_LIMIT = 1 << 24
"""Relations over at most ``sqrt(_DENSE_LIMIT)`` (4,096) nodes answer :meth:`Relations.contains`
from an ``n * n`` bit table (16 MB at most) instead of a binary search."""


class Relations:
    """Pairs of nodes coded as indices.

    Parameters
    ----------
    pairs:
        ``(u, v)`` pairs of node labels (any hashable), or an ``(E, 2)`` integer tensor
        of indices into ``nodes``.
    nodes:
        The node labels in index order.  Defaults to the sorted labels of ``pairs`` (or
        ``range(max index + 1)`` for a tensor).  Nodes without any pair may be listed.
    device:
        Where the tensors live.

    Attributes
    ----------
    nodes, index:
        Labels in index order and ``label -> index``.
    pairs:
        ``(E, 2)`` ``int64`` tensor, duplicates removed, sorted by ``(u, v)``.
    """

    def __init__(self, pairs: Iterable[tuple[Hashable, Hashable]] | torch.Tensor,
                 nodes: Sequence[Hashable] | None = None, device: torch.device | str | None = None):
        if isinstance(pairs, torch.Tensor):
            idx = pairs.to(device=device, dtype=torch.int64)
            if idx.dim() != 2 or idx.shape[1] != 2:
                raise ValueError(f"pairs must have shape (E, 2), got {tuple(idx.shape)}")
            n = int(idx.max()) + 1 if idx.numel() else 0
            self.nodes = list(nodes) if nodes is not None else list(range(n))
            if idx.numel() and (int(idx.min()) < 0 or int(idx.max()) >= len(self.nodes)):
                raise ValueError(f"pair indices must lie in [0, {len(self.nodes)}), got "
                                 f"[{int(idx.min())}, {int(idx.max())}]")
        else:
            plist = []
            for i, p in enumerate(pairs):
                try:
                    u, v = p
                except (TypeError, ValueError) as exc:
                    raise ValueError(f"pair {i} must be a (u, v) pair, got {p!r}") from exc
                plist.append((u, v))
            check_node_ids(plist, extra=() if nodes is None else nodes)
            if nodes is None:
                labels = {x for p in plist for x in p}
                try:
                    self.nodes = sorted(labels)
                except TypeError:  # labels of several types, e.g. 1 and "a": ordered by repr
                    self.nodes = sorted(labels, key=repr)
                    check_distinct_names(self.nodes)
            else:
                self.nodes = list(nodes)
            index = {x: i for i, x in enumerate(self.nodes)}
            if len(index) != len(self.nodes):
                raise ValueError("nodes contains repeated labels")
            if nodes is not None and len({type(x) for x in self.nodes}) > 1:
                check_distinct_names(self.nodes)
            try:
                flat = [(index[u], index[v]) for u, v in plist]
            except KeyError as exc:
                raise ValueError(f"pair mentions {exc.args[0]!r}, which is not in nodes") from exc
            idx = torch.tensor(flat, dtype=torch.int64, device=device).reshape(-1, 2)
        self.index = {x: i for i, x in enumerate(self.nodes)}
        if idx.numel() and bool((idx[:, 0] == idx[:, 1]).any()):
            k = int((idx[:, 0] == idx[:, 1]).nonzero()[0, 0])
            raise ValueError(f"self-pair ({self.nodes[int(idx[k, 0])]!r}, same) in the relation")
        n = len(self.nodes)
        keys = torch.unique(idx[:, 0] * n + idx[:, 1])  # sorted, deduplicated
        self.n = n
        self.keys = keys
        self.pairs = torch.stack([keys // n, keys % n], dim=1) if keys.numel() else idx[:0]

    # -- basic facts -----------------------------------------------------------------
    @property
    def device(self) -> torch.device:
        return self.keys.device

    def __len__(self) -> int:
        return int(self.keys.numel())

    def __repr__(self) -> str:
        return f"Relations(nodes={self.n}, pairs={len(self)}, device={self.device})"

    def to(self, device: torch.device | str) -> Relations:
        """A copy on ``device`` (labels shared)."""
        out = object.__new__(Relations)
        out.nodes, out.index, out.n = self.nodes, self.index, self.n
        out.keys, out.pairs = self.keys.to(device), self.pairs.to(device)
        return out

    def reversed(self) -> Relations:
        """The converse relation ``{(v, u)}``."""
        return Relations(self.pairs.flip(1), nodes=self.nodes, device=self.device)

    def symmetric(self) -> Relations:
        """``{(u, v)} ∪ {(v, u)}``."""
        return Relations(torch.cat([self.pairs, self.pairs.flip(1)]), nodes=self.nodes, device=self.device)

    # -- queries -------------------------------------------------------------------
    def contains(self, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Boolean tensor: ``(u[i], v[i])`` is a pair of the relation (broadcasts)."""
        key = u.to(self.device, torch.int64) * self.n + v.to(self.device, torch.int64)
        if not len(self):
            return torch.zeros_like(key, dtype=torch.bool)
        if self.n * self.n <= _DENSE_LIMIT:  # a bit table: one gather instead of a binary search
            table = self.__dict__.get("_table")
            if table is None:
                table = torch.zeros(self.n * self.n, dtype=torch.bool, device=self.device)
                table[self.keys] = True
                self._table = table
            return table[key]
        pos = torch.searchsorted(self.keys, key.reshape(-1)).clamp_max(len(self) - 1)
        return (self.keys[pos] == key.reshape(-1)).reshape(key.shape)

    def check_acyclic(self) -> None:
        """Refuse a relation whose pairs ``(u, v)`` (``u`` is-a ``v``) contain a cycle
        (``a -> b -> c -> a``), with :func:`~hypermem.data.dag.check_acyclic`'s
        :class:`~hypermem.data.dag.CycleError` naming it, each node a child of the next; an
        is-a relation has none.  Linear in nodes and pairs; remembered, so a second call
        (each evaluation during training) costs nothing."""
        if self.__dict__.get("_acyclic"):
            return
        # Kahn's algorithm from the leaves up, on the sorted pairs (each node's partners are a
        # slice): a node is done when all its children are; what is left holds a cycle
        offsets, targets = (t.tolist() for t in self.to("cpu").csr())
        waiting = torch.bincount(self.pairs[:, 1].cpu(), minlength=self.n).tolist()  # children not done
        ready = [i for i, k in enumerate(waiting) if k == 0]
        done = 0
        while ready:
            u = ready.pop()
            done += 1
            for v in targets[offsets[u]:offsets[u + 1]]:
                waiting[v] -= 1
                if waiting[v] == 0:
                    ready.append(v)
        if done != self.n:  # name a cycle among the nodes left, with the one cycle finder
            left = {u: [v for v in targets[offsets[u]:offsets[u + 1]] if waiting[v]] for u, k in enumerate(waiting) if k}
            check_acyclic(left, self.nodes)
        self._acyclic = True

    def out_degree(self) -> torch.Tensor:
        """Number of pairs ``(u, .)`` for every node ``u``, shape ``(n,)``."""
        return torch.bincount(self.pairs[:, 0], minlength=self.n)

    def degree(self) -> torch.Tensor:
        """Number of pairs that mention each node (either side), shape ``(n,)``."""
        return torch.bincount(self.pairs.reshape(-1), minlength=self.n)

    def csr(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(offsets, targets)``: the partners of ``u`` are ``targets[offsets[u]:offsets[u+1]]``."""
        counts = self.out_degree()
        offsets = torch.zeros(self.n + 1, dtype=torch.int64, device=self.device)
        offsets[1:] = torch.cumsum(counts, 0)
        return offsets, self.pairs[:, 1]

    def labels(self, idx: torch.Tensor) -> list:
        """Node labels of an index tensor (flattened)."""
        return [self.nodes[i] for i in idx.reshape(-1).tolist()]


def check_distinct_names(labels: Iterable[Hashable]) -> None:
    """Refuse two different node labels with the same name ``str(label)``, such as ``1`` and
    ``"1"``: mixed id types (some ids read from a file as text, others given as numbers)
    would otherwise split one node into two unrelated ones, silently.  Labels of several
    types that differ as text (``1`` and ``"a"``) stay allowed.  Raises a ``ValueError``
    naming one such pair."""
    seen: dict[str, Hashable] = {}
    for x in labels:
        other = seen.setdefault(str(x), x)
        if other is not x and other != x:
            raise ValueError(f"node ids {other!r} ({type(other).__name__}) and {x!r} ({type(x).__name__}) are "
                             f"different nodes with the same name: mixed id types would split one node in two; "
                             f"give every id one type (e.g. str)")


def as_relations(pairs, nodes: Sequence[Hashable] | None = None, device=None) -> Relations:
    """``pairs`` as :class:`Relations` (a :class:`Relations` passes through, moved to ``device``)."""
    if isinstance(pairs, Relations):
        if nodes is not None and list(nodes) != pairs.nodes:
            return Relations([(pairs.nodes[u], pairs.nodes[v]) for u, v in pairs.pairs.tolist()], nodes, device)
        return pairs if device is None else pairs.to(device)
    return Relations(pairs, nodes=nodes, device=device)
