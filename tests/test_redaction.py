"""PII redaction: defaults, checksums, configured patterns, and what is reported."""

from __future__ import annotations

from collections import Counter

import pytest

from monitor.config import RedactionPattern
from monitor.redaction import Redaction, Redactor, iban_valid, luhn_valid, redact


@pytest.mark.parametrize(
    ("text", "expected", "kinds"),
    [
        ("write to jane.doe+hr@mail.example.co.uk now", "write to [EMAIL] now", {"email": 1}),
        ("card 4111 1111 1111 1111.", "card [CARD].", {"card": 1}),
        ("card 4111-1111-1111-1111", "card [CARD]", {"card": 1}),
        ("amex 378282246310005", "amex [CARD]", {"card": 1}),
        ("IBAN DE89 3704 0044 0532 0130 00 is mine", "IBAN [IBAN] is mine", {"iban": 1}),
        ("GB82WEST12345698765432", "[IBAN]", {"iban": 1}),
        ("call +1 (555) 123-4567 today", "call [PHONE] today", {"phone": 1}),
        ("ring +49 30 12345678 or 030 1234567", "ring [PHONE] or [PHONE]", {"phone": 2}),
        ("US 555-123-4567", "US [PHONE]", {"phone": 1}),
    ],
)
def test_defaults(text: str, expected: str, kinds: dict[str, int]) -> None:
    redacted, found = redact(text)
    assert redacted == expected
    assert {r.kind: r.count for r in found} == kinds


@pytest.mark.parametrize(
    "text",
    [
        "order 4111 1111 1111 1112 looks like a card but fails Luhn",
        "reference 1234567812345678",  # 16 digits, Luhn fails
        "IBAN DE89 3704 0044 0532 0130 07 fails mod-97",
        "on 2024-01-15 at 10:30, build 1.2.3, host 192.168.100.200",
        "order number 1234567890",
        "costs $1,250.00 for 3 nights",
        "not an address: user at example dot com",
    ],
)
def test_lookalikes_are_kept(text: str) -> None:
    assert redact(text) == (text, [])


def test_checksums() -> None:
    assert luhn_valid("4111111111111111")
    assert not luhn_valid("4111111111111112")
    assert not luhn_valid("41111x")
    assert iban_valid("DE89 3704 0044 0532 0130 00")
    assert iban_valid("gb82 west 1234 5698 7654 32")
    assert not iban_valid("DE89 3704 0044 0532 0130 01")
    assert not iban_valid("DE89")


def test_counts_per_kind_never_values() -> None:
    text = "a@x.org, b@y.org and 4111111111111111 / 5555 5555 5555 4444"
    redacted, found = redact(text)
    assert redacted == "[EMAIL], [EMAIL] and [CARD] / [CARD]"
    assert found == [Redaction("email", 2), Redaction("card", 2)]
    assert [r.as_json() for r in found] == [
        {"kind": "email", "count": 2},
        {"kind": "card", "count": 2},
    ]
    assert "a@x.org" not in repr(found)


def test_configured_patterns_add_to_the_defaults() -> None:
    redactor = Redactor([RedactionPattern(name="employee_id", pattern=r"\bEMP-\d{6}\b")])
    redacted, found = redactor.redact("EMP-123456 (emp@corp.example) asked")
    assert redacted == "[EMPLOYEE_ID] ([EMAIL]) asked"
    assert {r.kind for r in found} == {"employee_id", "email"}
    only_custom = Redactor([RedactionPattern(name="ticket", pattern=r"T-\d+")], defaults=False)
    assert only_custom.redact("T-42 from a@b.org") == (
        "[TICKET] from a@b.org",
        [Redaction("ticket", 1)],
    )


def test_nested_values() -> None:
    counts: Counter[str] = Counter()
    value = Redactor().redact_value(
        {"k": ["mail a@b.org", {"n": "+1 (555) 123-4567"}], "x": 3, "y": None}, counts
    )
    assert value == {"k": ["mail [EMAIL]", {"n": "[PHONE]"}], "x": 3, "y": None}
    assert counts == Counter({"email": 1, "phone": 1})


def test_text_without_pii_is_untouched() -> None:
    text = "When do I need to attach a receipt for travel expenses over $100?"
    assert redact(text) == (text, [])
