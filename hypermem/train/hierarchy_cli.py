"""``LightningCLI`` entry for hierarchy embeddings.

::

    python -m hypermem.train fit --config mammals_poincare        # a shipped config, by name
    python -m hypermem.train fit --config mammals_poincare --model.dim=5 --trainer.max_epochs=50
    hypermem train --config mammals_poincare          # the same through the hypermem command
    hypermem train --config path/to/my.yaml           # or any config file
    python -m hypermem.train fit --config mammals_poincare --ckpt_path=last   # resume

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


def resolve_config_args(argv: list[str]) -> list[str]:
    """``argv`` with each ``--config NAME`` / ``--config=NAME`` of a shipped config replaced by
    its file (:func:`hypermem.configs.config_path`); existing paths are kept as given."""
    from ..configs import config_path

    out = list(argv)
    for i, arg in enumerate(out):
        if arg == "--config" and i + 1 < len(out):
            j, value, prefix = i + 1, out[i + 1], ""
        elif arg.startswith("--config="):
            j, value, prefix = i, arg[len("--config="):], "--config="
        else:
            continue
        try:
            out[j] = prefix + str(config_path(value))
        except FileNotFoundError:
            pass  # not a file and not a shipped name: LightningCLI reports it
    return out


def main(args: list[str] | None = None, run: bool = True):
    """Run the CLI (``args`` defaults to ``sys.argv[1:]``); returns the ``LightningCLI``."""
    _quiet()
    from lightning.pytorch.cli import LightningCLI

    _quiet()  # lightning resets its logger level on import
    from .hierarchy_data import HierarchyDataModule
    from .hierarchy_module import HierarchyModule

    argv = resolve_config_args(list(sys.argv[1:] if args is None else args))
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
