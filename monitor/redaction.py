"""PII redaction before anything is stored in the backlog. Pure: text in, text out.

See docs/review.md, "The backlog".
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

EMAIL = "email"
IBAN = "iban"
CARD = "card"
PHONE = "phone"


class NamedPattern(Protocol):
    """What a configured pattern looks like (`monitor.config.RedactionPattern`)."""

    @property
    def name(self) -> str: ...

    @property
    def pattern(self) -> str: ...


@dataclass(frozen=True)
class Redaction:
    """``count`` occurrences of ``kind`` were replaced by ``[KIND]``."""

    kind: str
    count: int

    def as_json(self) -> dict[str, object]:
        return {"kind": self.kind, "count": self.count}


# --- checks


def luhn_valid(digits: str) -> bool:
    """The Luhn checksum of a string of digits (payment cards)."""
    if not digits.isdigit():
        return False
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2 == 1:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


def iban_valid(text: str) -> bool:
    """ISO 13616 mod-97 check (spaces ignored, case-insensitive)."""
    iban = re.sub(r"[\s-]", "", text).upper()
    if not re.fullmatch(r"[A-Z]{2}\d{2}[A-Z0-9]{11,30}", iban):
        return False
    rearranged = iban[4:] + iban[:4]
    number = "".join(str(int(ch, 36)) for ch in rearranged)
    return int(number) % 97 == 1


# --- detectors: each returns (replacement or None to keep) for a regex match

_EMAIL_RE = re.compile(
    r"(?<![\w.+-])[A-Za-z0-9][A-Za-z0-9._%+-]*@[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
    r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*\.[A-Za-z]{2,}\b"
)
# country code, check digits, then 11..30 alphanumerics in groups of any size
_IBAN_RE = re.compile(r"\b[A-Za-z]{2}\d{2}(?:[ -]?[A-Za-z0-9]){11,30}\b")
# 13..19 digits, single spaces or hyphens allowed between digits
_CARD_RE = re.compile(r"(?<![\w-])\d(?:[ -]?\d){12,18}(?![\w-])")
_PHONE_RE = re.compile(
    r"(?<![\w+])"
    r"(?:\+\d{1,3}[ .-]?)?"  # country code
    r"(?:\(\d{1,5}\)[ .-]?)?"  # area code in parentheses
    r"\d{2,5}(?:[ .-]\d{2,8}){0,4}"
    r"(?![\w])"
)
_DATE_RE = re.compile(r"\d{4}[-./]\d{1,2}[-./]\d{1,2}|\d{1,2}[-./]\d{1,2}[-./]\d{4}")


def _iban(match: re.Match[str]) -> str | None:
    text = match.group(0)
    # the regex can run on into the next word ("DE89 ... 00 IS"): take the longest valid prefix
    ends = [i + 1 for i, ch in enumerate(text) if ch.isalnum()]
    for end in reversed(ends):
        candidate = text[:end]
        if len(re.sub(r"[\s-]", "", candidate)) < 15:
            break
        if iban_valid(candidate):
            return "[IBAN]" + text[end:]
    return None


def _card(match: re.Match[str]) -> str | None:
    digits = re.sub(r"\D", "", match.group(0))
    return "[CARD]" if luhn_valid(digits) else None


def _phone(match: re.Match[str]) -> str | None:
    text = match.group(0)
    digits = re.sub(r"\D", "", text)
    if not 7 <= len(digits) <= 15:
        return None
    if _DATE_RE.fullmatch(text):
        return None
    international = text.startswith("+") or "(" in text
    separators = re.findall(r"[ .-]", text)
    if not international:
        # a bare run of digits is an order number, dotted groups are versions or addresses
        if not separators or all(s == "." for s in separators):
            return None
    return "[PHONE]"


@dataclass(frozen=True)
class _Detector:
    kind: str
    regex: re.Pattern[str]
    replace: Callable[[re.Match[str]], str | None]


_DEFAULTS = (
    _Detector(EMAIL, _EMAIL_RE, lambda m: "[EMAIL]"),
    _Detector(IBAN, _IBAN_RE, _iban),
    _Detector(CARD, _CARD_RE, _card),
    _Detector(PHONE, _PHONE_RE, _phone),
)


def _constant(name: str) -> Callable[[re.Match[str]], str | None]:
    label = "[" + name.upper() + "]"

    def replace(match: re.Match[str]) -> str | None:
        return label

    return replace


class Redactor:
    """Replaces PII in text. Build once from settings; `redact` is pure and thread-safe."""

    def __init__(self, patterns: Iterable[NamedPattern] = (), *, defaults: bool = True) -> None:
        detectors = list(_DEFAULTS) if defaults else []
        for p in patterns:
            detectors.append(_Detector(p.name, re.compile(p.pattern), _constant(p.name)))
        self._detectors = tuple(detectors)

    @property
    def kinds(self) -> tuple[str, ...]:
        return tuple(d.kind for d in self._detectors)

    def redact(self, text: str) -> tuple[str, list[Redaction]]:
        """The text with PII replaced, and what was replaced (kind + count, detector order)."""
        counts: Counter[str] = Counter()
        for detector in self._detectors:
            text = self._apply(detector, text, counts)
        return text, [Redaction(k, counts[k]) for k in dict.fromkeys(self.kinds) if counts[k]]

    def redact_value(self, value: Any, counts: Counter[str]) -> Any:
        """Redact every string inside a JSON-like value, adding to ``counts``."""
        if isinstance(value, str):
            for detector in self._detectors:
                value = self._apply(detector, value, counts)
            return value
        if isinstance(value, Mapping):
            return {k: self.redact_value(v, counts) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.redact_value(v, counts) for v in value]
        return value

    @staticmethod
    def _apply(detector: _Detector, text: str, counts: Counter[str]) -> str:
        def substitute(match: re.Match[str]) -> str:
            replacement = detector.replace(match)
            if replacement is None:
                return match.group(0)
            counts[detector.kind] += 1
            return replacement

        return detector.regex.sub(substitute, text)


def summarize(counts: Counter[str], order: Sequence[str]) -> list[Redaction]:
    """Counts as a list of `Redaction`, in ``order`` (detector order), zeros left out."""
    return [Redaction(k, counts[k]) for k in dict.fromkeys(order) if counts[k]]


def redact(text: str, patterns: Iterable[NamedPattern] = ()) -> tuple[str, list[Redaction]]:
    """One-off convenience: the default detectors plus ``patterns``."""
    return Redactor(patterns).redact(text)
