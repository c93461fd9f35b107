"""``ns-train splat-plus --help`` lists only what splat-plus reads (issue 46): nerfstudio's options that it never
reads (the datamanager's ``cache-images`` and ``images-on-gpu``, the model's collider and coarse/fine RGB loss
coefficients) are hidden, and still kept in the configs, so that every config.yml written before loads."""

from __future__ import annotations

import re

import pytest
from clirun import assert_ok, ns_train_help

HIDDEN = [
    "--pipeline.datamanager.cache-images",
    "--pipeline.datamanager.images-on-gpu",
    "--pipeline.model.enable-collider",
    "--pipeline.model.collider-params",
    "--pipeline.model.loss-coefficients",
]
"""Options splat-plus never reads (its train images: --pipeline.datamanager.image-memory; no rays, no coarse/fine)."""

KEPT = ["--pipeline.datamanager.cache-images-type", "--pipeline.datamanager.image-memory", "--pipeline.model.sh-degree"]


def _listed(help_text: str, option: str) -> bool:
    return re.search(re.escape(option) + r"(?![\w-])", help_text) is not None


@pytest.mark.slow
def test_ns_train_splat_plus_help_lists_no_option_splat_plus_ignores(tmp_path_factory):
    proc = ns_train_help(tmp_path_factory)  # run once, also read by tests/cli/test_options.py and tests/docs
    assert_ok(proc)
    assert [o for o in HIDDEN if _listed(proc.stdout, o)] == [], proc.stdout
    assert [o for o in KEPT if not _listed(proc.stdout, o)] == [], proc.stdout


def test_the_hidden_options_keep_nerfstudio_s_defaults_and_stay_off_the_command_line(capsys):
    """In-process: tyro's help of the two configs lists none of them, and their values are nerfstudio's."""
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
        for name in names:  # still fields, with upstream's defaults: a saved config.yml sets them as before
            field = name.replace("-", "_")
            assert getattr(ours(), field) == getattr(upstream(), field), field
