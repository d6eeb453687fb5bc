"""What the cyclic garbage collector finds of the objects a block of code made."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def cyclic_garbage() -> Iterator[list[object]]:
    """Yield a list that, once the block ends, holds every object the block left in a reference
    cycle (the collector is off during the block, then collects what it made)."""
    found: list[object] = []
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        yield found
        gc.collect()
        found.extend(gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
