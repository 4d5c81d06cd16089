"""A run's folder: its checkpoints (``--ckpt_path=last``, the progress a checkpoint holds)
and what a failed start leaves in it (:mod:`~hypermem.train.hierarchy_cli`)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from .shared_keys import options

__all__ = ["TRUST_OPTIONS", "best_checkpoint", "checkpoint_position", "checkpoint_progress", "checkpoint_refusal",
           "checkpoint_step", "checkpoint_version", "epochs_text", "finished_checkpoint", "latest_last_checkpoint", "other_batches",
           "pickle_reason", "progress_text", "read_checkpoint", "remove_failed_start", "stopped_position",
           "trust_refusal", "watch_folder", "VERSIONS_KEY", "WORLD_KEY", "world_size_refusal"]

TRUST_OPTIONS = {"weights_only": False, "model.init_from_trusted": True}
"""The options that let ``torch.load`` unpickle a file (which can run its code), with their
trusting value: ``--weights_only=false`` (Lightning's load of ``--ckpt_path``) and
``--model.init_from_trusted=true`` (``model.init_from``).  They are taken from the command line
only, never from a config file (:func:`trust_refusal`)."""

BATCH_KEYS = ("batch_size", "children_per_parent")
"""The data settings that draw an epoch's batch boundaries (the embedding and the encoder data)."""


WORLD_KEY = "hypermem_world_size"
"""The checkpoint's key of the number of processes that trained it (``trainer.world_size``:
DDP's processes; the modules' ``on_save_checkpoint``), checked by :func:`world_size_refusal`."""
VERSIONS_KEY = "hypermem_versions"
"""A checkpoint's record of the packages that wrote it (``software_versions``: hypermem, torch,
numpy, lightning); provenance only, never compared on a resume."""


def epochs_text(n: int) -> str:
    """``"1 epoch"``, ``"3 epochs"``: the run summaries' count of epochs."""
    return f"{n} epoch" if n == 1 else f"{n} epochs"


def read_checkpoint(path: str | Path) -> dict | None:
    """The checkpoint at ``path`` as ``torch.load(path, weights_only=True)`` returns it (nothing in
    the file runs), or ``None`` for a file it cannot read or that holds no dict.  The CLI reads a
    ``--ckpt_path`` once and hands the dict to the checks below (their ``state=`` argument)."""
    import pickle

    import torch

    handed = _HANDED.pop(_identity(path), None)
    _HANDED.clear()
    if handed is not None:   # checkpoint_refusal read this very file just before: one read
        return handed
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except (OSError, RuntimeError, EOFError, TypeError, ValueError, pickle.UnpicklingError):
        return None
    return state if isinstance(state, dict) else None


_HANDED: dict[tuple, dict] = {}
"""The checkpoint :func:`checkpoint_refusal` accepted, for the :func:`read_checkpoint` of the same
unchanged file that follows it (the CLI's checks, :mod:`~hypermem.train.resume_checks`): taken once."""


def _identity(path: str | Path) -> tuple | None:
    """The file at ``path`` as it is now (its real path, inode, size and modification time), or ``None``."""
    try:
        st = os.stat(path)
    except (OSError, TypeError, ValueError):
        return None
    return os.path.realpath(path), st.st_ino, st.st_size, st.st_mtime_ns


def pickle_reason(exc: BaseException) -> str:
    """The short reason of ``torch.load(weights_only=True)``'s refusal: ``Unsupported global: GLOBAL io.open``."""
    text = str(exc)
    m = re.search(r"Unsupported [^\n]*?(?= was not|\. |\n|$)", text) or re.search(r"(?<=WeightsUnpickler error: )[^\n]*", text)
    if m:
        return m.group(0)[:160]
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0][:160] if lines else type(exc).__name__


