"""One value for the keys both the LightningModule and its data module take.

``HierarchyModule`` and ``HierarchyDataModule`` both take ``seed`` and ``burn_in``, the encoder's
modules both take ``seed``; Lightning refuses a run whose two modules hold different values
for one hyperparameter.  So each such key is one setting of the run: ``--model.seed=7``,
``--data.seed=7`` and ``--seed_everything=7`` all set the seed of both modules (and
Lightning's global seed), ``--model.burn_in=2`` or ``--data.burn_in=2`` the burn-in of both.
Of the places that set a key (each ``--config`` file, the command-line options between
them), the last one decides, as for any other key; one place that gives it two different
values (``--model.seed=1 --data.seed=2``) is refused in one line.
"""

from __future__ import annotations

from pathlib import Path

# keys both HierarchyModule and HierarchyDataModule take (the encoder's modules: seed)
SHARED_KEYS = ("burn_in", "seed")
# Lightning's global seed: one more name of the run's seed (a ``false`` turns global seeding off)
GLOBAL_SEED = "seed_everything"


def options(argv: list[str]) -> list[tuple[str, str | None]]:
    """``(key, value)`` of the ``--key=value`` / ``--key value`` options of ``argv``."""
    out = []
    for i, arg in enumerate(argv):
        if not arg.startswith("--"):
            continue
        key, eq, value = arg[2:].partition("=")
        if not eq:
            nxt = argv[i + 1] if i + 1 < len(argv) else None
            value = nxt if nxt is not None and not nxt.startswith("--") else None
        out.append((key, value))
    return out


def flat_keys(tree, prefix: str = "") -> set[str]:
    """Every dotted key of a nested mapping: ``{"model": {"dim": 5}}`` -> ``{"model", "model.dim"}``."""
    out: set[str] = set()
    if isinstance(tree, dict):
        for key, value in tree.items():
            name = f"{prefix}{key}"
            out.add(name)
            out |= flat_keys(value, name + ".")
    return out


def file_keys(path: str) -> set[str]:
    """Every dotted key of the YAML file at ``path`` (``~`` expanded, as jsonargparse does; none
    when it cannot be read or parsed)."""
    import yaml

    try:
        return flat_keys(yaml.safe_load(Path(path).expanduser().read_text(encoding="utf-8")))
    except (OSError, yaml.YAMLError, UnicodeDecodeError):
        return set()


def last_setting(argv: list[str], names: set[str]) -> set[str]:
    """Which of ``names`` (dotted keys) the last place of ``argv`` that sets any of them sets: a
    ``--config`` file, or the command-line options since the last ``--config``."""
    last: set[str] = set()
    options_since_config = False
    for key, value in options(argv):
        if key == "config" and value:
            found = names & file_keys(value)
            options_since_config = False
            if found:
                last = found
        elif key in names:
            if not options_since_config:
                last, options_since_config = set(), True
            last.add(key)
    return last


def unify_shared_keys(cfg, argv: list[str], keys=SHARED_KEYS) -> dict[str, object]:
    """Give ``model.<key>`` and ``data.<key>`` of the parsed config ``cfg`` one value for
    each of ``keys`` both groups have (see the module docstring), the seed also to
    ``seed_everything`` unless that is ``false``.  Returns ``{key: value}`` of the run;
    raises ``ValueError`` (one line) for one place that gives two values."""
    model, data = cfg.get("model"), cfg.get("data")
    out = {}
    for key in keys:
        if model is None or data is None or key not in model or key not in data:
            continue
        names = {f"model.{key}", f"data.{key}"}
        global_seed = key == "seed" and type(cfg.get(GLOBAL_SEED)) is int
        if global_seed:
            names.add(GLOBAL_SEED)
        given = last_setting(argv, names) or names
        values = {name: cfg[name] for name in sorted(given)}
        if len(set(values.values())) > 1:
            said = " and ".join(f"{k}={v}" for k, v in values.items())
            raise ValueError(f"{said} differ: the model and the data take one {key}; give one of them "
                             f"(--model.{key} or --data.{key}{' or --seed_everything' if global_seed else ''} "
                             "sets both)")
        value = next(iter(values.values()))
        model[key] = data[key] = value
        if global_seed and cfg[GLOBAL_SEED] != value:
            from lightning.pytorch import seed_everything

            cfg[GLOBAL_SEED] = seed_everything(value, workers=True)
        out[key] = value
    return out
