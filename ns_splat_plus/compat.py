"""Workarounds for upstream bugs, each naming the bug. Nothing here patches upstream code globally.

* torchmetrics' LPIPS downloads AlexNet weights when constructed, so an offline machine cannot even
  build splatfacto (torchmetrics builds ``torchvision.models.alexnet(weights=IMAGENET1K_V1)``).
  ``build_lpips`` builds it only when the weights are already in the torch hub cache.
* nerfstudio checkpoints hold numpy scalars (the LR schedulers' ``_last_lr``), which
  ``torch.load(weights_only=True)``, the default since torch 2.6, rejects (nerfstudio #3683).
  ``weights_only_safe`` turns them into Python numbers before saving, so ns-eval, ns-viewer,
  ns-export and resume load our checkpoints on any torch version without a flag.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import numpy as np
import torch

from nerfstudio.utils.rich_utils import CONSOLE

_LPIPS_WARNED = False


def alexnet_weights_path() -> Path:
    """Where torchvision looks for the AlexNet weights that LPIPS needs ($TORCH_HOME/hub/checkpoints)."""
    from torchvision.models import AlexNet_Weights

    filename = AlexNet_Weights.IMAGENET1K_V1.url.rsplit("/", 1)[-1]
    return Path(torch.hub.get_dir()) / "checkpoints" / filename


def build_lpips() -> Optional[torch.nn.Module]:
    """torchmetrics' LPIPS (AlexNet) if its weights are available locally, else None and one warning.

    Never downloads: copy ``alexnet-owt-7be5be79.pth`` into ``$TORCH_HOME/hub/checkpoints`` (by
    default ``~/.cache/torch/hub/checkpoints``) to get LPIPS on an offline machine.
    """
    global _LPIPS_WARNED
    path = alexnet_weights_path()
    if not path.is_file():
        if not _LPIPS_WARNED:
            CONSOLE.print(
                f"[yellow]LPIPS unavailable: AlexNet weights not found at {path} (nothing is downloaded). "
                "LPIPS is reported as null; copy the file there (or set TORCH_HOME) to enable it.[/yellow]"
            )
            _LPIPS_WARNED = True
        return None
    from torchmetrics.image.lpip import LearnedPerceptualImagePatchSimilarity

    return LearnedPerceptualImagePatchSimilarity(normalize=True)


def weights_only_safe(obj: Any) -> Any:
    """A copy of a checkpoint structure with numpy scalars/arrays replaced by Python numbers/tensors."""
    if isinstance(obj, dict):
        return {k: weights_only_safe(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [weights_only_safe(v) for v in obj]
    if isinstance(obj, tuple):
        return tuple(weights_only_safe(v) for v in obj)
    if isinstance(obj, np.ndarray):
        return torch.from_numpy(obj)
    if isinstance(obj, np.generic):
        return obj.item()
    return obj  # tensors, Python numbers, strings, None: loadable as they are
