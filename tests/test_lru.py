"""`monitor.lru.LRU`: the caches of the scorer and the local judge."""

from __future__ import annotations

import pytest

from monitor.lru import LRU


def test_the_oldest_key_goes_first_and_a_lookup_makes_a_key_new_again() -> None:
    cache: LRU[str, int] = LRU(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # "b" is now the oldest
    cache.put("c", 3)
    assert cache.get("b") is None
    assert (cache.get("a"), cache.get("c")) == (1, 3)
    assert (cache.hits, cache.misses, len(cache)) == (3, 1, 2)
    cache.put("a", 10)  # a new value for a key kept
    assert dict(cache.items()) == {"c": 3, "a": 10}


def test_size_zero_keeps_nothing_and_a_negative_size_is_refused() -> None:
    cache: LRU[str, int] = LRU(0)
    cache.put("a", 1)
    assert cache.get("a") is None and len(cache) == 0
    with pytest.raises(ValueError, match="size"):
        LRU(-1)
