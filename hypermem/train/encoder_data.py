"""A ``LightningDataModule`` for hierarchy encoders: a named hierarchy, a task, batches.

``data.hierarchy`` is ``wordnet`` (HiT's WordNet nouns from Debian's ``wordnet-base``,
:func:`hypermem.data.wordnet.hit_noun_hierarchy`) or ``files`` with ``data.edges`` and
``data.names`` (a user's own TSV or JSONL files, :mod:`hypermem.data.hierarchy_files`);
``data.text: definition`` names WordNet's entities ``"lemma: definition"`` instead of their lemma.
``data.task`` picks the split (:mod:`hypermem.data.hierarchy_tasks`): ``mixed`` (HiT's
mixed-hop prediction), ``multi`` (multi-hop inference), ``unseen`` (held-out entities) or
``none`` (train on every edge; 5% of them, at most 2,000, carved out for validation).

Training batches are :class:`~hypermem.hierarchy.encoder_batches.EncoderBatch` objects of
entity indices (every distinct entity of a batch encoded once by the module); an epoch's
batches are a function of ``(seed, epoch)``, so a resumed run sees the same batches as an
uninterrupted one; one stopped at batch ``b`` of an epoch resumes there (its loader, a
:class:`~hypermem.train.mid_epoch.ResumableLoader`, skips this process's first ``b`` batches).  Under DDP (``trainer.strategy: ddp``) each of the ``w``
processes trains on its share of every epoch's batches, batch ``i`` on rank ``i % w``
(:func:`rank_share`; the last ``len % w`` batches are left out, so every rank runs as many
steps); one process trains on all of them, in order.  ``files`` are read when the module is made,
before ``trainer.fit`` launches the other processes: a bad file is one error, not one per process.  Validation is one pass over ``val_size`` positives
with their random and hard negatives (the module scores them all at once).

``data.aliases`` names a file of entities' other names, the training variants of
:mod:`~hypermem.hierarchy.encoder_variants` (``model.alias_rate``): TSV lines
``id<TAB>alias[<TAB>alias...]`` (an id may have several lines; a first line ``id<TAB>alias`` is
a header) or JSONL ``{"id": ..., "aliases": [...]}`` (or ``"alias": "..."``), read like the
``names`` file (:func:`read_aliases`; UTF-8, ``.gz``, every line checked, an error naming the
file and line) and checked against the hierarchy's ids.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path

import lightning.pytorch as pl
from torch.utils.data import DataLoader, IterableDataset

from ..data.hierarchy_files import (
    HierarchyFileError,
    file_lines,
    is_jsonl,
    json_field,
    json_object,
    read_hierarchy,
)
from ..data.hierarchy_tasks import (
    EntityHierarchy,
    NegativeSampler,
    carve_validation,
    mixed_hop_task,
    multi_hop_task,
    unseen_entity_task,
)
from ..data.wordnet import HIT_TEXTS, hit_noun_hierarchy
from ..hierarchy.encoder_batches import EdgeBatches, closure_sets
from ..hierarchy.encoder_variants import check_aliases
from .mid_epoch import ResumableLoader, trainer_position

TASKS = {"mixed": mixed_hop_task, "multi": multi_hop_task, "unseen": unseen_entity_task}


def read_aliases(path: str | os.PathLike) -> dict[str, list[str]]:
    """``id -> [alias, ...]`` of an aliases file (module docstring), in file order; a ``ValueError``
    ``data.aliases: FILE:LINE: why`` for a file that is not UTF-8, a malformed line, a blank id or
    alias.  Ids are not checked against a hierarchy here (:meth:`EncoderDataModule.checked_aliases`)."""
    return _alias_entries(path)[0]


def _alias_entries(path) -> tuple[dict[str, list[str]], dict[str, int]]:
    """:func:`read_aliases`' mapping and the line of each id's first entry; the file read as the
    ``names`` file is (:func:`~hypermem.data.hierarchy_files.file_lines`), its errors prefixed
    ``data.aliases:``."""
    path = Path(path).expanduser().absolute()
    jsonl = is_jsonl(path)
    out: dict[str, list[str]] = {}
    first: dict[str, int] = {}
    if not path.is_file():
        raise ValueError(f"data.aliases: no such file: {str(path)!r}")
    try:
        for no, line in file_lines(path):
            key, texts = _alias_json(path, no, line) if jsonl else _alias_tsv(path, no, line)
            if no == 1 and not jsonl and key.lower() == "id" and [t.lower() for t in texts] in (["alias"],
                                                                                              ["aliases"]):
                continue   # the header
            out.setdefault(key, []).extend(texts)
            first.setdefault(key, no)
    except HierarchyFileError as exc:
        raise ValueError(f"data.aliases: {exc}") from None
    return out, first


def _alias_tsv(path: Path, no: int, line: str) -> tuple[str, list[str]]:
    parts = line.split("\t")
    if len(parts) < 2 or not parts[0].strip():
        raise HierarchyFileError(f"{path}:{no}: every line needs an id and at least one alias, tab-separated, "
                                 f"got {line[:80]!r}")
    if any(not t.strip() for t in parts[1:]):
        raise HierarchyFileError(f"{path}:{no}: a blank alias in {line[:80]!r}")
    return parts[0].strip(), [t.strip() for t in parts[1:]]


def _alias_json(path: Path, no: int, line: str) -> tuple[str, list[str]]:
    obj = json_object(path, no, line)
    key = json_field(obj, ("id",), path, no)

    def bad(why: str) -> HierarchyFileError:   # a value shown cut short: a line may be 64k characters
        return HierarchyFileError(f"{path}:{no}: {why[:200]}")

    if "aliases" in obj:
        texts = obj["aliases"]
        if not isinstance(texts, list) or not all(isinstance(t, str) and t.strip() for t in texts):
            raise bad(f"field 'aliases' must be a list of non-empty strings, got {texts!r}")
    elif "alias" in obj:
        if not isinstance(obj["alias"], str) or not obj["alias"].strip():
            raise bad(f"field 'alias' must be a non-empty string, got {obj['alias']!r}")
        texts = [obj["alias"]]
    else:
        raise bad("missing field 'aliases' (a list of texts; or 'alias', one text)")
    return key, [t.strip() for t in texts]


def process_rank() -> tuple[int, int]:
    """``(rank, world_size)`` of this process: torch.distributed's when it is initialised (DDP),
    else ``(0, 1)``."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def rank_share(batches: Iterable, rank: int, world: int) -> Iterator:
    """Process ``rank``'s share of an epoch's ``batches`` under data parallelism over ``world``
    processes: batch ``i`` goes to rank ``i % world``, and the last ``n % world`` batches to none,
    so each process runs ``n // world`` steps (none waits for another at the end of the epoch;
    ``n`` is the epoch's count, which varies by a batch from epoch to epoch, so the epoch is
    listed first).  One process (``world`` 1) gets every batch, in order, as they come."""
    if not 0 <= rank < world:
        raise ValueError(f"rank must be in [0, {world}), got {rank}")
    if world == 1:
        return iter(batches)
    batches = list(batches)
    return iter(batches[rank:len(batches) // world * world:world])


class _Epoch(IterableDataset):
    def __init__(self, dm: EncoderDataModule):
        self.dm = dm

    def __iter__(self):
        # the trainer's epoch, not one set by a hook: Lightning creates the first iterator of
        # a resumed run before ``on_train_epoch_start`` runs
        # (read at the first batch, so a generator)
        trainer = getattr(self.dm, "trainer", None)
        batches = self.dm.batches.epoch(trainer.current_epoch if trainer is not None else self.dm.epoch)
        yield from rank_share(batches, *self.dm.rank())

    def __len__(self) -> int:
        return len(self.dm.batches) // self.dm.rank()[1]


def _same(batch):
    return batch


class _Once(IterableDataset):
    def __iter__(self):
        yield 0


class EncoderDataModule(pl.LightningDataModule):
    """Parameters
    ----------
    hierarchy:
        ``wordnet`` or ``files``.
    edges, names:
        With ``hierarchy: files``: the edges file (``child<TAB>parent`` or JSONL) and the
        optional names file (``id<TAB>text`` or JSONL).
    text:
        With ``hierarchy: wordnet``: ``lemma`` (HiT's names) or ``definition`` (``"lemma:
        definition"``, :func:`hypermem.data.wordnet.hit_noun_hierarchy`).
    task:
        ``mixed``, ``multi``, ``unseen`` or ``none``.
    batch_size, children_per_parent, negatives, hard_negatives:
        Positives per optimizer step, siblings grouped per parent, negatives per positive and
        how many of them are in-batch siblings (:class:`~hypermem.hierarchy.encoder_batches.EdgeBatches`).
    val_size:
        Validation positives scored at each validation (a seeded sample of the task's).
    seed:
        Seeds the split, the negatives and the batches.
    aliases:
        A file of entities' other names (:func:`read_aliases`), shown in training steps in place
        of an entity's name with probability ``model.alias_rate``
        (:mod:`~hypermem.hierarchy.encoder_variants`); ``null`` (the default): none.
    """

    def __init__(self, hierarchy: str = "wordnet", edges: str | None = None, names: str | None = None,
                 text: str = "lemma", task: str = "mixed", batch_size: int = 128, children_per_parent: int = 8, negatives: int = 10,
                 hard_negatives: int = 8, val_size: int = 1000, seed: int = 0, aliases: str | None = None):
        super().__init__()
        if hierarchy not in ("wordnet", "files"):
            raise ValueError(f"data.hierarchy must be 'wordnet' or 'files', got {hierarchy!r}")
        if hierarchy == "files" and not edges:
            raise ValueError("data.hierarchy: files needs data.edges (a TSV or JSONL file of child/parent edges)")
        if text not in HIT_TEXTS:
            raise ValueError(f"data.text must be one of {list(HIT_TEXTS)}, got {text!r}")
        if hierarchy == "files" and text != "lemma":
            raise ValueError("data.text applies to hierarchy: wordnet; a names file gives a files hierarchy its texts")
        if task not in (*TASKS, "none"):
            raise ValueError(f"data.task must be one of {sorted(TASKS) + ['none']}, got {task!r}")
        # EdgeBatches' minimums, checked here so that the error names the setting before any training
        for key, value, least in (("batch_size", batch_size, 2), ("children_per_parent", children_per_parent, 1),
                                  ("negatives", negatives, 1), ("hard_negatives", hard_negatives, 0)):
            if value < least:
                raise ValueError(f"data.{key} must be at least {least}, got {value}")
        if val_size < 1:
            raise ValueError(f"data.val_size must be positive, got {val_size}")
        self.save_hyperparameters()
        self.epoch = 0
        # a user's files are read (and checked) here, in the process that launches the DDP ranks:
        # a bad file stops the run with one error, not one per process
        self.h: EntityHierarchy | None = read_hierarchy(edges, names) if hierarchy == "files" else None
        self.aliases: dict[str, tuple[str, ...]] = {}
        if aliases:   # read and checked here too (WordNet's hierarchy loaded for its ids)
            if self.h is None:
                self.h = hit_noun_hierarchy(text=text)
            self.aliases = self.checked_aliases(aliases, self.h.names)

    @staticmethod
    def checked_aliases(path, names: dict[str, str]) -> dict[str, tuple[str, ...]]:
        """The aliases of ``path`` (:func:`read_aliases`) with each id one of ``names``: an id
        the hierarchy lacks is named with its first line."""
        raw, lines = _alias_entries(path)
        for key in raw:
            if key not in names:
                raise ValueError(f"data.aliases: {Path(path).expanduser().absolute()}:{lines[key]}: the id "
                                 f"{key!r} has no name in the hierarchy")
        try:
            return check_aliases(raw, names)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"data.aliases: {exc}") from None

    def setup(self, stage: str | None = None) -> None:
        if getattr(self, "batches", None) is not None:
            return
        hp = self.hparams
        if self.h is None:
            self.h = hit_noun_hierarchy(text=hp.text)
        if hp.task == "none":
            self.train_edges, val_edges = carve_validation(self.h.edges, hp.seed)
            self.val = NegativeSampler(self.h, hp.negatives, hp.seed + 1).pair_set(val_edges)
        else:
            task = TASKS[hp.task](self.h, seed=hp.seed, negatives=hp.negatives)
            self.train_edges, self.val = task.train_edges, task.val
        self.val = self.val.subset(hp.val_size, seed=hp.seed)
        self.ids = sorted(self.h.names)
        self.texts = [self.h.names[e] for e in self.ids]
        index = {e: i for i, e in enumerate(self.ids)}
        int_edges = [(index[c], index[p]) for c, p in self.train_edges]
        self.batches = EdgeBatches(int_edges, closure_sets(int_edges, len(self.ids)), batch_size=hp.batch_size,
                                   children_per_parent=hp.children_per_parent, negatives=hp.negatives,
                                   hard_negatives=hp.hard_negatives, seed=hp.seed)
        self.depth = self.batches.levels.tolist()   # -1: an entity no training edge names

    @property
    def names(self) -> dict[str, str]:
        return self.h.names

    def rank(self) -> tuple[int, int]:
        """``(rank, world_size)``: the trainer's (``global_rank``, ``world_size``) when attached to
        one, else torch.distributed's (:func:`process_rank`)."""
        trainer = getattr(self, "trainer", None)
        if trainer is not None:
            return int(trainer.global_rank), int(trainer.world_size)
        return process_rank()

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def train_dataloader(self) -> DataLoader:
        world = self.rank()[1]
        if len(self.batches) < world:
            raise ValueError(f"an epoch has {len(self.batches)} batch(es) for {world} processes: lower "
                             "data.batch_size or train on fewer devices")
        return ResumableLoader(_Epoch(self), batch_size=None, collate_fn=_same, position=self.loader_position)

    def loader_position(self) -> tuple[int, int] | None:
        """``(epoch, batches run in it)`` of the trainer running this module, else ``None``
        (:class:`~hypermem.train.mid_epoch.ResumableLoader`)."""
        trainer = getattr(self, "trainer", None)
        return trainer_position(trainer) if trainer is not None else None

    def val_dataloader(self) -> DataLoader:
        return DataLoader(_Once(), batch_size=None)
