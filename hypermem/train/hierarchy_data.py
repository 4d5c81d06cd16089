"""A ``LightningDataModule`` for hierarchy closures, with negative sampling.

The data is a transitive closure of ``(hyponym, hypernym)`` pairs: the shipped WordNet
mammals (``dataset: mammals``), all WordNet nouns (``nouns``, needs ``wordnet-base``),
any WordNet subtree (``wordnet:<synset>``, e.g. ``wordnet:dog.n.01``) or a TSV file of
pairs (``path/to/pairs.tsv[.gz]``, one ``hyponym<TAB>hypernym`` per line, closed transitively
and checked for cycles by :func:`load_tsv`).

Training batches are ``(B, 2)`` index pairs; the collate function draws the negatives
(:class:`~hypermem.hierarchy.sampling.NegativeSampler`, ``degree^0.75`` during the
burn-in, uniform afterwards) so every batch is a dict ``{"pairs", "neg", "mask",
"batch_size"}`` (``batch_size``: pairs per optimizer step; ``batches_per_step`` batches
can travel together).
Under DDP, Lightning shards the pairs across processes with its distributed sampler.  The
dataset is read when the module is made, before ``trainer.fit`` launches the other processes, so
a bad file stops the run with one error, not one per process.

Every epoch's shuffle and negatives come from generators seeded by ``(seed, epoch, rank)``
(:class:`EpochShuffle`, :meth:`HierarchyDataModule.set_epoch`), not from a stream that
runs across epochs: a run resumed from a checkpoint at the end of epoch ``e`` draws the
same batches as an uninterrupted run from epoch ``e + 1`` on, and a run stopped at batch ``b`` of
epoch ``e`` resumes there: its loader draws the first ``b`` batches again, negatives included,
and drops them (:class:`~hypermem.train.mid_epoch.ResumableLoader`).

With ``link_split`` set (a fraction of non-basic edges, e.g. 0.5), the closure is split
as Ganea et al. (2018) do (:func:`~hypermem.hierarchy.splits.link_prediction_split`):
training sees the basic edges plus that fraction of the others, and the module reports
link-prediction F1 on the held-out pairs.
"""

from __future__ import annotations

import os
from pathlib import Path

import lightning.pytorch as pl
import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from ..data import wordnet
from ..data.hierarchy_files import HierarchyFileError, read_checked_edges
from ..hierarchy.cones import sample_cone_negatives
from ..hierarchy.relations import Relations
from ..hierarchy.sampling import NegativeSampler
from ..hierarchy.splits import LinkSplit, link_prediction_split
from .mid_epoch import ResumableLoader, trainer_position


class _Pairs(Dataset):
    def __init__(self, pairs: torch.Tensor):
        self.pairs = pairs

    def __len__(self) -> int:
        return self.pairs.shape[0]

    def __getitem__(self, i):
        return self.pairs[i]

    def __getitems__(self, indices):  # a whole batch in one indexing (DataLoader's batched fetch)
        return self.pairs[torch.as_tensor(indices)]


def epoch_seed(seed: int, epoch: int, stream: int = 0) -> int:
    """A seed for ``(seed, epoch, stream)`` (distinct streams for shuffles and negatives)."""
    return (int(seed) * 1_000_003 + int(epoch) * 7_919 + int(stream) * 104_729) % (2**63 - 1)


class EpochShuffle(Sampler):
    """A random permutation of ``range(n)`` that depends only on ``(seed, epoch)``;
    Lightning calls :meth:`set_epoch` before each epoch (also when resuming)."""

    def __init__(self, n: int, seed: int = 0):
        self.n, self.seed, self.epoch = int(n), int(seed), 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def __len__(self) -> int:
        return self.n

    def __iter__(self):
        g = torch.Generator().manual_seed(epoch_seed(self.seed, self.epoch))
        return iter(torch.randperm(self.n, generator=g).tolist())


class _One(Dataset):
    """One dummy item: validation runs the whole-embedding evaluation once per epoch."""

    def __len__(self) -> int:
        return 1

    def __getitem__(self, i):
        return torch.zeros(1)


