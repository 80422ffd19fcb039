"""`LRU`: the last values put, by key, for the caches of the scorer and the local judge."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, ItemsView
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class LRU(Generic[K, V]):
    """The values of the last ``size`` keys put; `get` makes a key the newest again, and
    `put` drops the oldest past ``size`` (0 keeps nothing). Not locked: a cache shared by
    threads is guarded by its owner's lock."""

    def __init__(self, size: int) -> None:
        if size < 0:
            raise ValueError("size must be >= 0")
        self.size = size
        self._items: OrderedDict[K, V] = OrderedDict()
        #: lookups that found their key, and those that did not
        self.hits = 0
        self.misses = 0

    def get(self, key: K) -> V | None:
        value = self._items.get(key)
        if value is None:
            self.misses += 1
            return None
        self._items.move_to_end(key)
        self.hits += 1
        return value

    def put(self, key: K, value: V) -> None:
        if self.size == 0:
            return
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self.size:
            self._items.popitem(last=False)

    def items(self) -> ItemsView[K, V]:
        return self._items.items()

    def __len__(self) -> int:
        return len(self._items)
