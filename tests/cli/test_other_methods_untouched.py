"""A plugin must not change other methods (issue 46): nerfstudio imports every plugin's entry point in every
``ns-*`` command, so ``ns_splat_plus.method`` is imported by ``ns-train nerfacto`` too. Nothing process-wide
of splat-plus's (``sys.excepthook``, an import hook, a signal handler, a logger filter, a replaced module or
method) may be left there: only splat-plus commands get them (``upstream/command_line.py``).

The CLI tests run the real commands with :data:`PROBE` as ``sitecustomize``: it notes the process-wide state
as Python starts, and compares it as the process ends (``atexit``; a process ended by ``os._exit``, as
splat-plus's excepthook ends one, writes no report).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from clirun import cli_env, console_script, run

from ns_splat_plus import legacy, upstream

PROBE = r"""
import atexit, json, logging, os, signal, sys, threading

_SIGNALS = [s for s in ("SIGINT", "SIGTERM", "SIGHUP", "SIGUSR1", "SIGUSR2") if hasattr(signal, s)]
_start = {
    "excepthook": sys.excepthook, "threading_excepthook": threading.excepthook,
    "meta_path": list(sys.meta_path), "path_hooks": list(sys.path_hooks),
    "modules": dict(sys.modules), "signals": {s: signal.getsignal(getattr(signal, s)) for s in _SIGNALS},
}


def _ours(obj):
    names = [getattr(obj, "__module__", None), type(obj).__module__, getattr(obj, "__name__", None)]
    return any(isinstance(n, str) and n.split(".")[0] == "ns_splat_plus" for n in names)


def _loggers():
    yield logging.getLogger()
    for logger in list(logging.Logger.manager.loggerDict.values()):
        if isinstance(logger, logging.Logger):
            yield logger


def _attributes_we_may_touch():
    # what splat-plus commands replace: a method of nerfstudio's (upstream/nerfstudio_private.py), viser's
    # icon reader (upstream/viser_private.py)
    module = sys.modules.get("nerfstudio.configs.external_methods")
    if module is not None:
        yield module.__name__ + ".ExternalMethodDummyTrainerConfig", module.ExternalMethodDummyTrainerConfig, "__post_init__"
    for name in ("viser._icons", "viser._gui_api", "viser._gui_handles"):
        if name in sys.modules:
            yield name, sys.modules[name], "svg_from_icon"


def _report():
    modules = dict(sys.modules)
    report = {
        "plugin_imported": "ns_splat_plus.method" in modules,
        "excepthook": repr(sys.excepthook) if sys.excepthook is not _start["excepthook"] else None,
        "threading_excepthook": None if threading.excepthook is _start["threading_excepthook"]
        else repr(threading.excepthook),
        "meta_path": [repr(f) for f in sys.meta_path if f not in _start["meta_path"] and _ours(f)],
        "path_hooks": [repr(f) for f in sys.path_hooks if f not in _start["path_hooks"] and _ours(f)],
        "replaced_modules": sorted(k for k, m in _start["modules"].items() if modules.get(k) is not m),
        "foreign_entries": sorted(
            k for k, m in modules.items() if k.split(".")[0] != "ns_splat_plus" and _ours(m)
        ),
        "signals": sorted(s for s in _SIGNALS if signal.getsignal(getattr(signal, s)) is not _start["signals"][s]),
        "logger_filters": sorted(
            f"{logger.name}: {f!r}" for logger in _loggers() for f in logger.filters + logger.handlers if _ours(f)
        ),
        "replaced_methods": sorted(
            f"{name}.{attr}" for name, holder, attr in _attributes_we_may_touch() if _ours(getattr(holder, attr))
        ),
    }
    with open(os.environ["SPLAT_PLUS_TEST_PROBE_REPORT"], "w") as f:
        json.dump(report, f)


atexit.register(_report)
"""

NERFACTO_CONFIG = """
import tyro
from nerfstudio.configs.method_configs import AnnotatedBaseConfigUnion
import ns_splat_plus.method  # what discover_methods imported: the plugin's entry point

config = tyro.cli(AnnotatedBaseConfigUnion, args=["nerfacto", "--data", "scene", "--vis", "tensorboard"])
assert type(config).__module__ == "nerfstudio.engine.trainer" and config.method_name == "nerfacto", config
config.set_timestamp()
print("built", config.method_name, config.get_base_dir())
"""


def _probed(tmp_path: Path, cmd: list, **kwargs) -> tuple:
    """(process, the probe's report) of ``cmd`` run with :data:`PROBE` as its sitecustomize."""
    probe = tmp_path / "probe"
    probe.mkdir(exist_ok=True)
    (probe / "sitecustomize.py").write_text(PROBE)
    report = tmp_path / "report.json"
    env = cli_env(PYTHONPATH=str(probe), SPLAT_PLUS_TEST_PROBE_REPORT=str(report))
    proc = run(cmd, env=env, cwd=tmp_path, **kwargs)
    output = (proc.stdout + proc.stderr)[-3000:]
    assert report.exists(), (
        f"the process ended without its atexit report (os._exit?), exit {proc.returncode}:\n{output}"
    )
    return proc, json.loads(report.read_text())


def _assert_untouched(report: dict, output: str) -> None:
    assert report["plugin_imported"], "the plugin was not imported: this test checks nothing\n" + output
    changed = {key: value for key, value in report.items() if key != "plugin_imported" and value}
    assert not changed, f"splat-plus changed the process of another method: {changed}\n{output}"


@pytest.mark.slow
def test_ns_train_nerfacto_help_keeps_python_s_hooks(tmp_path):
    proc, report = _probed(tmp_path, [console_script("ns-train"), "nerfacto", "--help"])
    assert proc.returncode == 0 and "--pipeline.model" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-2000:]
    _assert_untouched(report, proc.stdout[-1000:] + proc.stderr[-2000:])


