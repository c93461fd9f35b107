"""The README quickstart's first line makes the demo scene with the runtime alone (``pip install .``
ships no splatbench): ``python -m ns_splat_plus.demo scene/``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from doc_examples import QUICKSTART, README, _env, _workdir, code_blocks

from ns_splat_plus import demo


def _quickstart_first_line() -> str:
    (block,) = [b for b in code_blocks(README) if QUICKSTART in b.text]
    return block.text.strip().splitlines()[0]


@pytest.mark.slow
def test_quickstart_first_line_makes_the_scene_without_splatbench(tmp_path: Path):
    """Run the quickstart's first line as written, in a folder like the docs tests' (scripts/ linked), with
    ``splatbench`` unimportable (as after ``pip install .``): it writes a COLMAP scene."""
    shim = tmp_path / "no-splatbench"
    shim.mkdir()
    (shim / "splatbench.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'splatbench'\", name='splatbench')\n"
    )
    work = _workdir(tmp_path / "work", scene=None)  # scripts/ and configs/ linked, as the docs tests do
    line = _quickstart_first_line()
    proc = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", line],
        cwd=work,
        env=_env(PYTHONPATH=str(shim)),
        capture_output=True,
        text=True,
        timeout=300,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "Traceback" not in output, f"{line}\n{output[-3000:]}"
    images = sorted((work / "scene" / "images").glob("*.png"))
    assert len(images) == demo.SceneSpec().n_views, output
    sparse = work / "scene" / "colmap" / "sparse" / "0"
    assert all((sparse / name).is_file() for name in ("cameras.txt", "images.txt", "points3D.txt"))
    assert "ns-train splat-plus --data scene" in output  # says what to run next


def test_splatbench_takes_its_scene_generator_from_the_runtime():
    """One generator: the tests' and benchmarks' small scene is the demo scene."""
    from splatbench import scenes

    assert scenes.make_scene is demo.make_scene and scenes.SceneSpec is demo.SceneSpec
    assert "splatbench" not in sys.modules.get("ns_splat_plus.demo").__dict__


def test_the_command_it_prints_runs_as_pasted_for_a_folder_with_spaces(tmp_path: Path, capsys):
    """The printed next command is pasted into a shell: a folder with a space split it into two words."""
    import shlex

    out = tmp_path / "my scène"
    demo.main([str(out), "--views", "4", "--width", "16", "--height", "12"])
    line = next(ln for ln in capsys.readouterr().out.splitlines() if "ns-train" in ln)
    words = shlex.split(line)
    assert words[words.index("--data") + 1] == str(out), line
    # the README quick start's command, not the 30,000-step default (hours on the CPU; a fresh-eyes trial)
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    block = readme.split("python -m ns_splat_plus.demo scene/\n", 1)[1].split("\nRUN=", 1)[0]
    quickstart = shlex.split(block.replace("\\\n", " "))
    assert words == [w if w != "scene/" else str(out) for w in quickstart], (line, quickstart)


def test_the_demo_writes_only_into_a_new_empty_or_demo_folder(tmp_path: Path, capsys):
    """A fresh-eyes trial: the demo wrote over whatever the folder held (a real scene's colmap/ too), left the
    photos of a larger earlier run beside the new model, and a file as the target gave a NotADirectoryError
    traceback."""
    small = ["--width", "16", "--height", "12"]
    out = tmp_path / "scene"
    demo.main([str(out), "--views", "6", *small])
    demo.main([str(out), "--views", "3", *small])  # again, fewer views: the earlier photos go
    assert sorted(p.name for p in (out / "images").iterdir()) == [f"frame_{i:04d}.png" for i in range(3)]
    capsys.readouterr()
    real = tmp_path / "real"
    (real / "colmap").mkdir(parents=True)
    (real / "colmap" / "keep.txt").write_text("a real scene")
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    for target, needle in ((real, "is not empty and holds no demo scene"), (a_file, "is a file")):
        with pytest.raises(SystemExit) as stopped:
            demo.main([str(target), *small])
        assert stopped.value.code == 2 and needle in capsys.readouterr().err
    assert (real / "colmap" / "keep.txt").read_text() == "a real scene" and not (real / "images").exists()


def test_the_scene_script_writes_only_into_a_new_empty_or_demo_folder(tmp_path: Path, monkeypatch, capsys):
    """scripts/make_synthetic_scene.py run again into its folder with fewer views left the earlier photos beside the
    new model (a fresh-eyes trial); it now keeps the demo's rule."""
    from splatbench import scenes

    small = ["--width", "16", "--height", "12"]
    out = tmp_path / "scene"
    for views in ("6", "3"):
        monkeypatch.setattr("sys.argv", ["make_synthetic_scene.py", str(out), "--views", views, *small])
        scenes.main()
    assert sorted(p.name for p in (out / "images").iterdir()) == [f"frame_{i:04d}.png" for i in range(3)]
    real = tmp_path / "real"
    (real / "images").mkdir(parents=True)
    (real / "images" / "mine.jpg").write_bytes(b"a photo")
    monkeypatch.setattr("sys.argv", ["make_synthetic_scene.py", str(real), *small])
    with pytest.raises(SystemExit) as stopped:
        scenes.main()
    assert stopped.value.code == 2 and "is not empty and holds no demo scene" in capsys.readouterr().err
    assert [p.name for p in real.rglob("*") if p.is_file()] == ["mine.jpg"]
