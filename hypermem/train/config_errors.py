"""One line for a bad value of a training config: the setting, where it was set, what is accepted.

:mod:`~hypermem.train.hierarchy_cli` prints these as ``error: ...`` and exits with status 2, as
for any other mistake in the options:

- a value of the wrong type (``model: {dim: three}`` in ``my.yaml``; the parser's errors are
  followed by the line ``tip: `hypermem train fit --help` lists every option``)::

      error: model.dim: expected an integer, got 'three' (set in my.yaml)

- a config file that is not valid YAML (``dim: [3``)::

      error: my.yaml: not valid YAML at line 2, column 1: expected ',' or ']', but got '<stream end>' (while parsing a flow sequence started at line 1, column 14)

- a value a module refuses (``data: {batch_size: 0}``)::

      error: data.batch_size must be a positive integer, got 0 (set in my.yaml)

- a base model that is no folder and not in the local Hugging Face cache
  (``model: {base: bert-base-uncased}``; nothing is downloaded)::

      error: model.base='bert-base-uncased' (set in my.yaml): no such folder and no model of that name in the local Hugging Face cache, ...

- a ``trainer.max_time`` Lightning cannot read (``"5 minutes"``)::

      error: trainer.max_time: '5 minutes' is not a duration (set in my.yaml); give "DD:HH:MM:SS" (e.g. "00:00:05:00" for 5 minutes) or a mapping such as {minutes: 5}

The file named is the last ``--config`` that sets the key (:func:`~hypermem.train.config_paths.setting_file`),
none when the command line sets it after every such file.
"""

from __future__ import annotations

import re
from datetime import timedelta

from .config_paths import setting_file

__all__ = ["max_time_error", "module_error", "parser_value_error", "trainer_error", "yaml_error"]

_TYPE_WORDS = {"int": "an integer", "float": "a number", "bool": "true or false", "str": "a string",
               "NoneType": "null", "dict": "a mapping", "list": "a list", "timedelta": "a duration"}
# Lightning's Timer reads a string duration with this pattern (lightning.pytorch.callbacks.Timer)
_DURATION = re.compile(r"(\d+):(\d\d):(\d\d):(\d\d)")
_GROUPS = ("model", "data")


def _where(argv: list[str], key: str) -> str:
    source = setting_file(argv, key)
    return f" (set in {source})" if source else ""


def _type_words(text: str) -> str:
    names = re.findall(r"<class '(?:[\w.]*\.)?(\w+)'>", text)
    words = list(dict.fromkeys(_TYPE_WORDS.get(n, n) for n in names))
    return " or ".join(words) if words else text.strip().rstrip(".")


def parser_value_error(message: str, argv: list[str]) -> str | None:
    """``model.dim: expected an integer, got 'three' (set in FILE)`` for jsonargparse's
    ``Parser key "model.dim": Expected a <class 'int'>. Got value: three`` (also its Union
    form: ``Subtypes: [...]`` and ``Given value: ...``); ``None`` for another message."""
    m = re.match(r'\s*Parser key "([\w.\-]+)":\s*(.*)', message, re.S)
    if not m or m.group(1) == "config":   # a missing config file: the CLI lists the shipped ones
        return None
    key, rest = m.groups()
    value = re.search(r"(?:Got|Given) value: (.*)", rest)
    subtypes = re.search(r"Subtypes: \[(.*?)\]", rest)
    expected = re.search(r"Expected a (.*?)(?:\. Got value|$)", rest, re.M)
    if subtypes:
        accepted = _type_words(subtypes.group(1))
    elif expected:
        accepted = _type_words(expected.group(1))
    else:
        accepted = " ".join(rest.split())[:200]
    got = f", got {value.group(1).strip()!r}" if value else ""
    return f"{key}: expected {accepted}{got}{_where(argv, key)}"


