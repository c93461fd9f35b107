"""Upstream workarounds: offline LPIPS, and checkpoints loadable with weights_only=True."""

from __future__ import annotations

import numpy as np
import torch

from ns_splat_plus import compat


def test_lpips_is_none_without_local_weights(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    monkeypatch.setattr(compat, "_LPIPS_WARNED", False)
    assert compat.build_lpips() is None
    assert compat.build_lpips() is None
    out = capsys.readouterr().out
    assert out.count("LPIPS unavailable") == 1  # one warning, not one per model
    assert str(tmp_path) in out


def test_lpips_is_built_from_local_weights_without_network(tmp_path, monkeypatch):
    import torchvision

    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    weights = compat.alexnet_weights_path()
    assert str(weights).startswith(str(tmp_path))
    weights.parent.mkdir(parents=True)
    torch.manual_seed(0)
    torch.save(torchvision.models.alexnet(weights=None).state_dict(), weights)  # stand-in for the real file
    lpips = compat.build_lpips()
    assert lpips is not None
    a, b = torch.rand(1, 3, 64, 64), torch.rand(1, 3, 64, 64)
    assert float(lpips(a, a)) == 0.0
    assert float(lpips(a, b)) > 0.0


def test_checkpoint_structures_become_weights_only_loadable(tmp_path):
    state = {
        "step": np.int64(7),
        "schedulers": {"means": {"_last_lr": [np.float64(1.6e-4)], "base_lrs": (np.float32(2.0),)}},
        "array": np.arange(3, dtype=np.float32),
        "tensor": torch.ones(2),
        "name": "splat-plus",
        "nothing": None,
    }
    path = tmp_path / "ckpt.pt"
    torch.save(state, path)
    try:
        torch.load(path, weights_only=True)
        raw_loads = True
    except Exception:  # torch >= 2.6 refuses numpy scalars: nerfstudio #3683
        raw_loads = False
    torch.save(compat.weights_only_safe(state), path)
    loaded = torch.load(path, weights_only=True)
    assert loaded["step"] == 7 and isinstance(loaded["step"], int)
    assert loaded["schedulers"]["means"]["_last_lr"] == [1.6e-4]
    assert loaded["schedulers"]["means"]["base_lrs"] == (2.0,)
    assert torch.equal(loaded["array"], torch.arange(3, dtype=torch.float32))
    assert torch.equal(loaded["tensor"], torch.ones(2))
    assert loaded["name"] == "splat-plus" and loaded["nothing"] is None
    assert not raw_loads, "this torch accepts numpy scalars with weights_only: the test proves nothing here"
