"""Walk 72 (determinism): copies of one memory tie exactly and rank by insertion order; a run's
saved config re-runs; provenance of checkpoints and encoder folders."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from types import SimpleNamespace

import pytest
import torch

from hypermem import Memory
from hypermem.embed.encoder_folder import EncoderSettings, read_settings, software_versions
from hypermem.embed.hashing import HashingEmbedder
from hypermem.index import ShellDistance, exact_topk
from hypermem.index.topk import TIE_PAD

T0 = datetime(2024, 1, 1, tzinfo=timezone.utc)


@pytest.mark.parametrize("dim", [256, 384])
def test_copies_of_a_memory_tie_exactly_in_insertion_order(dim):
    # The blocked matrix product rounds a row by its place in the store: copies scored a few
    # ulps apart and ranked by that noise (n = 11, 14, 15 among these out of order before the fix).
    g = torch.Generator().manual_seed(0)
    dup = torch.randn(dim, generator=g).tolist()
    for n in range(9, 17):
        others = torch.randn(n, dim, generator=g)
        m = Memory(embedder=HashingEmbedder(dim=dim), clock=lambda: T0 + timedelta(days=1))
        m.add_many([{"text": f"t{i}", "id": f"m{i:03d}", "t": T0,
                     "embedding": dup if i % 3 == 0 else others[i].tolist()} for i in range(n)])
        q = torch.tensor(dup) + 0.3 * torch.randn(dim, generator=g)
        res = [r for r in m.search((0.5 * q / q.norm()).tolist(), k=n, hybrid=0.0) if int(r.record.id[1:]) % 3 == 0]
        ids = [r.record.id for r in res]
        assert ids == sorted(ids), (n, ids)
        assert len({float(r.score) for r in res}) == 1, n


def test_more_copies_than_the_pad_straddle_the_cut_and_the_lowest_indices_win():
    g = torch.Generator().manual_seed(3)
    N, d, k = 5000, 256, 3
    K = torch.nn.functional.normalize(torch.randn(N, d, generator=g), dim=1)
    Q = torch.nn.functional.normalize(torch.randn(2, d, generator=g), dim=1)
    copies = [4999, 17, 2500, 3, 4000, 1234, 700, 4500, 90, 3333][: TIE_PAD + 6]
    K[copies] = torch.nn.functional.normalize(Q[0] + 0.2 * K[0], dim=0)   # the best match of query 0
    dist = ShellDistance(1.0, 1.0)
    for bias in (None, torch.zeros(N)):
        s, i, _ = exact_topk(Q, K, k, dist, bias, dist.inverse, max_product=1.0)
        assert i[0].tolist() == sorted(copies)[:k]
        assert len(set(s[0].tolist())) == 1
        ref = (-dist(Q[1:] @ K.T))[0]
        assert i[1].tolist() == sorted(range(N), key=lambda j: (-float(ref[j]), j))[:k]


class _Parser:
    def __init__(self):
        self.saved = []

    def save(self, cfg, path, **kw):
        self.saved.append((dict(cfg), path))
        open(path, "w").write(json.dumps({"ckpt_path": cfg.ckpt_path, "max_epochs": cfg.max_epochs}))


class _Config(dict):
    __getattr__ = dict.__getitem__

    def __setattr__(self, key, value):
        self[key] = value

    def clone(self):
        return _Config(self)


def test_saved_config_leaves_ckpt_path_out_and_a_resumed_part_keeps_the_first(tmp_path):
    from hypermem.train.run_config import RunConfig

    trainer = SimpleNamespace(log_dir=str(tmp_path), is_global_zero=True,
                              strategy=SimpleNamespace(broadcast=lambda x: x))

    def part(ckpt, epochs):
        cfg = _Config(ckpt_path=ckpt, max_epochs=epochs)
        RunConfig(_Parser(), cfg).setup(trainer, None, "fit")
        assert cfg.ckpt_path == ckpt   # the run's own config is not changed

    part(None, 2)
    part(str(tmp_path / "checkpoints" / "last.ckpt"), 4)
    part(str(tmp_path / "checkpoints" / "last.ckpt"), 6)
    read = lambda name: json.loads((tmp_path / name).read_text())   # noqa: E731
    assert read("config.yaml") == {"ckpt_path": None, "max_epochs": 2}
    assert read("config-part2.yaml") == {"ckpt_path": None, "max_epochs": 4}
    assert read("config-part3.yaml") == {"ckpt_path": None, "max_epochs": 6}


def test_encoder_json_records_versions_and_older_folders_still_load(tmp_path):
    raw = EncoderSettings("poincare", 8, 1 / 8).to_json()
    import hypermem

    assert raw["versions"] == software_versions() and {"hypermem", "torch", "numpy"} <= set(raw["versions"])
    assert raw["versions"]["torch"] == torch.__version__ and raw["versions"]["hypermem"] == hypermem.__version__
    for doc in (raw, {k: v for k, v in raw.items() if k != "versions"}):
        (tmp_path / "hypermem_encoder.json").write_text(json.dumps(doc))
        assert read_settings(tmp_path, 8).curvature == 1 / 8
