"""Which LightningModule a training config is for: hierarchy embeddings or a hierarchy encoder.

``hypermem train --config X`` runs one ``LightningCLI``; the pair of classes comes from the
config: a ``model`` section with a ``geometry`` or ``base`` key, or a ``data`` section with a
``hierarchy`` key, is a hierarchy encoder (:class:`~hypermem.train.encoder_module.EncoderModule`
and :class:`~hypermem.train.encoder_data.EncoderDataModule`); anything else is a hierarchy
embedding (:class:`~hypermem.train.hierarchy_module.HierarchyModule`,
:class:`~hypermem.train.hierarchy_data.HierarchyDataModule`).  The same keys given on the
command line (``--model.geometry=...``) count too.
"""

from __future__ import annotations

from pathlib import Path

import yaml

ENCODER_MODEL_KEYS = ("geometry", "base")
ENCODER_DATA_KEYS = ("hierarchy",)


def is_encoder_config(argv: list[str]) -> bool:
    """True when ``argv`` (resolved config paths) configures a hierarchy encoder."""
    for i, arg in enumerate(argv):
        key = arg[2:].split("=", 1)[0] if arg.startswith("--") else ""
        if key in {f"model.{k}" for k in ENCODER_MODEL_KEYS} | {f"data.{k}" for k in ENCODER_DATA_KEYS}:
            return True
        path = arg.split("=", 1)[1] if arg.startswith("--config=") else (
            argv[i + 1] if arg == "--config" and i + 1 < len(argv) else None)
        if path and Path(path).is_file():
            try:
                cfg = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
            except (yaml.YAMLError, UnicodeDecodeError, OSError):
                continue  # LightningCLI reports the file itself
            model = cfg.get("model") if isinstance(cfg, dict) else None
            data = cfg.get("data") if isinstance(cfg, dict) else None
            if (isinstance(model, dict) and any(k in model for k in ENCODER_MODEL_KEYS)) or \
                    (isinstance(data, dict) and any(k in data for k in ENCODER_DATA_KEYS)):
                return True
    return False


def module_classes(argv: list[str]):
    """``(LightningModule class, LightningDataModule class)`` for ``argv``."""
    if is_encoder_config(argv):
        from .encoder_data import EncoderDataModule
        from .encoder_module import EncoderModule

        return EncoderModule, EncoderDataModule
    from .hierarchy_data import HierarchyDataModule
    from .hierarchy_module import HierarchyModule

    return HierarchyModule, HierarchyDataModule
