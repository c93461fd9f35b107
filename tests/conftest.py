"""Hermetic tests: no download, and a private torch hub (no AlexNet weights unless a test puts them there).

Set at import, so every subprocess the tests start (ns-train, ns-eval, torchrun) inherits it.
"""

import os
import signal
import tempfile

os.environ["NS_SPLAT_PLUS_NO_DOWNLOAD"] = "1"
os.environ["TORCH_HOME"] = tempfile.mkdtemp(prefix="ns-splat-plus-torch-home-")

# A shell that starts a job in the background (nohup, `&`, some CI runners) ignores SIGINT in it, and every
# child inherits that: ns-train then keeps Ctrl-C ignored, as a user's background job should. The Ctrl-C
# tests need SIGINT as a terminal gives it, in this process (in-process training) and in the ns-train,
# ns-eval and torchrun it starts (a handler becomes the default disposition in a child).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
