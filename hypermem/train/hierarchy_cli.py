"""``LightningCLI`` entry for hierarchy embeddings.

::

    python -m hypermem.train fit --config configs/mammals_poincare.yaml
    python -m hypermem.train fit --config configs/mammals_poincare.yaml --model.dim=5 --trainer.max_epochs=50
    hypermem train --config configs/mammals_poincare.yaml          # the same through the hypermem command
    python -m hypermem.train fit --config configs/mammals_poincare.yaml --ckpt_path=last   # resume

Every key of the YAML file (``model.*``, ``data.*``, ``trainer.*``) can be overridden on the
command line.  Without a subcommand, ``fit`` is assumed.  Logs (TensorBoard) and
checkpoints go under ``runs/`` unless the config says otherwise.
"""

from __future__ import annotations

import logging
import sys
import warnings

SUBCOMMANDS = ("fit", "validate", "test", "predict")


def _quiet() -> None:
    for name in ("lightning.pytorch", "lightning.fabric", "lightning"):
        logging.getLogger(name).setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", message=".*LeafSpec.*", category=FutureWarning)
    warnings.filterwarnings("ignore", message=".*does not have many workers.*")
    warnings.filterwarnings("ignore", message=".*LightningCLI.s args parameter is intended.*")
    warnings.filterwarnings("ignore", message=".*torch.jit.script.*", category=DeprecationWarning)
    # jsonargparse 4.49+ deprecations triggered inside Lightning's CLI, not by user configs
    warnings.filterwarnings("ignore", message="(?s).*instantiate_classes.*was deprecated")
    warnings.filterwarnings("ignore", message="(?s).*skip_none parameter was deprecated")


def main(args: list[str] | None = None, run: bool = True):
    """Run the CLI (``args`` defaults to ``sys.argv[1:]``); returns the ``LightningCLI``."""
    _quiet()
    from lightning.pytorch.cli import LightningCLI

    _quiet()  # lightning resets its logger level on import
    from .hierarchy_data import HierarchyDataModule
    from .hierarchy_module import HierarchyModule

    argv = list(sys.argv[1:] if args is None else args)
    if run and (not argv or argv[0] not in SUBCOMMANDS + ("-h", "--help")):
        argv = ["fit"] + argv
    trainer_defaults = {
        "logger": {"class_path": "lightning.pytorch.loggers.TensorBoardLogger",
                   "init_args": {"save_dir": "runs", "name": "hierarchy"}},
        "accelerator": "auto",
        "devices": 1,
        "log_every_n_steps": 10,
    }
    return LightningCLI(HierarchyModule, HierarchyDataModule, args=argv, run=run, seed_everything_default=0,
                        trainer_defaults=trainer_defaults, save_config_kwargs={"overwrite": True},
                        parser_kwargs={"default_env": False})
