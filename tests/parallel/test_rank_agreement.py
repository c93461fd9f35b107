"""Ranks agree at start-up (ns_splat_plus/parallel/agreement.py), and a user error is printed once,
naming the rank that found it (roll_call.announce_once): the pure parts, in-process."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Dict

import pytest
import torch

from ns_splat_plus import errors
from ns_splat_plus.parallel import agreement, collectives, roll_call


@dataclass
class _Inner:
    lr: float = 1e-3
    name: str = "adam"


@dataclass
class _Config:
    max_num_iterations: int = 40
    data: Path = Path("scene")
    timestamp: str = "{timestamp}"
    _target: type = int
    inner: _Inner = field(default_factory=_Inner)
    groups: Dict[str, _Inner] = field(default_factory=lambda: {"means": _Inner(lr=1.6e-4)})


def test_option_values_flatten_every_option_but_the_timestamp():
    values = agreement.option_values(_Config())
    assert values == {
        "max_num_iterations": "40",
        "data": "scene",
        "inner": "_Inner",
        "inner.lr": "0.001",
        "inner.name": "'adam'",
        "groups.means": "_Inner",
        "groups.means.lr": "0.00016",
        "groups.means.name": "'adam'",
    }
    assert agreement.option_name("inner.lr") == "--inner.lr"
    assert agreement.option_name("max_num_iterations") == "--max-num-iterations"
    # an object's address is not part of its value (it differs in every process)
    assert agreement.option_values(SimpleNamespace()) == {"": "namespace()"}
    assert " at 0x" not in agreement._leaf(object())


def test_equal_values_have_no_differences_and_one_digest():
    one, two = agreement.option_values(_Config()), agreement.option_values(_Config())
    assert agreement.differences([one, two, one]) == {}
    assert agreement.digest(one) == agreement.digest(two)


def test_a_different_option_is_named_with_each_rank_value():
    ranks = [agreement.option_values(_Config()) for _ in range(3)]
    ranks[1] = agreement.option_values(_Config(max_num_iterations=80))
    diffs = agreement.differences(ranks)
    assert diffs == {"max_num_iterations": ["40", "80", "40"]}
    assert len({agreement.digest(v) for v in ranks}) == 2
    text = agreement.describe_differences(diffs, agreement.option_name)
    assert text == "--max-num-iterations: 40 on ranks 0, 2; 80 on rank 1"


def test_a_key_on_one_rank_only_is_absent_on_the_others():
    diffs = agreement.differences([{"a": "1"}, {"a": "1", "b": "2"}])
    assert diffs == {"b": [None, "2"]}
    assert agreement.describe_differences(diffs) == "b: absent on rank 0; 2 on rank 1"


def test_floats_agree_within_the_tolerance_and_name_the_first_that_differs():
    pose = (56.0, 56.0, 24.0, 18.0, 0.5, -0.25)
    nearly = tuple(x * (1 + 1e-7) for x in pose)  # another CPU's rounding of the same float32 math
    assert agreement.differences([{"cam": pose}, {"cam": nearly}]) == {}
    moved = pose[:4] + (0.75, -0.25)
    diffs = agreement.differences([{"cam": pose}, {"cam": moved}])
    assert diffs == {"cam": [pose, moved]}
    text = agreement.describe_differences(diffs)
    assert text == "cam: number 5 of 6 = 0.5 on rank 0; number 5 of 6 = 0.75 on rank 1", text
    # a string never equals a tuple; another length differs too
    assert agreement.differences([{"x": "1"}, {"x": (1.0,)}])
    assert agreement.differences([{"x": (1.0,)}, {"x": (1.0, 2.0)}])


def test_the_message_names_the_first_differences_and_counts_the_rest():
    diffs = agreement.differences([{str(k): "a" for k in range(10)}, {str(k): "b" for k in range(10)}])
    text = agreement.describe_differences(diffs, shown=3)
    assert text.splitlines() == ["0: a on rank 0; b on rank 1", "  1: a on rank 0; b on rank 1",
                                 "  2: a on rank 0; b on rank 1", "  and 7 more differences"]  # fmt: skip


def _outputs(folder: Path, names, width=32, height=24):
    n = len(names)
    cameras = SimpleNamespace(
        width=torch.full((n, 1), width),
        height=torch.full((n, 1), height),
        fx=torch.full((n, 1), 28.0),
        fy=torch.full((n, 1), 28.0),
        cx=torch.full((n, 1), width / 2),
        cy=torch.full((n, 1), height / 2),
        camera_to_worlds=torch.eye(4)[:3].repeat(n, 1, 1) + torch.arange(n).view(n, 1, 1) * 0.1,
        distortion_params=None,
    )
    return SimpleNamespace(
        image_filenames=[folder / name for name in names], cameras=cameras, dataparser_transform=torch.eye(4)[:3]
    )


def _photos(folder: Path, count: int, size: int = 9000) -> list:
    folder.mkdir(parents=True, exist_ok=True)
    names = [f"frame_{i:04d}.png" for i in range(count)]
    for i, name in enumerate(names):
        (folder / name).write_bytes(bytes([i]) * size)
    return names


def test_dataset_values_name_photos_relative_to_their_folder_and_see_their_bytes(tmp_path):
    names = _photos(tmp_path / "a" / "images", 4)
    _photos(tmp_path / "b" / "images", 4)
    a = agreement.dataset_values({"training": _outputs(tmp_path / "a" / "images", names)})
    b = agreement.dataset_values({"training": _outputs(tmp_path / "b" / "images", names)})
    assert agreement.differences([a, b]) == {}  # the same dataset at another path (another node's mount)
    assert list(a)[0] == "training photos" and a["training photos"].startswith("4 (order ")
    assert a["training photo frame_0001.png"].startswith("camera 32x24, 9000 bytes, ")
    # other pixels of the same size, at either end of the file: seen
    photo = tmp_path / "b" / "images" / "frame_0002.png"
    photo.write_bytes(photo.read_bytes()[:-1] + b"\xff")
    b = agreement.dataset_values({"training": _outputs(tmp_path / "b" / "images", names)})
    assert list(agreement.differences([a, b])) == ["training photo frame_0002.png"]
    # a truncated copy: its size
    photo.write_bytes(b"x" * 300)
    b = agreement.dataset_values({"training": _outputs(tmp_path / "b" / "images", names)})
    text = agreement.describe_differences(agreement.differences([a, b]))
    assert "training photo frame_0002.png: camera 32x24, 9000 bytes" in text and "camera 32x24, 300 bytes" in text
    # fewer photos: the count comes first
    b = agreement.dataset_values({"training": _outputs(tmp_path / "b" / "images", names[:2])})
    first = agreement.describe_differences(agreement.differences([a, b])).splitlines()[0]
    assert first.startswith("training photos: 4 (order ") and "2 (order " in first, first
    # another image size and another pose
    b = agreement.dataset_values({"training": _outputs(tmp_path / "a" / "images", names, width=30)})
    assert "training photo frame_0000.png" in agreement.differences([a, b])
    moved = _outputs(tmp_path / "a" / "images", names)
    moved.cameras.camera_to_worlds[3, 0, 3] += 0.5
    b = agreement.dataset_values({"training": moved})
    assert list(agreement.differences([a, b])) == ["training camera (intrinsics, pose) of frame_0003.png"]


def test_agreement_in_one_process_is_free():
    assert agreement.agree({"x": "1"}) == {}
    agreement.agree_on_options(_Config())


# --- one message, by the rank that found the error ---------------------------------------------------


class _Store:
    def __init__(self):
        self.counts: Dict[str, int] = {}

    def add(self, key, amount):
        self.counts[key] = self.counts.get(key, 0) + amount
        return self.counts[key]


def test_the_first_rank_to_report_an_error_prints_it_naming_itself(monkeypatch, tmp_path):
    store = _Store()
    monkeypatch.setattr(roll_call, "_store", lambda: store)
    monkeypatch.setattr(collectives, "is_distributed", lambda: True)
    error_file = tmp_path / "error.json"
    monkeypatch.setenv("TORCHELASTIC_ERROR_FILE", str(error_file))
    rank = {"value": 1}
    monkeypatch.setattr(collectives, "get_rank", lambda: rank["value"])
    err = errors.UserInputError("photo frame_0004.png cannot be decoded")
    assert roll_call.announce_once(err) == "rank 1: photo frame_0004.png cannot be decoded"
    assert "rank 1: photo frame_0004.png" in error_file.read_text()  # torchrun's summary names it
    rank["value"] = 0
    assert roll_call.announce_once(err) is None  # rank 0 found one too, later: the run shows one message
    assert "rank 0: photo frame_0004.png" in error_file.read_text()
    # an error every rank raises alike is shown without a rank
    store.counts.clear()
    assert roll_call.announce_once(agreement.RanksDisagreeError("ranks differ")) == "ranks differ"


def test_show_prints_what_the_announcer_says(monkeypatch, capsys):
    err = errors.UserInputError("bad photo")
    monkeypatch.setattr(errors, "_announcer", None)
    errors.show(err, rank=1)  # without an announcer: as before, only rank 0 prints
    assert capsys.readouterr().err == ""
    errors.show(err, rank=0)
    assert "splat-plus: bad photo" in capsys.readouterr().err
    errors.set_announcer(lambda e: f"rank 3: {e.message}")
    with pytest.raises(SystemExit) as exited:
        with errors.exit_on_user_error(rank=3):
            raise err
    assert exited.value.code == 2
    assert "splat-plus: rank 3: bad photo" in capsys.readouterr().err
    errors.set_announcer(lambda e: None)
    errors.show(err, rank=0)
    assert capsys.readouterr().err == ""


def test_a_rank_stopped_by_another_ranks_end_is_never_torchruns_root_cause(tmp_path, monkeypatch):
    """torchrun's summary names the failure with the smallest timestamp (whole seconds) as its "Root
    Cause"; a rank that stops because another one ended writes its file after that one's, often within
    the same second: it must still sort after it, whichever order torchrun observed the two in."""
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, ProcessFailure

    cause, consequence = tmp_path / "rank1.json", tmp_path / "rank0.json"
    monkeypatch.setenv("TORCHELASTIC_ERROR_FILE", str(cause))
    roll_call.write_torchelastic_error("splat-plus: rank 1: photo cannot be decoded")
    monkeypatch.setenv("TORCHELASTIC_ERROR_FILE", str(consequence))
    monkeypatch.setattr(collectives, "get_rank", lambda: 0)
    with pytest.raises(SystemExit) as stopped:
        roll_call.stop_after_another_rank_ended(RuntimeError("Connection reset by peer"), "during set-up")
    assert stopped.value.code == 1
    failures = {0: ProcessFailure(0, 100, 1, str(consequence)), 1: ProcessFailure(1, 101, 2, str(cause))}
    rank, failure = ChildFailedError("per_rank.py", failures).get_first_failure()
    assert rank == 1 and failure.message == "splat-plus: rank 1: photo cannot be decoded", failure.message
