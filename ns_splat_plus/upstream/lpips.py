"""LPIPS as splatfacto builds it (torchmetrics, torchvision's AlexNet weights), but from local weights or
one short-timeout download, never a hang or a crash offline; see :mod:`ns_splat_plus.upstream`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, List, NamedTuple, Optional

import torch
from nerfstudio.utils.rich_utils import CONSOLE
from torch import Tensor

from ns_splat_plus.upstream.torchmetrics_private import import_torchmetrics

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
    import_torchmetrics()
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


# --- LPIPS in row strips: the same value within a bounded device memory --------------------------------
# Touches torchmetrics 1.x's _LPIPS internals (``scaling_layer``, ``net.slice1..N``, ``lins``, ``L``,
# ``_normalize_tensor``), written for torchmetrics 1.9 (AlexNet as torchvision builds it). Anything else
# (another backbone, ``spatial`` or ``resize`` set) is reported by :func:`lpips_strip_geometry` as None.


class _RowMap(NamedTuple):
    """Rows of one LPIPS feature map as rows of the input: row ``i`` reads input rows
    ``[i * stride - pad, i * stride - pad + field)`` (zero rows outside the image)."""

    stride: int
    pad: int
    field: int


def lpips_strip_geometry(metric: torch.nn.Module) -> Optional[List[_RowMap]]:
    """The row map of each of LPIPS' feature maps (AlexNet: 5), or None where the metric is not the
    plain torchmetrics LPIPS this was written for (then only the whole-image call is used)."""
    net = getattr(metric, "net", None)
    backbone = getattr(net, "net", None)
    if net is None or backbone is None or getattr(net, "spatial", True) or getattr(net, "resize", 0) is not None:
        return None
    slices: List[Any] = [getattr(backbone, f"slice{i}", None) for i in range(1, int(getattr(net, "L", 0)) + 1)]
    if not slices or any(s is None for s in slices) or len(getattr(net, "lins", [])) != len(slices):
        return None
    maps, stride, pad, field = [], 1, 0, 1
    for block in slices:
        for layer in block:
            if isinstance(layer, (torch.nn.Conv2d, torch.nn.MaxPool2d)):
                k, s, p = (_pair_rows(getattr(layer, name)) for name in ("kernel_size", "stride", "padding"))
                if isinstance(layer, torch.nn.MaxPool2d) and (layer.ceil_mode or _pair_rows(layer.dilation) != 1):
                    return None
                if isinstance(layer, torch.nn.Conv2d) and _pair_rows(layer.dilation) != 1:
                    return None
                pad, field, stride = pad + p * stride, field + (k - 1) * stride, stride * s
            elif not isinstance(layer, torch.nn.ReLU):
                return None
        maps.append(_RowMap(stride, pad, field))
    return maps


def _pair_rows(value) -> int:
    return int(value[0] if isinstance(value, (tuple, list)) else value)


def lpips_strip_halo(geometry: List[_RowMap]) -> int:
    """Input rows a strip reads beyond its own rows, above and below together (memory planning)."""
    align = max(m.stride for m in geometry)
    return max(m.pad for m in geometry) + align + max(m.field - m.pad for m in geometry)


def lpips_in_row_strips(
    metric: torch.nn.Module, img1: Tensor, img2: Tensor, rows: int, device: Optional[torch.device] = None
) -> float:
    """``metric(img1, img2)`` (torchmetrics' LPIPS, ``normalize`` as built) computed over row strips of
    about ``rows`` input rows each, so that the device holds one strip's features at a time.

    Each strip's crop reaches far enough above and below for its rows of every feature map to read only
    real image rows, and starts on a row that keeps every layer's stride grid; each feature map's rows
    are split between the strips, and its spatial mean is the sum over strips / its size. The same value
    as the whole-image call, float rounding aside (``tests/evaluation/test_evaluation.py``).

    Args:
        metric: torchmetrics' ``LearnedPerceptualImagePatchSimilarity`` (``lpips_strip_geometry`` not None).
        img1, img2: [1, 3, H, W] images in [0, 1] (``normalize=True``) or [-1, 1].
        rows: input rows per strip without the rows read around it (rounded down to the stride grid).
        device: where each strip is computed (the metric's device; its crops are copied there), or
            None: where the images are.

    Returns:
        LPIPS of the two images.
    """
    from torchmetrics.functional.image.lpips import _normalize_tensor

    geometry = lpips_strip_geometry(metric)
    if geometry is None or img1.shape[0] != 1:
        raise ValueError("lpips_in_row_strips: not a torchmetrics LPIPS of known layers, or not one image pair")
    net: Any = metric.net
    normalize = bool(getattr(metric, "normalize", False))  # [0, 1] inputs: each crop to [-1, 1], as torchmetrics does
    H = img1.shape[-2]
    align = max(m.stride for m in geometry)
    rows = max(align, rows // align * align)
    top = -(-max(m.pad for m in geometry) // align) * align
    bottom = max(m.field - m.pad for m in geometry)
    totals = [0.0] * len(geometry)
    counts = [0] * len(geometry)
    for start in range(0, H, rows):
        stop = min(H, start + rows)
        c0, c1 = max(0, start - top), min(H, stop + bottom)
        crops = [img[:, :, c0:c1].to(device or img.device) for img in (img1, img2)]  # no whole-image copy
        feats = [net.scaling_layer(2 * crop - 1 if normalize else crop) for crop in crops]
        del crops
        for index, (block, row_map, lin) in enumerate(zip(_slices(net), geometry, net.lins)):
            feats = [block(f) for f in feats]
            # this strip's rows of the map: those whose anchor row (i * stride) is in [start, stop), the last
            # strip taking every row below; a crop row's global index is its index + c0 / stride
            first = -(-start // row_map.stride)
            last = -(-stop // row_map.stride) if stop < H else feats[0].shape[-2] + c0 // row_map.stride
            _check_rows_exact(row_map, first, last, c0, c1, H)
            offset = c0 // row_map.stride
            a, b = (_normalize_tensor(f[:, :, first - offset : last - offset]) for f in feats)
            if a.shape[-2] == 0:  # a small map whose rows all anchor in other strips
                continue
            totals[index] += float(lin((a - b) ** 2).sum())
            counts[index] += a.shape[-2] * a.shape[-1]  # rows past the map's end (near the bottom) do not exist
    return sum(total / count for total, count in zip(totals, counts))


def _slices(net) -> List[torch.nn.Module]:
    return [getattr(net.net, f"slice{i}") for i in range(1, int(net.L) + 1)]


def _check_rows_exact(row_map: _RowMap, first: int, last: int, c0: int, c1: int, H: int) -> None:
    """Every kept row reads only crop rows, or zero padding where the crop edge is the image's edge."""
    lo = first * row_map.stride - row_map.pad
    hi = (last - 1) * row_map.stride - row_map.pad + row_map.field
    if (c0 > 0 and lo < c0) or (c1 < H and hi > c1) or c0 % row_map.stride:
        raise RuntimeError(f"LPIPS strip rows {first}-{last} read outside the crop {c0}-{c1}")
