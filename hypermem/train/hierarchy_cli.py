"""``LightningCLI`` entry for hierarchy embeddings.

::

    python -m hypermem.train fit --config mammals_poincare        # a shipped config, by name
    python -m hypermem.train fit --config mammals_poincare --model.dim=5 --trainer.max_epochs=50
    hypermem train --config mammals_poincare          # the same through the hypermem command
    hypermem train --config path/to/my.yaml           # or any config file
    python -m hypermem.train fit --config mammals_poincare --ckpt_path=last   # resume the latest run
    python -m hypermem.train fit --help               # every option

Every key of the YAML file (``model.*``, ``data.*``, ``trainer.*``) can be overridden on the
command line.  Without a subcommand, ``fit`` is assumed.

**Where a run goes.**  TensorBoard logs and checkpoints go to
``<save_dir>/<name>/version_<N>/`` (``save_dir`` ``runs`` by default).  Unless the config
or the command line names the run (``trainer.logger.init_args.name``), the name is the
config's file name followed by the ``model.*`` and ``data.*`` overrides of the command
line, sorted by key and written as parsed: ``--config mammals_poincare --model.lr=0.50
--model.dim=5 --data.negatives=10`` logs under
``runs/mammals_poincare-data.negatives=10-dim=5-lr=0.5/`` (:func:`run_name`), whatever the
order of the overrides.  ``model.schedule_epochs`` and ``trainer.*`` never enter the name.
``trainer.logger`` may also be a ``CSVLogger``, a subclass of either, or a list of loggers whose
first holds the run's folder (:mod:`~hypermem.train.run_logger`).

**One seed, one burn-in.**  The keys both modules take are one setting of the run
(:mod:`~hypermem.train.shared_keys`): ``--model.seed=7``, ``--data.seed=7`` and
``--seed_everything=7`` each seed the model, the data and Lightning (run name ``...-seed=7``),
``--model.burn_in=2`` or ``--data.burn_in=2`` sets both burn-ins (``...-burn_in=2``).

**Resuming.**  The shipped configs keep ``checkpoints/last.ckpt`` (rewritten after every
epoch) beside the best checkpoint by ``val/map``.  ``--ckpt_path=last`` takes the
``last.ckpt`` of the most recent version of the run's name and continues in that version's
folder, so TensorBoard shows one set of curves (the events a stopped run logged after its
checkpoint's ``global_step`` are purged: ``purge_step`` of the logger's ``SummaryWriter``,
so no step has two points); the batches are seeded per epoch, so the
result equals the uninterrupted run's.  A resume with nothing left to do (the checkpoint
already holds ``trainer.max_epochs`` epochs or ``trainer.max_steps`` steps) says that the run
is already complete and writes nothing: no events file, no config, no checkpoint
(:func:`finished_checkpoint`).

**Output.**  A run ends with its final metrics, the best and last checkpoint paths and the
log folder (and "stopped at the time limit" after ``trainer.max_time``); Ctrl-C prints the step,
the last checkpoint and the command that resumes the run, and exits with status 130.  When stdout is not a terminal the progress bar and the model summary are off
(the bar would write ``\\r`` updates into the file) and one line per epoch is printed instead.  A mistyped
option prints the error, the nearest valid option and how to list them, in a few lines.

**Exact keys.**  Options are matched exactly, as LightningCLI users expect: argparse's prefix
matching is off (``--trainer.max_epoch=5`` is refused with "did you mean
--trainer.max_epochs?", not taken as ``max_epochs``).  A mistyped key inside a config file
(``model: {dimm: 5}``) gets the same suggestion and names the file that holds it
(:func:`_yaml_key_hint`); a bad value (a wrong type, a value a module refuses, a ``trainer.max_time``
that is no duration) or a config file that is not YAML is one line naming the setting and the file
(:mod:`~hypermem.train.config_errors`), status 2.
"""

from __future__ import annotations

import contextlib
import difflib
import logging
import re
import signal
import sys
import warnings
from pathlib import Path

