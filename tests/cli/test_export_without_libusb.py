"""ns-export on a machine without the system library libusb-1.0 (a minimal Debian): nerfstudio's exporter
imports open3d before any plugin code runs, so splat-plus cannot turn that ImportError into its own
message; the README's install section names the library, the package to install and the error a user
sees, and this checks that the error the simulated machine prints is the one the README names."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from doc_examples import README, _bin, _env

LIBUSB_ERROR = "libusb-1.0.so.0: cannot open shared object file: No such file or directory"


def _install_section() -> str:
    text = README.read_text(encoding="utf-8")
    return text.split("## Install", 1)[1].split("\n## ", 1)[0]


def test_readme_install_section_says_what_ns_export_needs():
    section = " ".join(_install_section().split())
    assert "libusb-1.0" in section and "ns-export" in section, "the install section does not name libusb-1.0"
    assert "apt-get install libusb-1.0-0" in section, "the install section does not say what to install"
    assert "ImportError: libusb-1.0.so.0" in section, "the install section does not quote the error users see"


@pytest.mark.slow
def test_the_error_without_libusb_is_the_one_the_readme_names(tmp_path: Path):
    """open3d as on a machine without libusb-1.0 (a module on PYTHONPATH that fails as its native
    library does): ns-export's last line is the error the README quotes."""
    shim = tmp_path / "no-libusb"
    shim.mkdir()
    (shim / "open3d.py").write_text(f"raise ImportError({LIBUSB_ERROR!r})\n")
    proc = subprocess.run([_bin("ns-export"), "gaussian-splat", "--help"], capture_output=True, text=True,
                          env=_env(PYTHONPATH=str(shim)), cwd=tmp_path, timeout=300)  # fmt: skip
    assert proc.returncode != 0, "open3d's failure did not reach ns-export: the shim is not in effect"
    last = (proc.stdout + proc.stderr).strip().splitlines()[-1]
    quoted = re.findall(r"`(ImportError: [^`]+)`", " ".join(_install_section().split()))
    assert quoted and last.startswith(quoted[0]), f"README quotes {quoted}, ns-export ends with {last!r}"