@pytest.mark.slow
def test_ns_train_splat_plus_help_replaces_what_the_probe_looks_for(tmp_path):
    """The probe's control: in a splat-plus command it sees what splat-plus commands replace, so its empty
    reports above mean untouched."""
    proc, report = _probed(tmp_path, [console_script("ns-train"), "splat-plus", "--help"])
    assert proc.returncode == 0 and "--pipeline.model" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert report["plugin_imported"], report
    assert report["replaced_methods"] == [
        "nerfstudio.configs.external_methods.ExternalMethodDummyTrainerConfig.__post_init__",
        "viser._gui_api.svg_from_icon",
        "viser._gui_handles.svg_from_icon",
        "viser._icons.svg_from_icon",
    ], report


@pytest.mark.slow
def test_a_nerfacto_config_built_beside_the_plugin_keeps_python_s_hooks(tmp_path):
    proc, report = _probed(tmp_path, [sys.executable, "-c", NERFACTO_CONFIG])
    assert proc.returncode == 0 and "built nerfacto" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-2000:]
    _assert_untouched(report, proc.stdout[-1000:] + proc.stderr[-2000:])


@pytest.mark.slow
def test_ns_eval_of_a_nerfacto_run_keeps_nerfstudio_s_own_errors(tmp_path):
    """A nerfacto run without checkpoints: nerfstudio's own error (its traceback), not splat-plus's message."""
    import yaml
    from nerfstudio.engine.trainer import TrainerConfig

    config_yml = tmp_path / "config.yml"
    config_yml.write_text(yaml.dump(TrainerConfig(method_name="nerfacto", output_dir=tmp_path / "outputs")))
    cmd = [console_script("ns-eval"), "--load-config", str(config_yml), "--output-path", str(tmp_path / "m.json")]
    proc, report = _probed(tmp_path, cmd)
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "Traceback" in output and "splat-plus:" not in output, output[-3000:]
    _assert_untouched(report, output[-3000:])


def test_only_splat_plus_command_lines_are_splat_plus_commands(tmp_path):
    """What method.py decides from the command line before it installs the excepthook."""
    import nerfstudio.configs.method_configs  # noqa: F401 (nerfstudio's methods: imported in every ns-* command)
    import yaml
    from nerfstudio.engine.trainer import TrainerConfig

    def saved(method: str) -> str:
        path = tmp_path / f"{method}.yml"
        path.write_text(yaml.dump(TrainerConfig(method_name=method)))
        return str(path)

    assert not upstream.splat_plus_command(["ns-train", "nerfacto", "--help"])
    assert not upstream.splat_plus_command(["ns-train", "--help"])
    assert not upstream.splat_plus_command(["ns-train", "splatfacto", "--data", "splat-plus"])
    assert not upstream.splat_plus_command(["ns-eval", "--load-config", saved("nerfacto")])
    assert not upstream.splat_plus_command(["ns-train", "splat-plus", "--load-config", saved("splatfacto")])
    for method in ("splat-plus", "splat-plus-mcmc", "splat-plus-fast", "splat-plus-lite"):
        assert upstream.splat_plus_command(["ns-train", method, "--data", "scene"])
        assert upstream.splat_plus_command(["ns-viewer", "--load-config", saved(method)])
    legacy_run = Path(__file__).parents[1] / "data" / "legacy-run-0.1.0" / "config.yml"
    assert upstream.splat_plus_command(["ns-export", "gaussian-splat", f"--load-config={legacy_run}"])
    # a file that names no installed method: the command ends on it, with splat-plus's message naming the file
    assert upstream.splat_plus_command(["ns-eval", "--load-config", str(tmp_path / "missing.yml")])
    assert upstream.splat_plus_command(["ns-eval", "--load_config", saved("some-plugin-not-installed")])


def test_old_module_names_are_placeholders_in_sys_modules_not_an_import_hook(monkeypatch):
    """legacy.install() adds no finder to sys.meta_path: a placeholder per old name, which becomes the
    module of today when a name of it is read (as PyYAML reads a config.yml's class)."""
    old = "ns_splat_plus.trainer"
    meta_path = list(sys.meta_path)
    monkeypatch.delitem(sys.modules, old, raising=False)
    legacy.install()
    assert sys.meta_path == meta_path
    assert isinstance(sys.modules[old], legacy.AliasModule)
    assert not hasattr(sys.modules[old], "__file__") and isinstance(sys.modules[old], legacy.AliasModule)
    from ns_splat_plus.training.trainer import SplatPlusTrainerConfig

    assert sys.modules[old].SplatPlusTrainerConfig is SplatPlusTrainerConfig
    assert sys.modules[old] is sys.modules["ns_splat_plus.training.trainer"]


def test_other_method_names_lists_external_methods_without_building_their_dummy_configs(monkeypatch):
    """The names of nerfstudio's external methods come from its list: a dummy config per name (what
    ``get_external_methods`` builds) reads the source of every frame on the stack in its ``__post_init__``,
    which made a nerfacto run's ns-eval 3x slower (81.6 against 27.3 s on the development machine)."""
    from nerfstudio.configs import external_methods

    built = []
    monkeypatch.setattr(
        external_methods.ExternalMethodDummyTrainerConfig, "__post_init__", lambda self: built.append(self)
    )
    slugs = {slug for method in external_methods.external_methods for slug, _ in method.configurations}
    assert slugs, "nerfstudio lists no external method: this test checks nothing"
    names = upstream.command_line.other_method_names()
    assert built == [], "other_method_names built the external methods' dummy configs"
    assert slugs <= names, sorted(slugs - names)
