"""A walk with awkward paths (walk73): a PostgreSQL URL whose password is not percent-encoded
never shows (a fragment of) it in an error, through the API, ``hypermem stats`` and ``hypermem mcp``;
``~`` in every path the CLI takes is expanded, as ``hypermem mcp --store`` always did, also where
the shell leaves it (``--out=~/x``, a quoted ``'~/x'``); ``hypermem train --config=~/x.yaml`` and
``--data.dataset=~/x.tsv`` find their files."""

from __future__ import annotations

import re

import pytest
from test_cli_walk_outputs import run

from hypermem import HashingEmbedder, Memory
from hypermem.cli.parser import build_parser
from hypermem.store.backends import StorageError
from hypermem.store.backends.pg_errors import UNPARSED, libpq_text

pytestmark = pytest.mark.usefixtures("one_thread")

# nothing listens on port 1: a URL libpq can read fails with "connection refused"
BAD_URLS = ["postgresql://alice:my secret pw@127.0.0.1:1/db",
            "postgresql://alice:100%sure@127.0.0.1:1/db",
            "postgresql://alice:s3cr3t@Pass@127.0.0.1:1/db",
            "postgresql://alice:p@ss#w?rd/x@127.0.0.1:1/db"]


def _leaks(url: str, text: str) -> list[str]:
    """Every 4-character piece of the URL's password (or user) that ``text`` shows."""
    info = re.match(r"postgresql://(.*)@", url).group(1)
    return [info[i:i + 4] for i in range(len(info) - 3) if info[i:i + 4] in text]


@pytest.mark.parametrize("url", BAD_URLS)
def test_an_unencoded_password_never_shows_in_the_api_error(url):
    pytest.importorskip("psycopg")
    with pytest.raises(StorageError) as err:
        Memory.open(url)
    text = str(err.value)
    assert not _leaks(url, text), text
    assert UNPARSED in text and "'postgresql://127.0.0.1:1/db'" in text


@pytest.mark.parametrize("url", BAD_URLS)
def test_an_unencoded_password_never_shows_in_the_cli_error(capsys, url):
    pytest.importorskip("psycopg")
    code, out, err = run(capsys, "stats", url)
    assert code == 1 and "the URL does not parse" in err and not _leaks(url, out + err), err


def test_an_unencoded_password_never_shows_in_the_mcp_error(capsys):
    pytest.importorskip("psycopg")
    pytest.importorskip("mcp")
    url = BAD_URLS[0]
    code, out, err = run(capsys, "mcp", "--store", url, "--embedder", "hashing")
    assert code == 1 and "the URL does not parse" in err and not _leaks(url, out + err), err


def test_libpq_text_cuts_the_userinfo_only():
    url = "postgresql://alice:100%sure@127.0.0.1:1/db"
    text = libpq_text(ValueError('invalid percent-encoded token: "100%sure"'), url)
    assert text == f'{UNPARSED} (invalid percent-encoded token: "***")'    # "invalid" keeps its "ali"
    refused = ValueError('connection to server at "127.0.0.1", port 1 failed: Connection refused')
    assert libpq_text(refused, "postgresql://alice:Sup3rSecretPW@127.0.0.1:1/db") == str(refused)
    lost = ValueError('password authentication failed for user "alice"')   # a URL that parses
    assert libpq_text(lost, "postgresql://alice:pw@h/db") == 'password authentication failed for user "***"'


