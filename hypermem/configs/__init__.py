"""The YAML training configs shipped inside the package.

They travel in the wheel, so an installed hypermem finds them by name from any folder::

    hypermem train --config mammals_poincare          # a shipped config, by name
    hypermem train --config path/to/my.yaml           # or any file

:func:`config_path` resolves either form; :func:`available` lists the names.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["CONFIG_DIR", "available", "config_path"]

CONFIG_DIR = Path(__file__).resolve().parent
"""The folder of the shipped ``*.yaml`` configs."""


def available() -> list[str]:
    """Names of the shipped configs (file stems), sorted."""
    return sorted(p.stem for p in CONFIG_DIR.glob("*.yaml"))


def config_path(config: str | Path) -> Path:
    """The file for ``config``: an existing path as given, else a shipped config by name.

    A name may be given with or without ``.yaml`` (``"mammals_poincare"``,
    ``"mammals_poincare.yaml"``, or the checkout-relative ``"configs/mammals_poincare.yaml"``).
    Raises :class:`FileNotFoundError` naming the shipped configs when neither exists.
    """
    path = Path(config)
    if path.is_file():
        return path
    stem = path.name[: -len(".yaml")] if path.name.endswith(".yaml") else path.name
    shipped = CONFIG_DIR / f"{stem}.yaml"
    # only a bare name or a configs/NAME path means a shipped config, never another folder's file
    if shipped.is_file() and (len(path.parts) == 1 or path.parent.name == "configs"):
        return shipped
    raise FileNotFoundError(f"no such config file or shipped config: {str(config)!r} "
                            f"(shipped: {', '.join(available())})")
