"""TensorBoard output of :class:`~hypermem.train.hierarchy_module.HierarchyModule` beyond scalars.

At each validation, against ``global_step`` (the optimizer-step count, the x axis of the
scalars too): the Poincaré-disk picture (``embedding/disk``), histograms of the points'
Euclidean norms (``embedding/norm``) and hyperbolic depths ``d(0, x)`` (``embedding/depth``;
Poincaré and cones only), and the embedding projector (tag ``hierarchy``, one entry per
validation, node names and glosses as labels).  At the end of training, ``hp_metric``
(the final ``val/map``) with the run's hyperparameters, for TensorBoard's HPARAMS tab.

The disk picture needs matplotlib (the ``viz`` extra).  A bare install (``pip install
hypermem-torch``, no extras) trains and logs everything else; the picture is skipped with one
line on stderr, once per process (:func:`disk_picture_available`).  matplotlib stays an
extra: it is the only use of it on the training path, and it brings about 40 MB of packages
(pillow, fonttools, kiwisolver, contourpy) to every install that never opens TensorBoard's
IMAGES tab.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import math
import sys
from typing import Any

from ..viz.fonts import quiet_missing_glyphs

_NOTED: set[str] = set()


def disk_picture_available() -> bool:
    """Whether matplotlib can be imported; when not, says once on stderr that the
    TensorBoard disk picture is skipped and how to get it."""
    if importlib.util.find_spec("matplotlib") is not None:
        return True
    if "matplotlib" not in _NOTED:
        _NOTED.add("matplotlib")
        print("note: matplotlib is not installed, so TensorBoard gets no Poincaré-disk picture "
              "(pip install 'hypermem-torch[viz]')", file=sys.stderr, flush=True)
    return False


def tensorboard_writer(logger) -> Any | None:
    """The ``SummaryWriter`` of a TensorBoard logger, ``None`` for any other logger."""
    exp = getattr(logger, "experiment", None) if logger is not None else None
    return exp if exp is not None and hasattr(exp, "add_figure") and hasattr(exp, "add_histogram") else None


def log_embedding_state(tb, module, step: int) -> None:
    """Disk picture, norm/depth histograms and projector of ``module``'s embedding at ``step``."""
    from .hierarchy_figures import poincare_disk_figure
    from .step_axis import evaluated_epoch

    hp = module.hparams
    pts = module.embedding.points().detach()
    norms = pts.norm(dim=1)
    tb.add_histogram("embedding/norm", norms.float().cpu(), global_step=step)
    in_ball = module.objective.geometry == "poincare"
    if in_ball:
        tb.add_histogram("embedding/depth", module.ball.distance_to_origin(pts).float().cpu(), global_step=step)
    if hp.log_images and disk_picture_available():
        shown = pts * math.sqrt(module.ball.curvature) if in_ball else \
            pts / norms.max().clamp_min(1e-12)
        fig = poincare_disk_figure(shown, module.nodes, getattr(module.trainer.datamodule, "tree", None),
                                   title=f"{hp.kind} dim {hp.dim}, epoch {evaluated_epoch(module) + 1}, step {step}")
        with quiet_missing_glyphs():   # drawing it: a label without glyphs was noted once by the figure
            tb.add_figure("embedding/disk", fig, global_step=step)
    if hp.log_projector:
        glosses = getattr(module.trainer.datamodule, "glosses", {}) or {}
        meta = [[_tsv(n), _tsv(glosses.get(n, ""))[:80]] for n in module.nodes]
        add_projector_embedding(tb, pts.float().cpu(), meta, step)


def add_projector_embedding(tb, points, meta, step: int, tag: str = "hierarchy") -> None:
    """``tb.add_embedding`` that keeps the entries an earlier writer of the same folder put in
    ``projector_config.pbtxt`` (a resumed run): the ``SummaryWriter`` rewrites that file from
    its own entries only, so the file's entries from before the call are merged back in (one
    entry a tensor path, the latest kept)."""
    import os

    from google.protobuf import text_format
    from tensorboard.plugins.projector.projector_config_pb2 import ProjectorConfig

    path = os.path.join(tb.get_logdir(), "projector_config.pbtxt")

    def read() -> list:
        config = ProjectorConfig()
        try:
            with open(path, encoding="utf-8") as fh:
                text_format.Parse(fh.read(), config)
        except (OSError, UnicodeDecodeError, text_format.ParseError):
            return []
        return list(config.embeddings)

    before = read()
    again = os.path.isdir(os.path.join(tb.get_logdir(), str(step).zfill(5), tag))
    # a validate of the same checkpoint again rewrites its step's projector files: no "Embedding dir
    # exists" line (the SummaryWriter prints it to stdout)
    with contextlib.redirect_stdout(io.StringIO()) if again else contextlib.nullcontext():
        tb.add_embedding(points, metadata=meta, metadata_header=["name", "gloss"], global_step=step, tag=tag)
    if not before:
        return
    latest = {e.tensor_path: e for e in [*before, *read()]}   # insertion order: the earliest first
    merged = ProjectorConfig()
    merged.embeddings.extend(latest.values())
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text_format.MessageToString(merged))


def _tsv(text) -> str:
    return " ".join(str(text).split())  # no tabs or newlines inside a metadata cell


def log_final_metric(tb, hparams: dict, value: float, step: int) -> None:
    """``hp_metric = value`` at ``step`` and the hyperparameters (TensorBoard's HPARAMS tab)."""
    from torch.utils.tensorboard.summary import hparams as hparams_summary

    clean = {k: (v if isinstance(v, (bool, int, float, str)) else str(v)) for k, v in hparams.items()}
    writer = tb._get_file_writer()
    for summary in hparams_summary(clean, {"hp_metric": value}):
        writer.add_summary(summary)
    tb.add_scalar("hp_metric", value, global_step=step)
    tb.flush()