from ..configs import available, config_path
from .config_errors import max_time_error, module_error, parser_value_error, trainer_error, yaml_error
from .config_help import with_shipped_configs
from .config_paths import resolve_data_file, resolve_dataset, setting_file
from .hierarchy_checkpoint import CheckpointError
from .resume_checks import AlreadyComplete, ConfigError, check_resume
from .run_folder import checkpoint_refusal, trust_refusal
from .run_folder import finished_checkpoint as finished_checkpoint
from .run_folder import latest_last_checkpoint as latest_last_checkpoint
from .run_folder import remove_failed_start as remove_failed_start
from .run_folder import watch_folder as _watch
from .run_logger import KeepCsvRows, RunLoggers
from .shared_keys import GLOBAL_SEED, SHARED_KEYS, unify_shared_keys
from .shared_keys import options as _options

SUBCOMMANDS = ("fit", "validate")
# LightningCLI's other subcommands: no test_step or predict_dataloader here
UNSUPPORTED = {"test": "the final metrics of fit (val/map, test/f1) are its test: run "
                       "`validate --ckpt_path=last` to evaluate a checkpoint again",
               "predict": "export a checkpoint instead (HierarchyModule.load_from_checkpoint(path).to_memory())"}
DEFAULT_PROG = "python -m hypermem.train"


# Lightning's advice to sync_dist a value logged per epoch (DDP), for values the modules log from the
# global-zero process only (rank_zero_only=True) or compute alike in every process (the encoder's val/*)
RANK_ZERO_LOGGED = r"It is recommended to use `self.log\('(step|epoch|val/\w+|test/\w+)', \.\.\., sync_dist=True\)`"


def _quiet() -> None:
    for name in ("lightning.pytorch", "lightning.fabric", "lightning"):
        logging.getLogger(name).setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", message=".*LeafSpec.*", category=FutureWarning)
    warnings.filterwarnings("ignore", message=".*does not have many workers.*")
    warnings.filterwarnings("ignore", message=".*LightningCLI.s args parameter is intended.*")
    warnings.filterwarnings("ignore", message=".*torch.jit.script.*", category=DeprecationWarning)
    warnings.filterwarnings("ignore", message=RANK_ZERO_LOGGED)
    # a resume from another folder: said in one line once it is accepted (foreign_resume_note)
    warnings.filterwarnings("ignore", message="The dirpath has changed from")
    # the encoder's epoch dataset has a length and is read in the main process (no workers)
    warnings.filterwarnings("ignore", message="Your `IterableDataset` has `__len__` defined")
    # logging every n steps counts steps across epochs: an epoch shorter than n still logs
    warnings.filterwarnings("ignore", message=r"The number of training batches \(\d+\) is smaller than the logging")
    # jsonargparse 4.49+ deprecations triggered inside Lightning's CLI, not by user configs
    warnings.filterwarnings("ignore", message="(?s).*instantiate_classes.*was deprecated")
    warnings.filterwarnings("ignore", message="(?s).*skip_none parameter was deprecated")
    warnings.filterwarnings("ignore", message="(?s).*add_instantiator.*was deprecated")


def resolve_config_args(argv: list[str]) -> list[str]:
    """``argv`` with each ``--config NAME`` / ``--config=NAME`` of a shipped config replaced by
    its file (:func:`hypermem.configs.config_path`); existing paths are kept as given."""
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


# keys that only steer how a run is continued, not what it is: left out of the run name, so a
# resume may add them (the schedule warning advises --model.schedule_epochs)
UNNAMED_KEYS = ("model.schedule_epochs",)


