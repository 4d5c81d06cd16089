"""Relative file paths of a training config, read beside the YAML file that sets them.

``data.dataset`` (hierarchy embeddings) and ``data.edges`` / ``data.names`` (a hierarchy
encoder's own files) given in a ``--config`` file are read from that file's folder:
``data: {edges: edges.jsonl}`` in ``/exp/my.yaml`` is ``/exp/edges.jsonl`` wherever the command
runs.  A value given on the command line after every such file is read from the working
folder.  Absolute paths are kept; ``~`` is expanded in these values and in ``--config=~/...``
(which the shell leaves as it is after ``=``).
"""

from __future__ import annotations

from pathlib import Path

from .shared_keys import file_keys, options

__all__ = ["setting_file", "setting_source", "resolve_dataset", "resolve_data_file"]


def setting_file(argv: list[str], key: str) -> str | None:
    """The ``--config`` value (as given) of the last file of ``argv`` that sets ``key``, or ``None``
    when the command line sets it after every such file (or nothing does)."""
    source = None
    for k, value in options(argv):
        if k == key:
            source = None
        elif k == "config" and value and key in file_keys(value):
            source = value
    return source


def setting_source(argv: list[str], key: str = "data.dataset") -> Path | None:
    """The config file that sets ``key`` last (:func:`setting_file`, resolved), or ``None``."""
    source = setting_file(argv, key)
    return None if source is None else Path(source).expanduser().resolve()


def resolve_dataset(dataset, argv: list[str]):
    """``dataset`` with a relative file path of a config file read from that file's folder:
    ``dataset: edges.tsv`` in ``/exp/tiny.yaml`` is ``/exp/edges.tsv`` wherever the command
    runs (a file of that name in the working folder, and none beside the config, is kept).
    Names (``mammals``, ``wordnet:...``), absolute paths and command-line values are kept; a
    leading ``~`` is expanded (as for ``data.edges``)."""
    if not isinstance(dataset, str) or dataset in ("mammals", "nouns") or dataset.startswith("wordnet:"):
        return dataset
    if dataset.startswith("~"):
        dataset = str(Path(dataset).expanduser())
    source = setting_source(argv, "data.dataset")
    if source is None or Path(dataset).is_absolute():
        return dataset
    beside = source.parent / dataset
    if beside.is_file() or not Path(dataset).is_file():
        return str(beside)
    return dataset


def resolve_data_file(value: str, key: str, argv: list[str]) -> str:
    """The file ``value`` of the setting ``key`` (``data.edges``, ``data.names``): beside the config
    file that set it (else in the working folder), or as given on the command line; its absolute
    path, so that an error reading it names the file that was read.  Raises
    ``FileNotFoundError`` naming the setting and every place looked in."""
    path = Path(value).expanduser()
    source = setting_source(argv, key)
    if path.is_absolute():
        if path.is_file():
            return str(path)
        raise FileNotFoundError(f"{key}: no such file: {value!r}")
    looked = []
    if source is not None:
        beside = source.parent / path
        if beside.is_file():
            return str(beside)
        looked.append(f"beside {source} ({beside})")
    if path.is_file():
        return str(path.absolute())   # as read: errors and the run's config.yaml name this very file
    looked.append(f"in the working folder ({Path.cwd() / path})")
    set_by = f"set in {source}" if source is not None else "given on the command line"
    raise FileNotFoundError(f"{key}: no such file: {value!r} ({set_by}; looked {' and '.join(looked)})")
