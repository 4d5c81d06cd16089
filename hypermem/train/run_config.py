"""The config a ``fit`` saves in its version folder, one file a part of the run.

Lightning's ``SaveConfigCallback`` writes the parsed config to ``<version>/config.yaml``
with ``ckpt_path`` as given, and a resumed fit (``--ckpt_path=last``) writes over the first
part's file: the folder then holds only the last part's settings plus a path to a
checkpoint in that very folder, which a fresh ``--config config.yaml`` elsewhere cannot
find.  :class:`RunConfig` saves every part's settings without ``ckpt_path`` (a fit from
the file starts from scratch) and never writes over an earlier part: the first fit of a
version folder writes ``config.yaml``, a resumed one the next free ``config-part<N>.yaml``
(``N = 2, 3, ...``), so ``config.yaml`` is the run as it was started and each part file the
settings it went on with.
"""

from __future__ import annotations

from pathlib import Path

from lightning.pytorch.cli import SaveConfigCallback

__all__ = ["RunConfig", "part_file"]


def part_file(log_dir: str | Path, resumed: bool) -> Path:
    """Where a fit's config goes: ``config.yaml``, or for a resumed fit whose folder already
    has one, the first ``config-part<N>.yaml`` not there yet."""
    first = Path(log_dir) / "config.yaml"
    if not resumed or not first.exists():
        return first
    n = 2
    while (Path(log_dir) / f"config-part{n}.yaml").exists():
        n += 1
    return Path(log_dir) / f"config-part{n}.yaml"


class RunConfig(SaveConfigCallback):
    """``SaveConfigCallback`` that leaves ``ckpt_path`` out and keeps earlier parts' files
    (see the module docstring)."""

    def setup(self, trainer, pl_module, stage: str) -> None:
        if self.already_saved:
            return
        log_dir = trainer.log_dir  # broadcasts the directory
        if trainer.is_global_zero and log_dir is not None:
            config = self.config.clone()
            resumed = bool(config.get("ckpt_path"))
            config.ckpt_path = None
            path = part_file(log_dir, resumed)
            path.parent.mkdir(parents=True, exist_ok=True)
            self.parser.save(config, str(path), skip_none=False, overwrite=True, multifile=self.multifile)
            self.already_saved = True
        self.already_saved = trainer.strategy.broadcast(self.already_saved)
