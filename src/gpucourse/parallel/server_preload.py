"""What the fork server of :func:`gpucourse.parallel.workers.launch` imports once, before it forks any worker.

A forked worker starts with these modules already imported: torch, ``torch.distributed``, and ``torch._dynamo``
(which ``torch.optim``'s first optimizer imports, about a second per fresh process), and the course's parallel
package. The server's objects are then frozen for the garbage collector (:func:`gc.freeze`), so that a worker's
``gc.collect()`` walks only what the worker itself made, not the ~2,000 modules it inherited.
"""

from __future__ import annotations

import gc
import importlib
import importlib.util

TORCH_MODULES = ("torch", "torch.distributed", "torch.optim", "torch._dynamo")
"""Imported where torch is installed (none of them starts a thread that a fork would lose)."""
COURSE_MODULES = ("gpucourse.parallel",)


def preload() -> list[str]:
    """Import every module a worker needs; return their names."""
    names = list(TORCH_MODULES) if importlib.util.find_spec("torch") else []
    names += COURSE_MODULES
    for name in names:
        importlib.import_module(name)
    return names


PRELOADED = preload()
gc.freeze()  # the server's objects move to the permanent generation, shared by every fork