def load_closure(dataset: str) -> tuple[list[tuple[str, str]], dict[str, str], list[tuple[str, str]]]:
    """``(closure, glosses, tree)`` of a dataset name (see the module docstring)."""
    if dataset == "mammals":
        h = wordnet.load_mammals()
    elif dataset == "nouns":
        h = wordnet.load_nouns()
    elif dataset.startswith("wordnet:"):
        h = wordnet.build_hierarchy(dataset.split(":", 1)[1])
    else:
        path = Path(dataset)
        if not path.is_file():
            where = path if path.is_absolute() else f"{path.absolute()} (a relative path is read from the working folder)"
            what = "is a folder, not a file" if path.is_dir() else "no such file"
            raise FileNotFoundError(f"dataset {dataset!r}: {what}: looked for {where}; the other datasets are "
                                    "'mammals', 'nouns' and 'wordnet:<synset>'")
        return load_tsv(path)
    return h.closure, h.glosses, h.tree


def load_tsv(path: str | Path) -> tuple[list[tuple[str, str]], dict[str, str], list[tuple[str, str]]]:
    """``(closure, {}, tree)`` of a UTF-8 file of ``hyponym<TAB>hypernym`` lines (gzipped when
    it ends in ``.gz``; blank lines skipped, columns after the second ignored; a leading
    byte-order mark, ``\r\n`` line ends and spaces around a name are dropped), read by
    :func:`~hypermem.data.hierarchy_files.read_checked_edges`: a header of known names is
    skipped, one in parent-first order (``parent<TAB>child``) is refused rather than flipped,
    and a ``name<TAB>`` line (a root row, pandas' empty NaN cell) is refused with that hint.

    The pairs are closed transitively (:func:`~hypermem.data.dag.hypernym_closure`): the pairs
    as given, each once, then the implied ones, so a file of direct edges and a file of the
    whole closure train alike.  The tree gives each node its deepest hypernym as parent: a
    forest of ``(parent, child)`` edges, in which a root whose children all have a deeper
    hypernym is in no edge (the export makes it a root memory of its own).  The closure
    names every node; for a layout, which needs one tree over all of them, use
    :func:`~hypermem.hierarchy.spanning.add_virtual_root` ``(tree, "<root>", nodes)`` (nodes:
    those of the closure) or ``ancestor_tree(closure, root="<root>")``.
    Refused with a :class:`~hypermem.data.hierarchy_files.HierarchyFileError` (a ``ValueError``)
    naming the absolute path and line: ``dataset file /abs/pairs.tsv:LINE: ...`` for no pairs, a
    line without two names, bytes that are not UTF-8, a self-loop, a cycle (named, each node a child
    of the next, at the line of one of its edges); the CLI says ``data.dataset file ...``."""
    try:
        given, ancestors = read_checked_edges(path, role="dataset", extra_columns=True)
    except OSError as exc:  # a damaged .gz
        raise HierarchyFileError(f"dataset file {Path(path).absolute()}: cannot be read ({exc})") from None
    seen = set(given)
    closure = given + sorted((c, a) for c in ancestors for a in ancestors[c] if (c, a) not in seen)
    depth = {n: len(a) for n, a in ancestors.items()}
    tree = [(max(ancestors[c], key=lambda a: (depth[a], a)), c) for c in sorted(ancestors) if ancestors[c]]
    return closure, {}, tree  # type: ignore[return-value]


