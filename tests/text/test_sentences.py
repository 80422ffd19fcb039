"""How text divides into sentences, clauses and words (`monitor.text.sentences`)."""

from monitor.text.sentences import clauses, sentences, strip_particle, words


def test_sentences_end_at_punctuation_and_at_line_ends() -> None:
    assert sentences("Receipts are required. Ask HR first!\nThen file it.") == [
        "Receipts are required.",
        "Ask HR first!",
        "Then file it.",
    ]
    assert sentences("") == [] and sentences("\n  \n") == []


def test_a_long_compound_sentence_splits_at_its_semicolon_a_short_one_does_not() -> None:
    long = (
        "Managers review every request within three business days of submission; staff who "
        "are not managers wait for the regional office to approve it within a week."
    )
    assert len(words(long)) > 25
    assert sentences(long) == [
        "Managers review every request within three business days of submission",
        "staff who are not managers wait for the regional office to approve it within a week.",
    ]
    assert sentences("Short one; short two.") == ["Short one; short two."]


def test_clauses_split_where_each_part_claims_on_its_own() -> None:
    assert clauses("Managers get 3 days, but staff get 1 day; interns get none") == [
        "Managers get 3 days",
        "staff get 1 day",
        "interns get none",
    ]
    assert clauses("SAML and OIDC are supported") == ["SAML and OIDC are supported"]


def test_an_answer_particle_is_set_aside_a_word_that_starts_like_one_is_not() -> None:
    assert strip_particle("Yes, the limit is 5 days.") == "the limit is 5 days."
    assert strip_particle("No: never.") == "never."
    assert strip_particle("Yesterday it rained.") == "Yesterday it rained."


def test_words_are_letters_with_inner_apostrophes_or_digit_runs() -> None:
    assert words("Rodríguez's 3 cities, don’t") == ["Rodríguez's", "3", "cities", "don’t"]
