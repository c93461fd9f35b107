"""Starting the real command line in tests: the one place that builds and runs ns-train, ns-eval and
torchrun commands. Every test that starts one belongs to the slow tier (``@pytest.mark.slow``):
conftest.py fails a unit-tier test that starts a process.

    proc = run(ns_train_cmd(scene, tmp_path / "out", "bad", 40, "--pipeline.model.sh-degree", "-1"))
    assert_one_message(proc, "sh-degree", status=2)
    run(torchrun_cmd(2, *ns_train_cmd(scene, out, "two", 40)))
"""

from __future__ import annotations

import math
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Dict, Optional, Sequence

from ns_splat_plus.demo import SceneSpec

TINY_SCENE = SceneSpec(n_views=8, width=32, height=24, focal=28.0, n_points=200)
"""The smallest synthetic COLMAP scene the CLI tests train (8 views of 32x24; the interval split holds 1 out)."""
SPARSE = Path("colmap") / "sparse" / "0"
"""Where the synthetic scene keeps its COLMAP model, relative to the scene."""

CPU_CLI_ARGS = [
    "--machine.device-type",
    "cpu",
    "--vis",
    "tensorboard",
    "--viewer.quit-on-train-completion",
    "True",
    "--logging.local-writer.enable",
    "False",
    "--steps-per-eval-all-images",
    "100000",
    "--steps-per-eval-image",
    "100000",
    "--steps-per-eval-batch",
    "100000",
    "--pipeline.model.num-downscales",
    "0",
]
"""ns-train options of the CLI tests that are not about these options: CPU, no viewer server (a test
that is about the viewer or a documented command runs with the defaults), no periodic evaluation, full
resolution."""


def console_script(name: str) -> str:
    """Path of a console script (ns-train, ns-eval, torchrun): the one beside this Python if there
    is one (a venv that is not activated), else the one on PATH (the device's install target)."""
    beside = Path(sys.executable).parent / name
    if beside.exists():
        return str(beside)
    found = shutil.which(name)
    if found is None:
        raise FileNotFoundError(f"{name} is neither beside {sys.executable} nor on PATH")
    return found


def free_port() -> int:
    """A TCP port free on this machine now (torchrun's rendezvous, the viewer)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cli_env(**extra: str) -> dict:
    """The environment of a CLI run: this process's, unbuffered, 200 columns (rich wraps a message less)."""
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    env["COLUMNS"] = "200"
    env.update(extra)
    return env


def ns_train_cmd(
    data: Path,
    out: Path,
    name: str,
    steps: int,
    *extra: str,
    method: str = "splat-plus",
    dataparser: Sequence[str] = ("colmap",),
    timestamp: Optional[str] = "run",
    cli_args: Sequence[str] = tuple(CPU_CLI_ARGS),
    warmup_steps: Optional[int] = 0,
) -> list:
    """``ns-train METHOD`` on ``data`` into ``out/name/METHOD/timestamp``, ``steps`` steps, with
    ``cli_args`` (:data:`CPU_CLI_ARGS`), then ``extra`` and the dataparser subcommand (tyro keeps the
    last value of an option, so ``extra`` overrides ``cli_args``)."""
    cmd = [console_script("ns-train"), method, "--data", str(data), "--output-dir", str(out)]
    cmd += ["--experiment-name", name, "--max-num-iterations", str(steps)]
    if warmup_steps is not None:
        cmd += ["--warmup-steps", str(warmup_steps)]
    cmd += list(cli_args)
    if timestamp is not None:
        cmd += ["--timestamp", timestamp]
    return cmd + [*extra, *dataparser]


def torchrun_cmd(nproc: int, cmd: Sequence[str], port: Optional[int] = None) -> list:
    """``cmd`` (an ``ns-train ...`` list) under ``torchrun --nproc-per-node nproc`` on a free port."""
    launcher = [console_script("torchrun"), "--nproc-per-node", str(nproc), "--master-port", str(port or free_port())]
    return launcher + list(cmd)


def run(
    cmd: Sequence[str], cwd: Optional[Path] = None, timeout: float = 300, env: Optional[dict] = None, **extra_env: str
) -> subprocess.CompletedProcess:
    """Runs ``cmd`` as a batch job (stdin not a terminal, where a prompt would hang), output captured;
    ``cwd``: where relative output paths land; ``env``: the environment (default :func:`cli_env`), with
    ``extra_env`` added."""
    return subprocess.run(
        list(cmd), capture_output=True, text=True, env={**(env or cli_env()), **extra_env}, timeout=timeout,
        stdin=subprocess.DEVNULL, cwd=cwd,
    )  # fmt: skip


def once(tmp_path_factory, key: str, make):
    """``make(folder)`` (which returns JSON-able data) made once in a test session and shared by every test
    that asks for ``key``, in any pytest-xdist worker (under a file lock, in a folder of the session's
    temporary folder: the runs it leaves there are the same for every test that reads them); its data."""
    import json

    from filelock import FileLock

    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # the session's folder, above each worker's own
    folder, saved = base / f"once-{key}", base / f"once-{key}.json"
    with FileLock(str(saved) + ".lock"):
        if not saved.exists():
            folder.mkdir(exist_ok=True)
            saved.write_text(json.dumps(make(folder)))
    return json.loads(saved.read_text())


def run_once(tmp_path_factory, key: str, cmd: Sequence[str], **kw) -> subprocess.CompletedProcess:
    """:func:`run` (same ``cmd`` and ``kw``; by default in a folder of its own) made once in a test session and
    shared by the tests that ask for ``key`` (:func:`once`): for commands whose output several tests only read,
    such as ``ns-train splat-plus --help``."""

    def make(folder: Path) -> list:
        proc = run(cmd, **{"cwd": folder, **kw})
        return [proc.returncode, proc.stdout, proc.stderr]

    returncode, stdout, stderr = once(tmp_path_factory, key, make)
    return subprocess.CompletedProcess(list(cmd), returncode, stdout, stderr)


