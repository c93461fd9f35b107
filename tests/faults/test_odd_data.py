"""Issue 50, odd data: an SfM model with no points, photos too small for the resolution schedule, and a
transforms.json that COLMAP input would refuse; and a NeRF-synthetic scene, which trains. Each ends in one message naming the file or photo and what to
do (exit status 2, no traceback, no run directory left), or trains where the user asked for what works.

CLI cases run the real ns-train on the small synthetic scene of tests/faults/test_bad_inputs.py.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from clirun import (
    SPARSE,
    TINY_SCENE,
    assert_ok,
    assert_one_message,
    blender_scene,
    checkpoints,
    copy_scene,
    free_port,
    nerfstudio_scene,
    ns_eval,
    ns_train,
    run_dir,
)
from inprocess import run_config, train

from splatbench.scenes import SceneSpec, make_scene

STEPS = 2


@pytest.fixture(scope="module")
def scene(tmp_path_factory) -> Path:
    return make_scene(tmp_path_factory.mktemp("scene"), TINY_SCENE)


def assert_refused(proc, out: Path, name: str, *needles: str) -> str:
    """One message with every needle and what to do, exit status 2, no traceback, no run directory left."""
    output = assert_one_message(proc, *needles, "What to do:", status=2)
    assert not run_dir(out, name).exists(), sorted(str(p) for p in (out / name).rglob("*"))
    assert not [p for p in (out / name).rglob("*") if not p.is_dir()]
    return output


# --- 5. a COLMAP points3D with no points --------------------------------------------------------------


def _without_points(scene: Path, dest: Path) -> Path:
    data = copy_scene(scene, dest)
    points = data / SPARSE / "points3D.txt"
    points.write_text("".join(line + "\n" for line in points.read_text().splitlines() if line.startswith("#")))
    return data


@pytest.mark.slow
def test_empty_points3d_is_refused_naming_the_file(scene, tmp_path):
    data = _without_points(scene, tmp_path / "empty")
    proc = ns_train(data, tmp_path / "out", "empty", STEPS)
    output = assert_refused(
        proc,
        tmp_path / "out",
        "empty",
        f"the COLMAP model's {data / SPARSE / 'points3D.txt'} holds no points, but SfM initialization is requested",
        "--pipeline.model.random-init True",
    )
    assert "mat1 and mat2" not in output


@pytest.mark.slow
def test_empty_points3d_with_random_init_trains(scene, tmp_path):
    """In this process: the start-up checks (inputs.preflight, in the trainer's set-up) and training; ns-train's
    message that names --pipeline.model.random-init True is the test above."""
    data = _without_points(scene, tmp_path / "empty")
    config = run_config(data, tmp_path, "random", STEPS)
    config.pipeline.model.random_init = True
    train(config)
    assert checkpoints(run_dir(tmp_path, "random"))


def test_points_are_counted_in_text_and_binary_models(scene, tmp_path):
    from nerfstudio.data.utils import colmap_parsing_utils as cu
    from test_bad_inputs import _preflight

    from ns_splat_plus.errors import UserInputError
    from ns_splat_plus.training import colmap_checks

    sparse = scene / SPARSE
    assert colmap_checks.count_points(sparse / "points3D.txt") == TINY_SCENE.n_points
    data = _without_points(scene, tmp_path / "empty")
    assert colmap_checks.count_points(data / SPARSE / "points3D.txt") == 0
    cameras, images, _ = cu.read_model(str(data / SPARSE), ".txt")
    cu.write_model(cameras, images, {}, str(data / SPARSE), ".bin")
    assert colmap_checks.count_points(data / SPARSE / "points3D.bin") == 0
    with pytest.raises(UserInputError, match=r"points3D\.bin holds no points") as info:
        _preflight(data)
    assert info.value.exit_status == 2
    _preflight(data, load_3D_points=False)  # no points asked for: accepted


# --- 6. photos too small for the resolution schedule ------------------------------------------------


@pytest.mark.slow
def test_photos_of_4x1024_are_refused_naming_the_downscales_that_fit(tmp_path):
    data = make_scene(tmp_path / "thin", SceneSpec(n_views=8, width=1024, height=4, focal=28.0, n_points=200))
    proc = ns_train(data, tmp_path / "out", "thin", STEPS, "--pipeline.model.num-downscales", "2")
    assert_refused(
        proc,
        tmp_path / "out",
        "thin",
        "is 1024x4 pixels, which the resolution schedule first trains at 1/4 (256x1; "
        "--pipeline.model.num-downscales 2)",
        "the smallest photo this schedule accepts is 8x8",
        "pass --pipeline.model.num-downscales 1 (or less)",
    )


@pytest.mark.slow
def test_photos_of_1x1_are_refused(tmp_path):
    data = make_scene(tmp_path / "dot", SceneSpec(n_views=8, width=1, height=1, focal=1.0, n_points=200))
    proc = ns_train(data, tmp_path / "out", "dot", STEPS)
    assert_refused(proc, tmp_path / "out", "dot", "is 1x1 pixels: splat-plus trains photos of at least 2x2 pixels")


class _Cameras:
    def __init__(self, sizes, focal=10.0):
        self.width = torch.tensor([[w] for w, _ in sizes])
        self.height = torch.tensor([[h] for _, h in sizes])
        self.fx = torch.full((len(sizes), 1), focal)
        self.fy = torch.full((len(sizes), 1), focal)


def test_photo_sizes_against_the_schedule():
    from ns_splat_plus.errors import UserInputError
    from ns_splat_plus.training import dataset_checks

    names = [Path("a.png"), Path("b.png")]
    dataset_checks.check_photo_sizes(names, _Cameras([(48, 36), (8, 8)]), 2)  # 2x2 at 1/4: accepted
    with pytest.raises(UserInputError, match=r"(?s)photo b.png is 8x7 pixels.*num-downscales 1 \(or less\)"):
        dataset_checks.check_photo_sizes(names, _Cameras([(48, 36), (8, 7)]), 2)
    with pytest.raises(UserInputError, match=r"photo a.png is 1x5 pixels: .* at least 2x2"):
        dataset_checks.check_photo_sizes(names, _Cameras([(1, 5), (8, 8)]), 0)
    assert [dataset_checks.largest_fitting_downscales(s) for s in (1, 2, 3, 4, 7, 8, 1024)] == [-1, 0, 0, 1, 1, 2, 9]


# --- 7. transforms.json faults that COLMAP input refuses ----------------------------------------------


def _zero_focal(data: Path) -> str:
    transforms = data / "transforms.json"
    content = json.loads(transforms.read_text())
    content["fl_x"] = content["fl_y"] = 0.0
    transforms.write_text(json.dumps(content))
    return "focal length fx=0, fy=0: both must be positive"


def _duplicate(data: Path) -> str:
    transforms = data / "transforms.json"
    content = json.loads(transforms.read_text())
    content["frames"].append(dict(content["frames"][1]))  # lands in the training split with its original
    transforms.write_text(json.dumps(content))
    return f"the dataset lists the photo {data / content['frames'][1]['file_path']} 2 times"


def _missing(data: Path) -> str:
    transforms = data / "transforms.json"
    photo = data / json.loads(transforms.read_text())["frames"][3]["file_path"]
    photo.unlink()
    return f"photo {photo} is missing: the dataset lists it, but there is no such file"


@pytest.mark.slow
@pytest.mark.parametrize("fault", [_zero_focal, _duplicate, _missing], ids=["zero-focal", "duplicate", "missing"])
def test_transforms_json_faults_are_refused(scene, tmp_path, fault):
    data = nerfstudio_scene(scene, tmp_path / "ns")
    needle = fault(data)
    proc = ns_train(data, tmp_path / "out", "ns", STEPS, dataparser=("nerfstudio-data",))
    output = assert_refused(proc, tmp_path / "out", "ns", needle)
    assert "damaged or truncated" not in output


@pytest.mark.slow
def test_a_photo_of_another_size_than_its_transforms_json_camera_is_named(scene, tmp_path):
    # the decode at start-up ended in a ValueError traceback naming no file ("image 3 is 64x48 but its camera
    # says 32x24"), exit status 1, and left the run directory behind
    from PIL import Image

    data = nerfstudio_scene(scene, tmp_path / "with spaces" / "ns")
    photo = data / json.loads((data / "transforms.json").read_text())["frames"][3]["file_path"]
    Image.open(photo).resize((64, 48)).save(photo)
    proc = ns_train(data, tmp_path / "out", "ns", STEPS, dataparser=("nerfstudio-data",))
    assert_refused(
        proc, tmp_path / "out", "ns", f"photo {photo} is 64x48 pixels, but the dataset gives its camera 32x24"
    )


def _first_photo(data: Path, transforms: str = "transforms.json", suffix: str = "") -> Path:
    return data / (json.loads((data / transforms).read_text())["frames"][0]["file_path"] + suffix)


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["missing", "damaged"])
@pytest.mark.parametrize("dataparser", ["nerfstudio-data", "blender-data"])
def test_a_first_photo_the_dataparser_opens_is_named_missing_or_damaged(scene, tmp_path, dataparser, damage):
    """nerfstudio-data and blender-data open their first photo to read its size, inside the dataparser: a missing
    or damaged one raised PIL's, imageio's or PyAV's error with a traceback and left the run directory behind."""
    if dataparser == "nerfstudio-data":
        data = nerfstudio_scene(scene, tmp_path / "ns")
        photo = _first_photo(data)
    else:
        data = blender_scene(scene, tmp_path / "bl")
        photo = _first_photo(data, "transforms_train.json", ".png")
    if damage == "missing":
        photo.unlink()
        needle = "is missing: the dataset lists it, but there is no such file"
    else:
        photo.write_bytes(b"not a photo")
        needle = "cannot be decoded"
    proc = ns_train(data, tmp_path / "out", "first", STEPS, dataparser=(dataparser,))
    assert_refused(proc, tmp_path / "out", "first", f"photo {photo} ", needle)
    assert not (tmp_path / "out").exists(), "the --output-dir it made was left behind"


@pytest.mark.slow
def test_with_the_viewer_on_a_missing_photo_is_named_missing_not_damaged(scene, tmp_path):
    """The viewer (the default --vis) read every property of the datamanager at set-up, which decoded the photos
    before the dataset checks ran, so a missing photo was reported as "damaged or truncated"; the checks name every
    missing photo, where decoding stops at the first."""
    data = nerfstudio_scene(scene, tmp_path / "ns")
    needle = _missing(data)
    (data / json.loads((data / "transforms.json").read_text())["frames"][5]["file_path"]).unlink()
    proc = ns_train(
        data, tmp_path / "out", "ns", STEPS, "--vis", "viewer", "--viewer.websocket-port", str(free_port()),
        dataparser=("nerfstudio-data",),
    )  # fmt: skip
    output = assert_refused(proc, tmp_path / "out", "ns", needle, "(and 1 more missing photos)")
    assert "damaged or truncated" not in output


def test_dataparser_output_checks():
    from ns_splat_plus.errors import UserInputError
    from ns_splat_plus.training import dataset_checks

    names = [Path("a.png"), Path("b.png")]
    dataset_checks.check_unique_paths(names)
    dataset_checks.check_focal_lengths(names, _Cameras([(8, 8), (8, 8)]))
    with pytest.raises(UserInputError, match="lists the photo a.png 2 times"):
        dataset_checks.check_unique_paths([Path("a.png"), Path("a.png")])
    for focal in (0.0, -3.0, math.nan, math.inf):
        with pytest.raises(UserInputError, match="photo a.png the focal length"):
            dataset_checks.check_focal_lengths(names, _Cameras([(8, 8), (8, 8)], focal))
    with pytest.raises(UserInputError, match=r"(?s)photo a.png is missing.*\(and 1 more missing photos\)"):
        dataset_checks.check_photos_exist(names)


# --- a NeRF-synthetic scene (blender-data): float64 focal lengths, RGBA photos, no SfM points -------------------


@pytest.mark.slow
def test_blender_scene_trains_and_evaluates(scene, tmp_path):
    """`ns-train splat-plus --data DIR blender-data`, then `ns-eval`. nerfstudio's blender parser gives float64
    focal lengths (splatfacto's K is float32 whatever they are; the rasterizers refuse a float64 one), RGBA photos
    and no SfM points, so the run starts from random Gaussians."""
    data = blender_scene(scene, tmp_path / "blender")
    out = tmp_path / "out"
    # 2,000 random Gaussians instead of 50,000: the CPU's reference rasterizer then takes seconds, not minutes
    proc = ns_train(data, out, "bl", STEPS, "--pipeline.model.num-random", "2000", dataparser=("blender-data",))
    assert_ok(proc)
    assert "starting from random Gaussians" in proc.stdout
    run = run_dir(out, "bl")
    assert checkpoints(run)
    metrics = tmp_path / "metrics.json"
    assert_ok(ns_eval(run / "config.yml", metrics))
    results = json.loads(metrics.read_text())["results"]
    assert results["num_images"] == len(json.loads((data / "transforms_test.json").read_text())["frames"])
    assert math.isfinite(results["psnr"])
