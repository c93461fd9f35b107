"""A shorter interpreter exit for a splat-plus process: :func:`freeze_heap_at_exit`.

Why: when a command ends, Python's finalization runs a last garbage collection over every object
still alive, torch's, nerfstudio's and their imports' included. That took about 1.5 s of the exit
of a CPU training run on the development machine, after the last line was printed and every file
was written. ``gc.freeze()`` moves the objects alive at that point out of the collector's reach,
so that collection has nothing to walk. It runs in an ``atexit`` callback, that is only once the
interpreter is shutting down: a process that trains several times (tests, notebooks) keeps its
normal collection until then. Objects are still freed by reference counting as modules are
cleared; only cycles alive at exit are no longer finalized, which an exiting process does not
need.
"""

from __future__ import annotations

import atexit
import gc

_REGISTERED = False


def freeze_heap_at_exit() -> None:
    """Register ``gc.freeze`` to run when this process exits (once per process)."""
    global _REGISTERED
    if not _REGISTERED:
        atexit.register(gc.freeze)
        _REGISTERED = True
