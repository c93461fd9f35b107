"""Hermetic tests: no download, and a private torch hub (no AlexNet weights unless a test puts them there).

Set at import, so every subprocess the tests start (ns-train, ns-eval, torchrun) inherits it.
"""

import os
import tempfile

os.environ["NS_SPLAT_PLUS_NO_DOWNLOAD"] = "1"
os.environ["TORCH_HOME"] = tempfile.mkdtemp(prefix="ns-splat-plus-torch-home-")