def ns_train_help(tmp_path_factory) -> subprocess.CompletedProcess:
    """``ns-train splat-plus --help`` (200 columns), once per test session (:func:`run_once`)."""
    return run_once(tmp_path_factory, "ns-train-splat-plus-help", [console_script("ns-train"), "splat-plus", "--help"])


def ns_train(data: Path, out: Path, name: str, steps: int, *extra: str, **kw) -> subprocess.CompletedProcess:
    """Runs :func:`ns_train_cmd` (same arguments) as a batch job."""
    return run(ns_train_cmd(data, out, name, steps, *extra, **kw))


def ns_eval(config_yml: Path, out_json: Path, *extra: str, **kw) -> subprocess.CompletedProcess:
    """``ns-eval --load-config config_yml --output-path out_json`` (then ``extra``), run as :func:`run` runs it."""
    return run(
        [console_script("ns-eval"), "--load-config", str(config_yml), "--output-path", str(out_json), *extra], **kw
    )


def copy_scene(scene: Path, dest: Path) -> Path:
    shutil.copytree(scene, dest)
    return dest


def nerfstudio_scene(scene: Path, dest: Path) -> Path:
    """A synthetic COLMAP ``scene`` as nerfstudio-data: transforms.json (+ sparse_pc.ply) beside images/."""
    from nerfstudio.data.utils import colmap_parsing_utils as cu
    from nerfstudio.process_data.colmap_utils import colmap_to_json

    data = copy_scene(scene, dest)
    sparse = data / SPARSE
    cu.write_model(*cu.read_model(str(sparse), ".txt"), str(sparse), ".bin")
    colmap_to_json(sparse, data)
    shutil.rmtree(data / "colmap")  # a nerfstudio-data scene, nothing else
    return data


def blender_scene(scene: Path, dest: Path) -> Path:
    """A synthetic COLMAP ``scene`` in the NeRF-synthetic layout nerfstudio's ``blender-data`` reads:
    ``transforms_{train,val,test}.json`` (``camera_angle_x``, OpenGL camera-to-world matrices) and RGBA PNGs, the
    top eighth of each photo transparent; every other view trains, the rest split between val and test."""
    import json

    import numpy as np
    from PIL import Image

    work = nerfstudio_scene(scene, dest.with_name(dest.name + "-nerfstudio"))  # poses in OpenGL's convention
    meta = json.loads((work / "transforms.json").read_text())
    frames = sorted(meta["frames"], key=lambda frame: frame["file_path"])
    splits = {"train": frames[0::2], "val": frames[1::4], "test": frames[3::4]}
    for split, chosen in splits.items():
        (dest / split).mkdir(parents=True)
        listed = []
        for frame in chosen:
            rgb = np.asarray(Image.open(work / frame["file_path"]).convert("RGB"))
            alpha = np.full(rgb.shape[:2] + (1,), 255, np.uint8)
            alpha[: rgb.shape[0] // 8] = 0
            name = Path(frame["file_path"]).stem
            Image.fromarray(np.concatenate([rgb, alpha], axis=-1), "RGBA").save(dest / split / f"{name}.png")
            listed.append({"file_path": f"./{split}/{name}", "transform_matrix": frame["transform_matrix"]})
        angle = 2 * math.atan(meta["w"] / (2 * meta["fl_x"]))
        (dest / f"transforms_{split}.json").write_text(json.dumps({"camera_angle_x": angle, "frames": listed}))
    shutil.rmtree(work)
    return dest


def snapshot(root: Path) -> Dict[str, bytes]:
    """Every file under ``root`` and its bytes: "no file of an earlier run changed"."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def run_dir(out: Path, name: str, timestamp: str = "run", method: str = "splat-plus") -> Path:
    return out / name / method / timestamp


def checkpoints(run: Path) -> list:
    return sorted((run / "nerfstudio_models").glob("step-*.ckpt"))


def assert_ok(proc: subprocess.CompletedProcess) -> None:
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def assert_one_message(proc: subprocess.CompletedProcess, *needles: str, status=None) -> str:
    """Non-zero exit (``status`` if given), no traceback, every needle in the output."""
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0, output[-3000:]
    if status is not None:
        assert proc.returncode == status, f"exit {proc.returncode}, expected {status}:\n{output[-3000:]}"
    assert "Traceback" not in output, output[-5000:]
    for needle in needles:
        assert needle in output, f"{needle!r} not in:\n{output[-3000:]}"
    return output


def signal_disposition(pid: int, signum: int) -> str:
    """How process ``pid`` treats ``signum`` now: "caught" (a handler), "ignored", "blocked" or "default" (Linux
    /proc status masks); "gone" if it has ended."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return "gone"
    masks = dict(line.split(":\t", 1) for line in status.splitlines() if line.startswith("Sig"))
    bit = 1 << (signum - 1)
    for name, mask in (("caught", "SigCgt"), ("ignored", "SigIgn"), ("blocked", "SigBlk")):
        if int(masks.get(mask, "0"), 16) & bit:
            return name
    return "default"


def torchrun_worker_pids(launcher_pid: int) -> dict:
    """{rank: pid} of the torchrun workers under ``launcher_pid`` (their environment holds RANK; Linux /proc)."""
    import re

    ranks = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if int(re.search(r"PPid:\s+(\d+)", status).group(1)) != launcher_pid:
            continue
        for item in environ:
            if item.startswith(b"RANK="):
                ranks[int(item[5:])] = int(entry.name)
    return ranks
