"""LPIPS as splatfacto builds it (torchmetrics, torchvision's AlexNet weights), but from local weights or
one short-timeout download, never a hang or a crash offline; see :mod:`ns_splat_plus.upstream`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

import torch
from nerfstudio.utils.rich_utils import CONSOLE

_LPIPS_WARNED = False


def alexnet_weights_path() -> Path:
    """Where torchvision looks for the AlexNet weights that LPIPS needs ($TORCH_HOME/hub/checkpoints)."""
    from torchvision.models import AlexNet_Weights

    filename = AlexNet_Weights.IMAGENET1K_V1.url.rsplit("/", 1)[-1]
    return Path(torch.hub.get_dir()) / "checkpoints" / filename


LPIPS_DOWNLOAD_TIMEOUT_S = 10.0
ALEXNET_URL_ENV = "NS_SPLAT_PLUS_ALEXNET_URL"
"""Where to download the AlexNet weights from (default: torchvision's URL, as splatfacto does)."""
NO_DOWNLOAD_ENV = "NS_SPLAT_PLUS_NO_DOWNLOAD"
"""Set to 1 to never download (LPIPS is then null unless the weights are local)."""
_DOWNLOAD_FAILED: Optional[str] = None  # tried once per process


def _download_alexnet(path: Path) -> Optional[str]:
    """Download the AlexNet weights to ``path`` (atomically); returns None or why it failed."""
    global _DOWNLOAD_FAILED
    if os.environ.get(NO_DOWNLOAD_ENV, "").strip() not in ("", "0"):
        return f"downloads are off (${NO_DOWNLOAD_ENV})"
    if _DOWNLOAD_FAILED is not None:
        return _DOWNLOAD_FAILED
    import hashlib
    import urllib.request

    from torchvision.models import AlexNet_Weights

    url = os.environ.get(ALEXNET_URL_ENV) or AlexNet_Weights.IMAGENET1K_V1.url
    tmp = path.with_name(f".{path.name}.{os.getpid()}.part")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        digest = hashlib.sha256()
        with urllib.request.urlopen(url, timeout=LPIPS_DOWNLOAD_TIMEOUT_S) as response, open(tmp, "wb") as out:
            while chunk := response.read(1 << 20):
                digest.update(chunk)
                out.write(chunk)
        expected = path.stem.rsplit("-", 1)[-1]  # torchvision's files end in a SHA-256 prefix
        if url == AlexNet_Weights.IMAGENET1K_V1.url and not digest.hexdigest().startswith(expected):
            raise ValueError(f"the downloaded file's SHA-256 does not start with {expected}")
        tmp.replace(path)
        CONSOLE.print(f"LPIPS: downloaded the AlexNet weights to {path}")
        return None
    except Exception as err:  # offline, DNS, timeout, HTTP error, a full disk: LPIPS is then null
        tmp.unlink(missing_ok=True)
        _DOWNLOAD_FAILED = f"{type(err).__name__}: {err}"
        return _DOWNLOAD_FAILED


_UNAVAILABLE: Optional[str] = None
"""Why the last :func:`build_lpips` returned None (the warning :func:`warn_lpips_unavailable` prints)."""


def build_lpips(warn: bool = True) -> Optional[torch.nn.Module]:
    """torchmetrics' LPIPS (AlexNet), as splatfacto builds it, or None with one warning.

    Uses the weights in ``$TORCH_HOME/hub/checkpoints`` when present; otherwise downloads them as
    splatfacto does (torchvision's URL), with a short timeout and once per process. Offline,
    LPIPS is None (reported as null, never 0): copy ``alexnet-owt-7be5be79.pth`` into
    ``$TORCH_HOME/hub/checkpoints`` (by default ``~/.cache/torch/hub/checkpoints``) to enable it.
    ``warn=False``: the warning waits for :func:`warn_lpips_unavailable` (the model calls it where an
    evaluation would have computed LPIPS: not in ns-viewer or ns-export, and on rank 0 only).
    """
    global _UNAVAILABLE
    path = alexnet_weights_path()
    if not path.is_file():
        failure = _download_alexnet(path)
        if failure is not None:
            _UNAVAILABLE = (
                f"LPIPS unavailable: AlexNet weights not found at {path} and not downloaded "
                f"({failure}). LPIPS is reported as null; copy the file there (or set TORCH_HOME) to enable it."
            )
            if warn:
                warn_lpips_unavailable()
            return None
    from torchmetrics.image.lpip import LearnedPerceptualImagePatchSimilarity

    return LearnedPerceptualImagePatchSimilarity(normalize=True)


def warn_lpips_unavailable() -> None:
    """The one warning (once per process) that LPIPS could not be built, if it could not."""
    global _LPIPS_WARNED
    if _UNAVAILABLE is None or _LPIPS_WARNED:
        return
    from rich.markup import escape

    CONSOLE.print(f"[yellow]{escape(_UNAVAILABLE)}[/yellow]", soft_wrap=True)  # one line in logs, however long
    _LPIPS_WARNED = True
