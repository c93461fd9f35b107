"""``ns-train splat-plus --help`` lists only what splat-plus reads or says it ignores (issue 46): the model's collider
and coarse/fine RGB loss coefficients are hidden; splatfacto's image placement (the datamanager's ``cache-images``
and ``images-on-gpu``) is listed as ignored, so that splatfacto's command lines with it run (the run says so too:
tests/cli/test_run_options.py). All are still kept in the configs, so that every config.yml written before loads."""

from __future__ import annotations

import re

import pytest
from clirun import assert_ok, ns_train_help

HIDDEN = [
    "--pipeline.model.enable-collider",
    "--pipeline.model.collider-params",
    "--pipeline.model.loss-coefficients",
]
"""Options splat-plus never reads and splatfacto users do not type (no rays, no coarse/fine)."""

IGNORED = ["--pipeline.datamanager.cache-images", "--pipeline.datamanager.images-on-gpu"]
"""splatfacto's image placement, which splat-plus ignores (its train images: --pipeline.datamanager.image-memory)."""

KEPT = ["--pipeline.datamanager.cache-images-type", "--pipeline.datamanager.image-memory", "--pipeline.model.sh-degree"]


def _listed(help_text: str, option: str) -> bool:
    return re.search(re.escape(option) + r"(?![\w-])", help_text) is not None


def _said_ignored(help_text: str, option: str) -> bool:
    """``option`` is listed and its help, up to the next option, begins by saying that splat-plus ignores it."""
    found = re.search(re.escape(option) + r"(?![\w-])[^\n]*\n(?P<help>(?:(?!\s*│?\s*--)[^\n]*\n)+)", help_text)
    return found is not None and "ignored by splat-plus" in " ".join(found.group("help").lower().split()[:8])


@pytest.mark.slow
def test_ns_train_splat_plus_help_lists_no_option_splat_plus_ignores(tmp_path_factory):
    proc = ns_train_help(tmp_path_factory)  # run once, also read by tests/cli/test_options.py and tests/docs
    assert_ok(proc)
    assert [o for o in HIDDEN if _listed(proc.stdout, o)] == [], proc.stdout
    assert [o for o in KEPT if not _listed(proc.stdout, o)] == [], proc.stdout
    # its columns interleave the help texts line by line: each listed, and one "Ignored by" per option
    assert [o for o in IGNORED if not _listed(proc.stdout, o)] == [], proc.stdout
    assert proc.stdout.count("Ignored by splat-plus") == len(IGNORED), proc.stdout


def test_the_hidden_options_keep_nerfstudio_s_defaults_and_stay_off_the_command_line(capsys):
    """In-process: tyro's help of the two configs lists none of the hidden ones, says that splat-plus ignores the
    ignored ones, and their values are nerfstudio's."""
    import tyro
    from nerfstudio.data.datamanagers.full_images_datamanager import FullImageDatamanagerConfig
    from nerfstudio.models.splatfacto import SplatfactoModelConfig

    from ns_splat_plus.model import SplatPlusModelConfig
    from ns_splat_plus.training.datamanager import SplatPlusDataManagerConfig

    for ours, upstream, prefix in [
        (SplatPlusDataManagerConfig, FullImageDatamanagerConfig, "--pipeline.datamanager."),
        (SplatPlusModelConfig, SplatfactoModelConfig, "--pipeline.model."),
    ]:
        with pytest.raises(SystemExit):
            tyro.cli(ours, args=["--help"])
        help_text = capsys.readouterr().out
        assert "--sh-degree" in help_text or "--image-memory" in help_text, help_text
        names = [o[len(prefix) :] for o in HIDDEN if o.startswith(prefix)]
        assert [n for n in names if _listed(help_text, "--" + n)] == [], help_text
        ignored = [o[len(prefix) :] for o in IGNORED if o.startswith(prefix)]
        assert [n for n in ignored if not _said_ignored(help_text, "--" + n)] == [], help_text
        for name in names + ignored:  # still fields, with upstream's defaults: a saved config.yml sets them as before
            field = name.replace("-", "_")
            assert getattr(ours(), field) == getattr(upstream(), field), field