class HierarchyDataModule(pl.LightningDataModule):
    """Closure pairs with negatives.

    Parameters
    ----------
    dataset:
        ``mammals``, ``nouns``, ``wordnet:<synset>`` or a TSV path.
    batch_size:
        Pairs per batch, i.e. per optimizer step (per process under DDP).
    batches_per_step:
        Batches handed to the module at once (default 1): the loader yields
        ``batches_per_step * batch_size`` pairs and the module takes one optimizer step per
        ``batch_size`` of them, so Lightning's per-step overhead is paid once per group.
        The updates are the same as with one batch per step.
    negatives:
        Negatives per pair (Nickel & Kiela: 50 for good reconstruction; cones: 10).
    negatives_kind:
        ``"target"`` (replace the hypernym; Nickel & Kiela) or ``"both_ends"`` (half the
        hyponym, half the hypernym; Ganea et al.'s cones).
    burn_in:
        Epochs whose negatives follow ``degree^0.75``.
    link_split:
        ``None`` (train on the whole closure) or the fraction of non-basic edges kept
        for training in a link-prediction split.
    seed, num_workers:
        Sampling seed and DataLoader workers.
    """

    def __init__(self, dataset: str = "mammals", batch_size: int = 128, negatives: int = 50,
                 negatives_kind: str = "target", burn_in: int = 20, link_split: float | None = None,
                 seed: int = 0, num_workers: int = 0, batches_per_step: int = 1):
        super().__init__()
        if negatives_kind not in ("target", "both_ends"):
            raise ValueError(f"negatives_kind must be 'target' or 'both_ends', got {negatives_kind!r}")
        for key, value in (("batch_size", batch_size), ("negatives", negatives), ("batches_per_step", batches_per_step)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{key} (--data.{key}) must be a positive integer, got {value!r}")
        self.save_hyperparameters()
        self.dataset = dataset
        self.batch_size = int(batch_size)
        self.batches_per_step = int(batches_per_step)
        self.negatives = int(negatives)
        self.negatives_kind = negatives_kind
        self.burn_in = int(burn_in)
        self.link_split = link_split
        self.seed = int(seed)
        self.num_workers = int(num_workers)
        self.epoch = 0
        self.relations: Relations | None = None
        self.train_relations: Relations | None = None
        self.split: LinkSplit | None = None
        self.glosses: dict[str, str] = {}
        self.tree: list[tuple[str, str]] = []
        # read (and checked) here, in the process that launches the DDP ranks: a bad file is one error
        self._loaded: tuple | None = load_closure(self.dataset)

    # -- data -----------------------------------------------------------------------
    def prepare_data(self) -> None:
        pass  # nothing to download: WordNet is read from disk

    def setup(self, stage: str | None = None) -> None:
        if self.relations is not None:
            return
        closure, self.glosses, self.tree = self._loaded or load_closure(self.dataset)
        self._loaded = None
        self.relations = Relations(closure)
        if self.link_split is not None:
            self.split = link_prediction_split(self.relations, non_basic_fraction=float(self.link_split),
                                               seed=self.seed)
            self.train_relations = self.split.train
        else:
            self.train_relations = self.relations
        g = torch.Generator().manual_seed(self.seed + 7919 * _rank())
        self._generator = g
        self._sampler = NegativeSampler(self.train_relations, generator=g)

    @property
    def nodes(self) -> list:
        if self.relations is None:
            raise RuntimeError("call setup() first")
        return self.relations.nodes

    def set_epoch(self, epoch: int) -> None:
        """Tell the sampler which epoch runs (burn-in negatives before ``burn_in``) and
        reseed the negatives for ``(seed, epoch, rank)``."""
        self.epoch = int(epoch)
        if self.relations is not None:
            self._generator.manual_seed(epoch_seed(self.seed, self.epoch, 1 + _rank()))

    def collate(self, items) -> dict:
        pairs = items if isinstance(items, torch.Tensor) else torch.stack(items)
        if self.negatives_kind == "both_ends":
            neg, mask = sample_cone_negatives(pairs, self.negatives, self.train_relations, self._generator)
        else:
            neg, mask = self._sampler.sample(pairs[:, 0], self.negatives, unigram=self.epoch < self.burn_in)
        return {"pairs": pairs, "neg": neg, "mask": mask, "batch_size": self.batch_size}

    def train_dataloader(self) -> DataLoader:
        pairs = _Pairs(self.train_relations.pairs)
        return ResumableLoader(pairs, batch_size=self.batch_size * self.batches_per_step,
                               sampler=EpochShuffle(len(pairs), self.seed), collate_fn=self.collate,
                               num_workers=self.num_workers, position=self.loader_position)

    def loader_position(self) -> tuple[int, int] | None:
        """``(epoch, batches run in it)`` of the trainer running this module, else ``None``
        (:class:`~hypermem.train.mid_epoch.ResumableLoader`)."""
        return trainer_position(self.trainer) if self.trainer is not None else None

    def val_dataloader(self) -> DataLoader:
        return DataLoader(_One(), batch_size=1)


def _rank() -> int:
    return int(os.environ.get("LOCAL_RANK", os.environ.get("RANK", "0")))