def checkpoint_refusal(path: str | Path) -> str | None:
    """One line when the file at ``path`` is no Lightning checkpoint that ``torch.load(weights_only=True)``
    reads (objects it refuses, no torch file at all, no dict, no ``pytorch-lightning_version``),
    else ``None``.  Nothing in the file runs; the tensors of a zip checkpoint are mapped, not read,
    and the dict is handed to the :func:`read_checkpoint` that follows (the file is read once)."""
    import pickle

    import torch

    def load(mmap: bool):
        return torch.load(path, map_location="cpu", weights_only=True, mmap=mmap)

    try:
        try:
            state = load(True)
        except RuntimeError as exc:   # a file of the legacy (not zip) format cannot be mapped
            if "mmap" not in str(exc):
                raise
            state = load(False)
    except pickle.UnpicklingError as exc:
        if "global" not in pickle_reason(exc).lower():
            return f"--ckpt_path {path} is not a checkpoint torch.load can read ({pickle_reason(exc)})"
        return (f"--ckpt_path {path} holds objects that torch.load(weights_only=True) refuses ({pickle_reason(exc)}); "
                "nothing in it ran and nothing was loaded; if you trust the file, pass --weights_only=false on the "
                "command line")
    except (OSError, RuntimeError, EOFError, TypeError, ValueError, AttributeError, IndexError, KeyError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return f"--ckpt_path {path} is not a checkpoint torch.load can read ({first[:160]})"
    if not isinstance(state, dict) or "pytorch-lightning_version" not in state:
        what = "holds no dict" if not isinstance(state, dict) else "has no 'pytorch-lightning_version'"
        return (f"--ckpt_path {path} is not a Lightning checkpoint ({what}; a file torch.save wrote itself is not "
                "one): give a checkpoint a hypermem train run wrote")
    _HANDED.clear()
    key = _identity(path)
    if key is not None:
        _HANDED[key] = state   # the next read_checkpoint of this file takes it instead of reading again
    return None


def trust_refusal(cfg: Any, argv: list[str], file_of) -> str | None:
    """One line when a :data:`TRUST_OPTIONS` option has its trusting value in the run's config
    ``cfg`` without the command line ``argv`` giving it as an option itself (a config file, or a
    group's file such as ``--model=x.yaml``, set it); ``file_of(argv, key)`` names the file."""
    import yaml

    for key, trusting in TRUST_OPTIONS.items():
        group, _, leaf = key.rpartition(".")
        node = cfg.get(group) if group else cfg
        if node is None or node.get(leaf) is not trusting:
            continue
        given = [v for k, v in options(argv) if k == key]
        try:
            said = yaml.safe_load(given[-1]) if given and given[-1] is not None else None
        except yaml.YAMLError:
            said = None
        if said is not trusting:
            where = file_of(argv, key)
            value = str(trusting).lower()
            return (f"{key}: {value} {f'in {where}' if where else 'from a config file'} is refused: trusting a checkpoint "
                    f"(a pickle can run code) is said on the command line only, as --{key}={value}")
    return None


def latest_last_checkpoint(save_dir: str | Path, name: str) -> tuple[int, Path] | None:
    """``(version, path)`` of the most recently written ``version_*/checkpoints/last.ckpt``
    under ``save_dir/name``, or ``None``."""
    found = []
    for ckpt in Path(save_dir, name).glob("version_*/checkpoints/last.ckpt"):
        m = re.fullmatch(r"version_(\d+)", ckpt.parent.parent.name)
        if m:
            found.append((ckpt.stat().st_mtime, int(m.group(1)), ckpt))
    if not found:
        return None
    _, version, path = max(found)
    return version, path


def best_checkpoint(save_dir: str | Path, name: str) -> tuple[int, Path] | None:
    """``(version, path)`` of the best checkpoint of the latest run under ``save_dir/name``
    (``--ckpt_path=best`` in a new process), or ``None``.

    The run is the one of :func:`latest_last_checkpoint`; its ``last.ckpt`` holds Lightning's
    ``ModelCheckpoint`` state: the ``best_model_path`` of one that monitors a metric names the file (taken when it exists,
    else looked up by its name in the same ``checkpoints/`` folder, for a run folder that was
    moved).  Read with ``torch.load(weights_only=True)``: nothing in the file runs."""
    hit = latest_last_checkpoint(save_dir, name)
    if hit is None:
        return None
    version, last = hit
    state = read_checkpoint(last)
    callbacks = state.get("callbacks") if state is not None else None
    for key, value in (callbacks or {}).items():
        monitored = isinstance(value, dict) and "ModelCheckpoint" in str(key) and value.get("monitor")
        best = value.get("best_model_path") if monitored else None  # not a plain "last" checkpoint's
        if not isinstance(best, str) or not best:
            continue
        for path in (Path(best), last.parent / Path(best).name):
            if path.is_file():
                return version, path
    return None


def checkpoint_version(path: str | Path, save_dir: str | Path, name: str) -> int | None:
    """``N`` when ``path`` is a checkpoint of ``save_dir/name/version_N/checkpoints/``, else ``None``
    (``validate --ckpt_path=FILE`` then logs into that run's own folder, not a new version)."""
    p = Path(path).resolve()
    m = re.fullmatch(r"version_(\d+)", p.parent.parent.name)
    if m and p.parent.name == "checkpoints" and p.parent.parent.parent == Path(save_dir, name).resolve():
        return int(m.group(1))
    return None


def checkpoint_progress(path: str | Path, whole_epochs: bool = False, state: dict | None = None) -> tuple[int, int] | None:
    """``(epochs, global_step)`` the checkpoint at ``path`` holds (the epochs Lightning's fit loop
    processed; ``whole_epochs``: less an epoch a limit stopped inside, :func:`stopped_position`,
    whose rest its resume trains), or ``None`` for a file ``torch.load(weights_only=True)``
    cannot read.  ``state``: the checkpoint already read (:func:`read_checkpoint`), not read again."""
    state = read_checkpoint(path) if state is None else state
    try:
        epochs = int(state["loops"]["fit_loop"]["epoch_progress"]["current"]["processed"])
        stopped = whole_epochs and stopped_position(state) is not None
        return epochs - stopped, int(state["global_step"])
    except (KeyError, TypeError, ValueError):
        return None


def checkpoint_position(state: dict) -> tuple[int, int] | None:
    """``(e, b)``: the checkpoint ``state`` holds ``e`` whole epochs and ``b`` batches of epoch
    ``e + 1`` (``b`` = 0 at an epoch's end): a limit's stop inside an epoch
    (:func:`stopped_position`, whose epoch Lightning counts as processed) and Lightning's own
    checkpoint inside an epoch (an interrupt's, :mod:`~hypermem.train.interrupt_checkpoint`)
    alike.  ``None`` for a dict without Lightning's loop state."""
    stopped = stopped_position(state)
    if stopped is not None:
        return stopped
    try:
        loop = state["loops"]["fit_loop"]
        epochs = loop["epoch_progress"]["current"]
        done, batches = int(epochs["processed"]), int(loop["epoch_loop.batch_progress"]["current"]["processed"])
        return done, (batches if int(epochs["ready"]) > done else 0)
    except (KeyError, TypeError, ValueError, AttributeError):
        return None


def progress_text(state: dict) -> str | None:
    """``"3 epochs"``, ``"1 epoch and 2 batches of epoch 2"``: the training a checkpoint holds
    (:func:`checkpoint_position`; a partial epoch is not counted as a whole one), or ``None``."""
    where = checkpoint_position(state)
    if where is None:
        return None
    epochs, batches = where
    if not batches:
        return epochs_text(epochs)
    return f"{epochs_text(epochs)} and {batches} batch{'es' if batches != 1 else ''} of epoch {epochs + 1}"


def stopped_position(checkpoint: dict) -> tuple[int, int] | None:
    """``(e, b)`` when ``checkpoint`` (a dict ``torch.load`` returned) was saved after a limit
    stopped its run at batch ``b`` (``b`` >= 1) of epoch ``e`` (counted from 0), before the
    epoch's last batch, with Lightning counting the epoch as processed; else ``None`` (also for a
    checkpoint saved at an epoch's end or by Lightning inside an epoch, which resumes there)."""
    try:
        loop = checkpoint["loops"]["fit_loop"]
        epochs = loop["epoch_progress"]["current"]
        batches = loop["epoch_loop.batch_progress"]
        done = int(batches["current"]["processed"])
        if batches.get("is_last_batch") is False and done >= 1 and int(epochs["processed"]) == int(epochs["ready"]) >= 1:
            return int(epochs["processed"]) - 1, done
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
    return None


def other_batches(path: str | Path, data: Any, state: dict | None = None) -> str | None:
    """A one-line refusal when the checkpoint at ``path`` stopped inside an epoch
    (:func:`stopped_position`) and ``data`` (this run's data settings, ``.get(key)``) cuts the
    epoch into other batches (:data:`BATCH_KEYS`): its resume skips the batches already trained
    by their count, which would then be other rows.  ``None`` otherwise.  ``state``: the
    checkpoint already read (:func:`read_checkpoint`)."""
    state = read_checkpoint(path) if state is None else state
    if not isinstance(state, dict):
        return None
    where = checkpoint_position(state)   # a limit's stop or an interrupt's checkpoint inside an epoch
    saved = state.get("datamodule_hyper_parameters") or {}
    if where is None or not where[1] or data is None:
        return None
    for key in BATCH_KEYS:
        if key in saved and data.get(key) is not None and data.get(key) != saved[key]:
            return (f"--ckpt_path {path} stopped inside epoch {where[0] + 1} after {where[1]} batches of "
                    f"data.{key}={saved[key]}; this run's data.{key}={data.get(key)} cuts the epoch into other "
                    f"batches, so its resume would train other rows: resume with --data.{key}={saved[key]} "
                    f"(a later run may change it at an epoch's end)")
    return None


def world_size_refusal(path: str | Path, state: dict | None, world_size: int) -> str | None:
    """A one-line refusal when the checkpoint ``state`` (of the file at ``path``) stopped inside an
    epoch (:func:`checkpoint_position`) under another number of processes (:data:`WORLD_KEY`) than
    this run's ``world_size``, else ``None`` (also for a checkpoint that does not record it).

    Its ``b`` batches are each process's: ``w`` processes trained batches ``0 .. b*w - 1`` of the
    epoch (an encoder's batch ``i`` on process ``i % w``; an embedding's distributed sampler cuts
    the epoch's rows into ``w`` shares), and a resume skips ``b`` batches of its own share, so
    under ``w' != w`` processes it would skip other batches and train some twice.  At an epoch's
    end nothing is skipped: the next epoch is whole under any number of processes."""
    saved = state.get(WORLD_KEY) if isinstance(state, dict) else None
    where = checkpoint_position(state) if isinstance(state, dict) else None
    if not isinstance(saved, int) or where is None or not where[1] or saved == int(world_size):
        return None
    return (f"--ckpt_path {path} stopped inside epoch {where[0] + 1} after {where[1]} batches "
            f"{'on each of ' if saved > 1 else 'on '}{_processes(saved)}; this run has {_processes(world_size)}, whose shares of the epoch are other batches, so "
            f"its resume would skip batches never trained and train others twice: resume with {_processes(saved)} "
            f"(--trainer.devices={saved}{' --trainer.strategy=ddp' if saved > 1 else ''}; a later run may "
            "change it at an epoch's end)")


def _processes(n: int) -> str:
    return f"{n} process{'es' if n != 1 else ''}"


def checkpoint_step(path: str | Path) -> int | None:
    """The ``global_step`` of the checkpoint at ``path`` (``torch.load(weights_only=True)``, its
    tensors mapped, not read), or ``None`` for a file it cannot read."""
    import pickle

    import torch

    try:
        state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        return int(state["global_step"])
    except (OSError, RuntimeError, EOFError, TypeError, ValueError, KeyError, IndexError, AttributeError,
            pickle.UnpicklingError):
        return None


def finished_checkpoint(path: str | Path, max_epochs: int | None, max_steps: int | None,
                        state: dict | None = None) -> str | None:
    """A one-line message when the checkpoint at ``path`` has nothing left to train under
    ``max_epochs`` / ``max_steps`` (Lightning's own stop rule: the epochs its fit loop
    processed, less one stopped inside, or its ``global_step``), else ``None`` (also for a file it cannot read with
    ``torch.load(weights_only=True)``: Lightning then reports what is wrong).  ``state``: the
    checkpoint already read (:func:`read_checkpoint`).

    ``max_epochs=None`` with ``max_steps`` -1 or ``None`` is Lightning's default of 1000 epochs."""
    state = read_checkpoint(path) if state is None else state
    progress = checkpoint_progress(path, whole_epochs=True, state=state)   # a stopped epoch's rest is still to train
    if progress is None:
        return None
    epochs, steps = progress
    max_steps = -1 if max_steps is None else int(max_steps)
    if max_epochs is None:
        max_epochs = 1000 if max_steps == -1 else -1
    if max_steps != -1 and steps >= max_steps:
        limit = f"--trainer.max_steps={max_steps}"
    elif max_epochs != -1 and epochs >= int(max_epochs):
        limit = f"--trainer.max_epochs={max_epochs}"
    else:
        return None
    held = progress_text(state) or epochs_text(epochs)
    return (f"already complete: {path} holds {held}, {steps} optimizer steps, and this run stops at "
            f"{limit}; nothing trained, nothing written (raise {limit.split('=')[0]} to train on)")


# what a start that failed before training leaves in a new version folder
_START_FILES = re.compile(r"events\.out\.tfevents\..*|config\.yaml|hparams\.yaml")


def watch_folder(save_dir, name) -> tuple[Path, bool, set[str]]:
    """The run's folder, whether it exists and its ``version_*`` folders, before the run starts."""
    root = Path(save_dir, name)
    return root, root.is_dir(), {p.name for p in root.glob("version_*")}


def remove_failed_start(watch: tuple[Path, bool, set[str]] | None) -> list[Path]:
    """Remove the ``version_*`` folders a failed start created, when they hold only what the
    start writes (events files, ``config.yaml``, ``hparams.yaml``, an empty ``checkpoints/``),
    so the next run gets the same version; then the run's folder if this start created it and it
    is empty.  Returns the removed folders."""
    import shutil

    if watch is None:
        return []
    root, existed, before = watch
    removed = []
    for folder in sorted(root.glob("version_*")):
        if folder.name in before or not folder.is_dir():
            continue
        entries = list(folder.iterdir())
        if all((e.is_file() and _START_FILES.fullmatch(e.name)) or (e.is_dir() and not any(e.iterdir()))
               for e in entries):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    if not existed and root.is_dir() and not any(root.iterdir()):
        root.rmdir()
        removed.append(root)
    return removed