# ---------------------------------------------------------------------------- ~ in the CLI
@pytest.fixture
def home(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(tmp_path)
    return home


def test_every_path_argument_expands_a_tilde(home):
    parse = build_parser().parse_args
    h = str(home)
    ns = parse(["demo", "--out=~/d", "-o", "~/stem", "--config", "~/c.yaml", "--runs", "~/runs"])
    assert (ns.out, ns.output, ns.config, ns.runs) == (f"{h}/d", f"{h}/stem", f"{h}/c.yaml", f"{h}/runs")
    assert parse(["inspect", "~/m.db", "-o", "~/p.html"]).output == f"{h}/p.html"
    for cmd in ("tree", "stats", "search"):
        assert parse([cmd, "~/m.db"]).memory == f"{h}/m.db"
    ns = parse(["export", "~/m.db", "~/out.json"])
    assert (ns.memory, ns.output) == (f"{h}/m.db", f"{h}/out.json")
    ns = parse(["import", "~/in.json", "~/out.db", "--embedder", "~/enc"])
    assert (ns.source, ns.output, ns.embedder) == (f"{h}/in.json", f"{h}/out.db", f"{h}/enc")
    assert parse(["fit-reranker", "~/m.db", "--out=~/rr"]).out == f"{h}/rr"
    ns = parse(["mcp", "--store", "~/a.db", "--hierarchy", "~/h", "--reranker", "~/r"])
    assert (ns.store, ns.hierarchy, ns.reranker) == (f"{h}/a.db", f"{h}/h", f"{h}/r")
    ns = parse(["export", "m.db", "-", "--format", "csv"])
    assert (ns.memory, ns.output) == ("m.db", "-")                 # no ~: as given


def test_stats_import_and_export_read_and_write_under_home(capsys, home, tmp_path):
    with Memory.open(home / "m.db", embedder=HashingEmbedder(dim=16)) as mem:
        mem.add("a dog", id="dog")
    code, out, err = run(capsys, "stats", "~/m.db")
    assert code == 0 and "count" in out, err
    code, out, err = run(capsys, "export", "~/m.db", "~/ex.json")
    assert code == 0 and (home / "ex.json").is_file(), err
    code, out, err = run(capsys, "import", "~/ex.json", "~/agent.db", "--durable")
    assert code == 0 and (home / "agent.db").is_file(), err
    assert not (tmp_path / "~").exists()
    with Memory.open(home / "agent.db", read_only=True) as again:
        assert again.ids == ["dog"]


# ---------------------------------------------------------------------------- ~ in train's scan
def test_train_reads_config_and_dataset_paths_with_a_tilde(home):
    from hypermem.train.config_paths import resolve_dataset, setting_source
    from hypermem.train.shared_keys import file_keys, last_setting

    (home / "exp").mkdir()
    (home / "exp" / "pets.tsv").write_text("dog\tanimal\n")
    (home / "exp" / "tiny.yaml").write_text("data: {dataset: pets.tsv, burn_in: 20}\nmodel: {dim: 2}\n")
    argv = ["fit", "--config=~/exp/tiny.yaml"]
    assert {"data.dataset", "data.burn_in", "model.dim"} <= file_keys("~/exp/tiny.yaml")
    assert last_setting(argv, {"data.burn_in", "model.burn_in"}) == {"data.burn_in"}
    assert setting_source(argv) == home / "exp" / "tiny.yaml"
    assert resolve_dataset("pets.tsv", argv) == str(home / "exp" / "pets.tsv")
    assert resolve_dataset("~/exp/pets.tsv", argv + ["--data.dataset=~/exp/pets.tsv"]) == str(home / "exp" / "pets.tsv")


# ---------------------------------------------------------------------------- awkward names shown
def test_a_path_with_a_newline_is_shown_as_its_repr(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, "stats", "no\nsuch.db")
    assert code == 1 and err.strip() == "hypermem stats: error: no such memory file: 'no\\nsuch.db'"
    code, out, err = run(capsys, "stats", tmp_path / "plain.db")        # a printable path: as is
    assert err.strip().endswith(f"no such memory file: {tmp_path}/plain.db")


def test_saving_a_model_onto_a_dangling_link_names_the_link(tmp_path):
    from hypermem.embed.folder_files import save_folder

    (tmp_path / "dang").symlink_to(tmp_path / "nowhere" / "x")
    with pytest.raises(FileExistsError, match="dangling symbolic link") as err:
        save_folder(tmp_path / "dang", "config.json", "hypermem encoder")
    assert "nowhere/x" in str(err.value) and "File exists" not in str(err.value)
