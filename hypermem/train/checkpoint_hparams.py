"""What ``hypermem train ... --ckpt_path=FILE`` takes from a checkpoint's ``hyper_parameters``: nothing.

LightningCLI merges a checkpoint's ``hyper_parameters`` over the user's config before the
modules are built (``LightningCLI._parse_ckpt_path``).  A received file would then decide the
run's settings, its own trust included: ``init_from=<a pickle beside it>,
init_from_trusted=True`` made :meth:`HierarchyModule.setup
<hypermem.train.hierarchy_module.HierarchyModule.setup>` unpickle that file with
``torch.load(weights_only=False)``.  So the hypermem CLI never merges them: every setting comes
from the command line and the ``--config`` files, as it does for ``--ckpt_path=last``.  The
checkpoint's values are only compared with the run's (:func:`compare_checkpoint_hparams`):

* a disagreement on a key that changes what the model is (:data:`MODEL_KEYS`: the kind,
  dimension, dtype, curvature or optimizer of a hierarchy embedding; the base, geometry,
  dimension or frozen layers of a hierarchy encoder) refuses the run in one line, before
  anything is built or written (the weights or the optimizer's state would not fit, or would fit
  and mean something else);
* other differences (``lr``, the loss weights, ...) are the user's to make when continuing a
  run: one warning line lists them, and the run takes the command line's values.
"""

from __future__ import annotations

from .run_folder import read_checkpoint

__all__ = ["MODEL_KEYS", "checkpoint_hparams", "compare_checkpoint_hparams"]

# keys that change what a checkpoint's weights and optimizer state are, by module class name
MODEL_KEYS = {
    "HierarchyModule": ("kind", "dim", "dtype", "curvature", "optimizer"),
    "EncoderModule": ("base", "geometry", "dim", "frozen_layers", "curvature"),
}
# keys never compared: a file's trust and start are the user's alone; the schedule's length
# has its own warning (HierarchyModule.on_load_checkpoint); pictures and chunking change no result
QUIET_KEYS = ("init_from", "init_from_trusted", "init_epochs", "init_max_radius", "schedule_epochs",
              "schedule_steps", "log_images", "log_projector", "eval_chunk", "disk_sample", "_instantiator",
              "_class_path")


def checkpoint_hparams(path, state: dict | None = None) -> dict | None:
    """The ``hyper_parameters`` dict of the checkpoint at ``path`` (read with
    ``torch.load(weights_only=True)``; ``state``: the checkpoint already read, not read again),
    or ``None`` when it has none or cannot be read (Lightning then reports the file)."""
    state = read_checkpoint(path) if state is None else state
    hp = state.get("hyper_parameters") if isinstance(state, dict) else None
    return dict(hp) if isinstance(hp, dict) else None


def _same(a, b) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return float(a) == float(b)
    return a == b


def compare_checkpoint_hparams(path, model_cfg, module_name: str, state: dict | None = None) -> str | None:
    """Compare the checkpoint at ``path``'s ``hyper_parameters`` (``state``: the checkpoint
    already read) with the run's ``model`` settings ``model_cfg`` (a mapping).  Raises ``ValueError`` (one line) when they differ on
    one of :data:`MODEL_KEYS`; returns a one-line warning naming the other keys that differ (the
    run keeps its own values), or ``None``."""
    saved = checkpoint_hparams(path, state)
    if not saved:
        return None
    model_keys = MODEL_KEYS.get(module_name, ())
    differ, other = [], []
    for key, value in saved.items():
        if key in QUIET_KEYS or key not in model_cfg or _same(value, model_cfg[key]):
            continue
        (differ if key in model_keys else other).append(f"{key}={value!r} (this run: {model_cfg[key]!r})")
    if differ:
        raise ValueError(f"--ckpt_path {path} holds another model than this run's: {', '.join(differ)}; give "
                         "the same values (--model.KEY=VALUE) or start a new run without --ckpt_path")
    if other:
        return (f"--ckpt_path {path} was trained with {', '.join(other)}; this run uses its own values "
                "(the command line and --config files decide, never the checkpoint)")
    return None