def yaml_error(config_files: list[str]) -> str | None:
    """``FILE: not valid YAML at line L, column C: PROBLEM (CONTEXT started at line ..)`` for the
    first of ``config_files`` that PyYAML cannot parse, ``None`` when every one parses."""
    import yaml

    for path in config_files:
        try:
            with open(path, encoding="utf-8") as f:
                yaml.safe_load(f)
        except (OSError, UnicodeDecodeError):
            continue
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
            started = ""
            if exc.context:
                cm = exc.context_mark
                started = f" ({exc.context}" + (f" started at line {cm.line + 1}, column {cm.column + 1})"
                                                if cm else ")")
            return f"{path}: not valid YAML{at}: {exc.problem or exc}{started}"
        except yaml.YAMLError as exc:
            return f"{path}: not valid YAML: {' '.join(str(exc).split())}"
    return None


def module_error(message: str, argv: list[str], cfg) -> str:
    """A module's ``ValueError`` message with its setting as a dotted key and where it was set:
    ``dim (--model.dim) must be ...`` -> ``model.dim must be ... (set in FILE)``; a message that
    starts with a key of exactly one group (``lr must be ...``, the model's) gets that group.
    A ``key='value': why`` message (a base model that does not load offline) names the file after
    the value: ``model.base='bert-base-uncased' (set in FILE): no such folder ...``.
    Other messages are kept as they are."""
    m = re.match(r"(\w+) \(--((?:model|data)\.\1)\) ", message)
    key = None
    if m:
        key, message = m.group(2), m.group(2) + " " + message[m.end():]
    elif re.match(r"(?:model|data)\.\w+\b", message):
        key = re.match(r"(?:model|data)\.\w+", message).group(0)
    else:
        leaf = re.match(r"(\w+)\b", message)
        groups = [g for g in _GROUPS if leaf and cfg.get(g) is not None and leaf.group(1) in cfg[g]]
        if len(groups) == 1:
            key = f"{groups[0]}.{leaf.group(1)}"
            message = groups[0] + "." + message
    message = " ".join(message.split())
    if not key:
        return message
    named = re.match(rf"{re.escape(key)}=('[^']*'|\S+?):", message)   # key='value': why (a base model)
    if named:
        return named.group(0)[:-1] + _where(argv, key) + message[named.end() - 1:]
    return message + _where(argv, key)


def trainer_error(message: str, argv: list[str], trainer_cfg) -> str | None:
    """Lightning's refusal of a ``trainer`` value (its ``Trainer`` raises it) as one line naming the
    setting, its value and where it was set: ``trainer.devices: `devices` selected with
    `CPUAccelerator` should be an int > 0, got 'two' (set in FILE)``; ``None`` when the message names
    no setting of ``trainer_cfg`` (the trainer's config: the first word that is one of its keys)."""
    first = (message.strip().splitlines() or [""])[0].strip().rstrip(".")
    keys = set(trainer_cfg.keys()) if hasattr(trainer_cfg, "keys") else set()
    words = [w.lower() for w in re.findall(r"[A-Za-z_]+", first)]
    key = next((w for w in words if w in keys and w in _TRAINER_KEYS), None)
    if key is None:
        return None
    value = trainer_cfg.get(key)
    got = "" if repr(value) in first else f", got {value!r}"
    return f"trainer.{key}: {' '.join(first.split())}{got}{_where(argv, 'trainer.' + key)}"


# the settings of Lightning's Trainer whose bad values its messages name by their own word
_TRAINER_KEYS = ("devices", "accelerator", "strategy", "precision", "num_nodes", "plugins")


def max_time_error(value, argv: list[str]) -> str | None:
    """Why ``trainer.max_time`` ``value`` is not a duration Lightning's ``Timer`` reads (a string
    ``DD:HH:MM:SS``, a mapping of ``timedelta``'s arguments, a ``timedelta``), or ``None``."""
    if value is None or isinstance(value, timedelta):
        return None
    if isinstance(value, str):
        if _DURATION.fullmatch(value.strip()):
            return None
    elif hasattr(value, "items"):
        try:
            timedelta(**dict(value.items()))
            return None
        except (TypeError, ValueError, OverflowError):
            pass
    shown = dict(value.items()) if hasattr(value, "items") else value
    return (f"trainer.max_time: {shown!r} is not a duration{_where(argv, 'trainer.max_time')}; give "
            '"DD:HH:MM:SS" (e.g. "00:00:05:00" for 5 minutes) or a mapping such as {minutes: 5} '
            "(days, hours, minutes, seconds)")