def _name_value(value: str) -> str:
    """``value`` as the parser reads it (YAML), so ``0.50`` and ``0.5`` give one name: ``0.5``;
    an integral float is written as an integer, a boolean as ``true``/``false``."""
    import yaml

    try:
        parsed = yaml.safe_load(value)
    except yaml.YAMLError:
        parsed = value
    if isinstance(parsed, str) and re.fullmatch(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+", parsed.strip()):
        parsed = float(parsed)  # 1e-3: YAML 1.1 reads a string, the parser a float
    if isinstance(parsed, bool):
        text = str(parsed).lower()
    elif isinstance(parsed, float):
        text = str(int(parsed)) if parsed.is_integer() and abs(parsed) < 1e15 else repr(parsed)
    elif isinstance(parsed, int):
        text = str(parsed)
    else:
        text = value
    return re.sub(r"[^A-Za-z0-9.+_:-]", "", text).replace(":", "_")


def _name_key(key: str) -> str:
    """``dim`` for ``model.dim``; ``data.negatives`` for ``data.negatives``; a key both groups
    take is one setting of the run, named without its group: ``burn_in`` for ``model.burn_in``
    and ``data.burn_in``, ``seed`` for ``model.seed``, ``data.seed`` and ``seed_everything``."""
    if key == GLOBAL_SEED:
        return "seed"
    group, _, short = key.partition(".")
    return short if group == "model" or short in SHARED_KEYS else key


def run_name(argv: list[str]) -> str:
    """The run's name from the command line: the last ``--config``'s file name (``hierarchy``
    without one), then ``-key=value`` for each ``model.*`` and ``data.*`` override, sorted by
    key (the order on the command line does not matter; a key given twice counts once, its
    last value).  ``model.*`` keys drop their group (``dim=5``), ``data.*`` keys keep it
    (``data.negatives=10``), except the keys both groups take, one setting of the run
    (:mod:`~hypermem.train.shared_keys`): ``burn_in=1``, and ``seed=7`` also for
    ``--seed_everything=7``.  Values are written as parsed (``0.50`` is ``0.5``).  Keys that
    only steer a resume (``model.schedule_epochs``) are left out."""
    opts = _options(argv)
    configs = [v for k, v in opts if k == "config" and v]
    name = Path(configs[-1]).stem if configs else "hierarchy"
    chosen = {}
    for key, value in opts:
        if value is None or key in UNNAMED_KEYS or (key == GLOBAL_SEED and _name_value(value) == "false"):
            continue
        if key.startswith(("model.", "data.")) or key == GLOBAL_SEED:
            chosen[_name_key(key)] = _name_value(value)
    for key in sorted(chosen):
        name += "-" + key + "=" + chosen[key]
    return name[:150]


def _spawn_strategy(strategy) -> str | None:
    """The name of ``trainer.strategy`` when it starts its processes with ``spawn`` or
    ``forkserver`` (``ddp_spawn``, ``ddp_spawn_find_unused_parameters_true``, a strategy class
    with ``start_method: spawn``), else ``None``."""
    if isinstance(strategy, str):
        return strategy if "spawn" in strategy or "forkserver" in strategy else None
    if hasattr(strategy, "get"):  # class_path and init_args
        init = strategy.get("init_args") or {}
        method, name = (init.get("start_method") if hasattr(init, "get") else None), strategy.get("class_path")
    else:  # a Strategy object
        method, name = getattr(strategy, "_start_method", None), type(strategy).__name__
    return str(name) if method in ("spawn", "forkserver") else None


def _cli_class():
    from lightning.pytorch.cli import LightningCLI

    class HierarchyCLI(LightningCLI):
        """LightningCLI with the run name and ``--ckpt_path=last`` of the module docstring."""

        argv: list[str] = []
        prog: str = DEFAULT_PROG
        watch: tuple | None = None  # the run's folder before it starts (_watch)
        world_check = None   # check_resume's check of the trainer's number of processes
        csv_rows = None      # the CSV rows a resume keeps (run_logger.KeepCsvRows)

        @staticmethod
        def subcommands() -> dict:
            return {k: v for k, v in LightningCLI.subcommands().items() if k in SUBCOMMANDS}

        def init_parser(self, **kwargs):   # --help lists the shipped configs (config_help)
            return with_shipped_configs(super().init_parser(**kwargs))

        def add_arguments_to_parser(self, parser) -> None:
            """What the parser dumps (``--print_config``, the run's ``config.yaml``) gives the shared
            keys their one value (:func:`~hypermem.train.shared_keys.unify_shared_keys`), so the
            printed YAML runs again as the run it prints."""
            dump, argv = parser.dump, self.argv

            def unified_dump(cfg=None, *args, **kwargs):
                if cfg is not None and hasattr(cfg, "clone"):
                    cfg = cfg.clone()
                    try:
                        unify_shared_keys(cfg, argv)
                    except ValueError as exc:
                        raise ConfigError(str(exc)) from None
                return dump(cfg, *args, **kwargs)

            parser.dump = unified_dump

        def parse_arguments(self, parser, args) -> None:
            try:
                super().parse_arguments(parser, args)
            except Exception as exc:
                if type(exc).__name__ != "ArgumentError":
                    raise
                raise ConfigError(_short_error(exc, parser, self.argv, self.prog)) from None

        def instantiate_classes(self) -> None:
            try:
                super().instantiate_classes()
            except (ValueError, OSError) as exc:   # a module refused a value: its setting and where it was set
                if isinstance(exc, OSError) and exc.errno is not None:
                    raise   # the system's (a disk, a permission), not a value: no config error
                cfg = self.config[self.subcommand] if self.subcommand else self.config
                raise ConfigError(module_error(str(exc), self.argv, cfg)) from None

        def instantiate_trainer(self, **kwargs):
            from lightning.fabric.utilities.exceptions import MisconfigurationException

            try:
                trainer = super().instantiate_trainer(**kwargs)
            except (TypeError, ValueError, MisconfigurationException) as exc:   # a trainer value: its key and file
                cfg = self.config[self.subcommand] if self.subcommand else self.config
                line = trainer_error(str(exc), self.argv, cfg.get("trainer"))
                if line is None:
                    raise
                raise ConfigError(line) from None
            refusal = self.world_check(trainer.world_size) if self.world_check else None
            if refusal:
                raise ConfigError(refusal)
            return trainer

        def _parse_ckpt_path(self) -> None:
            """Nothing: a checkpoint's hyper_parameters never override the user's settings, they are
            compared with them (:mod:`~hypermem.train.checkpoint_hparams`)."""

        def before_instantiate_classes(self) -> None:
            cfg = self.config[self.subcommand] if self.subcommand else self.config
            loggers = RunLoggers(cfg.trainer.get("logger"))   # a logger or a list: the first holds the run
            loggers.name_runs(run_name(self.argv))
            run = loggers.driving
            try:
                unify_shared_keys(cfg, self.argv)
            except ValueError as exc:
                raise ConfigError(str(exc)) from None
            data = cfg.get("data")
            if data is not None and isinstance(data.get("dataset"), str):
                data.dataset = resolve_dataset(data.dataset, self.argv)
            files = ("edges", "names") if data is not None and data.get("hierarchy") == "files" else ()
            for key in (*files, "aliases") if data is not None and data.get("aliases") else files:
                if isinstance(data.get(key), str) and data.get(key):
                    try:
                        setattr(data, key, resolve_data_file(data[key], f"data.{key}", self.argv))
                    except FileNotFoundError as exc:
                        raise ConfigError(str(exc)) from None
            epochs = cfg.trainer.get("max_epochs")
            if self.subcommand == "fit" and isinstance(epochs, int) and (epochs == 0 or epochs < -1):
                raise ConfigError(f"--trainer.max_epochs={epochs} trains nothing: give a positive number of epochs "
                                   "(or -1, no limit, with --trainer.max_steps or --trainer.max_time)")
            bad_time = max_time_error(cfg.trainer.get("max_time"), self.argv)
            if bad_time:
                raise ConfigError(bad_time)
            spawn = _spawn_strategy(cfg.trainer.get("strategy"))
            if spawn:
                raise ConfigError(f"--trainer.strategy={spawn} starts processes by pickling the run, which this "
                                   "command cannot be; use --trainer.strategy=ddp (the same training, one process "
                                   "launched per device)")
            if run is not None:
                HierarchyCLI.watch = _watch(run.save_dir, run.name)
            if self.subcommand != "fit":  # the run's config.yaml stays the one of its fit
                self.save_config_callback = None
            try:   # last, best: the file of the run's folder; a file of the run: its version folder
                path = loggers.resolve_ckpt(cfg.get("ckpt_path"), self.subcommand,
                                            self.model_class.__name__ == "EncoderModule")
                if path != cfg.get("ckpt_path"):   # no ckpt_path key without a subcommand (run=False)
                    cfg.ckpt_path = path
            except ValueError as exc:
                raise ConfigError(str(exc)) from None
            path = cfg.get("ckpt_path")   # unpickled only with --weights_only=false given on the command line
            refusal = trust_refusal(cfg, self.argv, setting_file) or (
                path and Path(path).is_file() and cfg.get("weights_only") is not False and checkpoint_refusal(path))
            if refusal:
                raise ConfigError(refusal)
            if path:   # the file read once
                self.world_check = check_resume(cfg, loggers, self.subcommand, self.model_class.__name__,
                                                self.csv_rows)

    return HierarchyCLI


def _parser_keys(parser) -> list[str]:
    keys = []
    for action in getattr(parser, "_actions", []):
        for opt in getattr(action, "option_strings", []):
            if opt.startswith("--"):
                keys.append(opt)
        sub = getattr(action, "_name_parser_map", None)
        if sub:
            for p in sub.values():
                keys.extend(_parser_keys(p))
    return keys


def _config_files(argv: list[str]) -> list[str]:
    """The ``--config`` values of ``argv`` in order (paths after :func:`resolve_config_args`)."""
    return [v for k, v in _options(argv) if k == "config" and v]


def _rejected_key(head: str) -> str | None:
    """The dotted key of a "does not accept option" error: jsonargparse says ``Subcommand 'fit'
    does not accept option 'model.dimm'`` or, without a subcommand, ``Group 'model' does not
    accept option 'dimm'`` or ``Option 'modle.dim' is not accepted``."""
    m = re.search(r"Option '([\w.\-]+)' is not accepted", head)
    if m:
        return m.group(1)
    m = re.search(r"(Subcommand|Group) '([\w.\-]+)' does not accept option '([\w.\-]+)'", head)
    if not m:
        return None
    return m.group(3) if m.group(1) == "Subcommand" else f"{m.group(2)}.{m.group(3)}"


def _yaml_key_hint(key: str, argv: list[str], keys: list[str]) -> str | None:
    """``did you mean model.dim?  (model.dimm in FILE is not an option)`` for a key of a
    config file that the parser refused; ``FILE`` is the last ``--config`` file holding it."""
    where = setting_file(argv, key)
    near = difflib.get_close_matches(key, [k[2:] for k in keys], n=1, cutoff=0.6)
    place = f" in {where}" if where else ""
    if near:
        return f"did you mean {near[0]}?  ({key}{place} is not an option)"
    return f"{key}{place} is not an option" if where else None


def _short_error(exc: Exception, parser, argv: list[str], prog: str) -> str:
    """At most five lines: the error, the nearest valid option, a tip that works; a value of the
    wrong type or a config file that is not YAML is the one line of :mod:`~hypermem.train.config_errors`
    and the tip."""
    sub = argv[0] if argv and argv[0] in SUBCOMMANDS else "fit"
    tip = f"tip: `{prog} {sub} --help` lists every option"
    one = parser_value_error(str(exc), argv)
    if one is None and str(exc).startswith("Problems parsing config"):
        one = yaml_error(_config_files(argv))
    if one:
        return f"error: {one}\n{tip}"
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    head = lines[0] if lines else type(exc).__name__
    if head.endswith(":") and len(lines) > 1:  # 'Parser key "model.dim":' then the reason
        head += " " + lines[1]
    out = [f"error: {head[:300]}"]
    unknown = re.findall(r"(--[\w.\-]+)", head) if "unrecognized" in head or "not accept" in head else []
    keys = sorted(set(_parser_keys(parser)))
    for bad in unknown[:2]:
        near = difflib.get_close_matches(bad, keys, n=1, cutoff=0.6)
        own = [k for k in ("--model.optimizer", "--model.lr") if k in keys]
        if bad.split("=")[0] in ("--optimizer", "--lr_scheduler") and own:
            out.append(f"the model builds its own optimizer and schedule: set {' / '.join(own)}")
        elif near:
            out.append(f"did you mean {near[0]}?  ({bad} is not an option)")
    rejected = None if unknown else _rejected_key(head)
    hint = _yaml_key_hint(rejected, argv, keys) if rejected else None
    if hint:
        out.append(hint)
    if 'key "config"' in head and "does not exist" in head:
        out.append(f"--config takes a file or a shipped config's name: {', '.join(available())}")
    out.append(tip)
    return "\n".join(out[:5])


def main(args: list[str] | None = None, run: bool = True, prog: str = DEFAULT_PROG):
    """Run the CLI (``args`` defaults to ``sys.argv[1:]``); returns the ``LightningCLI``.

    A mistake in the options or the config prints a few lines to stderr and exits with
    status 2 (``SystemExit``).  A ``fit`` resumed from a checkpoint that has nothing left to
    train prints one line and returns ``None`` (:func:`finished_checkpoint`)."""
    _quiet()
    import lightning  # noqa: F401  (its import resets the logger levels)

    _quiet()
    from lightning.pytorch.utilities.rank_zero import rank_zero_only

    if rank_zero_only.rank:   # a DDP process Lightning launched runs this CLI again: the first one warns
        warnings.simplefilter("ignore")
    from .config_kind import module_classes
    from .hierarchy_callbacks import ProgressLines, RunSummary, resume_command
    from .interrupt_checkpoint import InterruptCheckpoint
    from .run_config import RunConfig

    given = list(sys.argv[1:] if args is None else args)
    argv = resolve_config_args(given)
    if argv and argv[0] in UNSUPPORTED:
        print(f"error: `{argv[0]}` is not supported: {UNSUPPORTED[argv[0]]}", file=sys.stderr)
        raise SystemExit(2)
    module_cls, data_cls = module_classes(argv)
    if run and (not argv or argv[0] not in SUBCOMMANDS + ("-h", "--help")):
        argv = ["fit"] + argv
    tty = sys.stdout.isatty()
    summary = RunSummary(resume=resume_command(prog, given))
    trainer_defaults = {
        "logger": {"class_path": "lightning.pytorch.loggers.TensorBoardLogger",
                   # the run's name (also what --print_config shows; a config or option may name it)
                   "init_args": {"save_dir": "runs", "name": run_name(argv), "default_hp_metric": False}},
        "accelerator": "auto",
        "devices": 1,
        "log_every_n_steps": 1,
        "enable_progress_bar": tty,
        "enable_model_summary": tty,
        # Ctrl-C saves last.ckpt at the stop, before the summary names the last checkpoint
        "callbacks": [InterruptCheckpoint(), summary] + ([] if tty else [ProgressLines()]),
    }
    keep_csv = KeepCsvRows()
    trainer_defaults["callbacks"].append(keep_csv)
    cls = _cli_class()
    cls.argv, cls.prog, cls.watch, cls.csv_rows = argv, prog, None, keep_csv
    on_sigint = signal.getsignal(signal.SIGINT)  # Lightning ignores a second Ctrl-C while it shuts down
    try:
        return cls(module_cls, data_cls, args=argv, run=run, seed_everything_default=0,
                   trainer_defaults=trainer_defaults, save_config_callback=RunConfig,
                   auto_configure_optimizers=False,  # the modules make their own (--model.optimizer, --model.lr)
                   parser_kwargs={"default_env": False, "exit_on_error": False, "prog": prog,
                                  "allow_abbrev": False, **{s: {"allow_abbrev": False} for s in SUBCOMMANDS}})
    except AlreadyComplete as exc:
        print(exc, flush=True)
        return None
    except (ConfigError, CheckpointError) as exc:
        remove_failed_start(cls.watch)
        print(str(exc) if str(exc).startswith("error:") else f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    except SystemExit:
        if summary.interrupted:   # Ctrl-C: Lightning exits 1, SIGTERM 0; the shell's code for the signal instead
            raise SystemExit(summary.exit_status) from None
        raise
    except Exception as exc:   # not an interrupt: a run stopped by the user keeps what it logged
        remove_failed_start(cls.watch)  # no empty version_N left to bump the next run's number
        from lightning.fabric.utilities.exceptions import MisconfigurationException

        if isinstance(exc, MisconfigurationException):  # e.g. --trainer.accelerator=gpu without a GPU
            lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
            print(f"error: {lines[0] if lines else type(exc).__name__}", file=sys.stderr)
            raise SystemExit(2) from None
        raise
    finally:
        with contextlib.suppress(TypeError, ValueError):  # not the main thread, or no Python handler
            signal.signal(signal.SIGINT, on_sigint)

