"""Helpers of the Lightning CLI tests: run ``hypermem.train`` in a folder, read its scalars."""

import os
from pathlib import Path


def run_train(tmp: Path, argv: list[str]):
    """``hypermem.train.hierarchy_cli.main(argv)`` with ``tmp`` as the working folder (runs/ goes there)."""
    from hypermem.train.hierarchy_cli import main

    cwd = os.getcwd()
    os.chdir(tmp)
    try:
        return main(argv)
    finally:
        os.chdir(cwd)


def scalars(logdir: Path, tag: str) -> list[tuple[int, float]]:
    """``(step, value)`` of every TensorBoard scalar ``tag`` under ``logdir``."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(logdir), size_guidance={"scalars": 0})
    acc.Reload()
    return [(e.step, e.value) for e in acc.Scalars(tag)]
