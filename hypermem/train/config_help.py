"""The training command's ``--help`` names the configs shipped in the package.

``hypermem train --config wordnet_encoder`` (or ``python -m hypermem.train fit --config
mammals_poincare``) takes a shipped config by name (:func:`hypermem.configs.config_path`); the
help of the command and of each subcommand lists them, read from the installed package's folder
(:func:`hypermem.configs.available`) each time the help is built, each with the first line of
its leading comment::

    shipped configs (--config NAME, e.g. --config wordnet_encoder):
      mammals_cones        Hyperbolic entailment cones (Ganea et al. 2018) on the WordNet ...
      ...
"""

from __future__ import annotations

import argparse
from pathlib import Path

from .. import configs

__all__ = ["config_summary", "shipped_configs_text", "with_shipped_configs"]

CONFIG_HELP = ("a YAML (or JSON) config file, or the name of a config shipped with hypermem (--config NAME; "
               "listed below); a later --config overrides an earlier one")


def config_summary(path: Path, width: int = 90) -> str:
    """The first line of the config's leading ``#`` comment (without a trailing comma), at most
    ``width`` characters; ``""`` when it starts with no comment or cannot be read."""
    try:
        with open(path, encoding="utf-8") as f:
            first = f.readline()
    except (OSError, UnicodeDecodeError):
        return ""
    if not first.startswith("#"):
        return ""
    text = " ".join(first.lstrip("#").split()).rstrip(",;:.")
    return text if len(text) <= width else text[: width - 3].rstrip() + "..."


def shipped_configs_text() -> str:
    """A heading and one line per shipped config: its name and its summary."""
    names = configs.available()
    if not names:
        return "shipped configs (--config NAME): none found in this installation"
    width = max(map(len, names))
    lines = [f"  {name:<{width}}  {config_summary(configs.CONFIG_DIR / f'{name}.yaml')}".rstrip() for name in names]
    return "\n".join([f"shipped configs (--config NAME, e.g. --config {names[-1]}):", *lines])


def with_shipped_configs(parser):
    """``parser`` (a LightningCLI parser: the command's or a subcommand's) with its ``--config``
    help saying that a shipped config's name is taken, and the list of them after the options."""
    for action in getattr(parser, "_actions", ()):
        if "--config" in getattr(action, "option_strings", ()):
            action.help = CONFIG_HELP
    text = shipped_configs_text()
    parser.epilog = f"{parser.epilog}\n\n{text}" if parser.epilog else text
    # the list one config a line: the epilog (and the short description) printed as written
    parser.formatter_class = type("ConfigListFormatter", (argparse.RawDescriptionHelpFormatter,
                                                          parser.formatter_class), {})
    return parser
