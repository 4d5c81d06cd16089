"""Walk 74: ``trainer.logger`` other than one plain TensorBoardLogger (a list of loggers, a
TensorBoardLogger subclass, a CSVLogger) keeps the run folder's resume and best-checkpoint rules."""

import csv
from pathlib import Path

import pytest
from lightning.pytorch.loggers import Logger, TensorBoardLogger
from train_helpers import run_train, train_tiny

pytest.importorskip("lightning")


class CompanyTB(TensorBoardLogger):
    """A company's TensorBoard logger: a subclass, as a user's package holds one."""


class NoFolder(Logger):
    """A logger without Lightning's save_dir/name/version folder."""

    name, version = "nofolder", 0

    def __init__(self, save_dir: str = "."):
        super().__init__()
        self.where = save_dir

    def log_metrics(self, metrics, step=None):
        pass

    def log_hyperparams(self, params, *args, **kwargs):
        pass


def _logger(tmp: Path, *entries: str) -> str:
    """A config file setting ``trainer.logger`` to ``entries`` (``class_path:save_dir``), a list if several."""
    import yaml

    nodes = [{"class_path": e.split(":")[0], "init_args": {"save_dir": e.split(":")[1]}} for e in entries]
    (tmp / "log.yaml").write_text(yaml.safe_dump({"trainer": {"logger": nodes[0] if len(nodes) == 1 else nodes}}))
    return "log.yaml"


def _steps(path: Path) -> list[int]:
    with path.open(newline="") as f:
        return sorted({int(float(r["step"])) for r in csv.DictReader(f) if r.get("val/map")})


def test_a_csv_logger_resumes_in_its_version_with_its_rows_and_finds_best(tmp_path, capsys):
    cfg = _logger(tmp_path, "lightning.pytorch.loggers.CSVLogger:csvruns")
    first = train_tiny(tmp_path, "--config", cfg, "--trainer.max_epochs=1")
    folder = tmp_path / first.trainer.log_dir
    assert folder.parent == tmp_path / "csvruns" / "log" and "tensorboard" not in capsys.readouterr().out
    resumed = run_train(tmp_path, ["fit", "--config", "tiny.yaml", "--config", cfg, "--trainer.max_epochs=2",
                                   "--ckpt_path=last"])
    assert tmp_path / resumed.trainer.log_dir == folder and not (folder.parent / "version_1").exists()
    val = _steps(folder / "metrics.csv")   # the first part's rows kept, then the resumed part's
    assert len(val) == 2 and val[0] == resumed.trainer.global_step // 2
    assert f"metrics: {Path(resumed.trainer.log_dir, 'metrics.csv')}" in capsys.readouterr().out
    run_train(tmp_path, ["validate", "--config", "tiny.yaml", "--config", cfg, "--ckpt_path=best"])
    assert "no run of this name" not in capsys.readouterr().err
    assert [p.name for p in folder.glob("validate-best-*/metrics.csv")] == ["metrics.csv"]
    assert _steps(folder / "metrics.csv") == val   # the fit's rows untouched by the validate


def test_a_list_with_a_tensorboard_subclass_first_resumes_both_in_their_versions(tmp_path, capsys):
    cfg = _logger(tmp_path, f"{__name__}.CompanyTB:tbruns", "lightning.pytorch.loggers.CSVLogger:csvruns")
    first = train_tiny(tmp_path, "--config", cfg, "--trainer.max_epochs=1")
    tb = tmp_path / first.trainer.log_dir
    assert tb == tmp_path / "tbruns" / "log" / "version_0" and (tb / "checkpoints" / "last.ckpt").is_file()
    out = capsys.readouterr().out
    assert f"tensorboard --logdir {first.trainer.log_dir}; metrics: csvruns/log/version_0/metrics.csv" in out
    resumed = run_train(tmp_path, ["fit", "--config", "tiny.yaml", "--config", cfg, "--trainer.max_epochs=2",
                                   "--ckpt_path=last"])
    assert [Path(lg.log_dir) for lg in resumed.trainer.loggers] == [Path("tbruns/log/version_0"),
                                                                      Path("csvruns/log/version_0")]
    assert not (tmp_path / "tbruns" / "log" / "version_1").exists()
    assert len(_steps(tmp_path / "csvruns" / "log" / "version_0" / "metrics.csv")) == 2
    run_train(tmp_path, ["validate", "--config", "tiny.yaml", "--config", cfg, "--ckpt_path=best"])
    assert list(tb.glob("validate-best-*"))


def test_ckpt_path_last_with_a_logger_without_a_run_folder_is_one_line(tmp_path, capsys):
    cfg = _logger(tmp_path, f"{__name__}.NoFolder:x", "lightning.pytorch.loggers.CSVLogger:csvruns")
    with pytest.raises(SystemExit) as exc:
        train_tiny(tmp_path, "--config", cfg, "--ckpt_path=last")
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and len(err) == 1
    assert "TensorBoardLogger or a CSVLogger" in err[0] and f"{__name__}.NoFolder is not" in err[0]


def test_run_loggers_take_the_class_defaults_and_name_each_run():
    from jsonargparse import Namespace

    from hypermem.train.run_logger import CSV, TENSORBOARD, RunLoggers

    nodes = [Namespace(class_path="lightning.pytorch.loggers.CSVLogger", init_args=Namespace(save_dir="c")),
             Namespace(class_path=f"{__name__}.CompanyTB", init_args=Namespace(save_dir="t", name="mine")),
             Namespace(class_path=f"{__name__}.NoFolder", init_args=Namespace())]
    loggers = RunLoggers(nodes)
    assert [lg.kind for lg in loggers.all] == [CSV, TENSORBOARD] and loggers.driving is loggers.all[0]
    assert loggers.driving.name == "lightning_logs"   # CSVLogger's own default
    loggers.name_runs("run")
    assert [lg.name for lg in loggers.all] == ["run", "mine"]
    assert RunLoggers(False).driving is None and RunLoggers(nodes[2]).all == []
