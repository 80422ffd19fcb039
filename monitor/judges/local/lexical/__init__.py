"""Cheap text analysis for the local judge: sentences and their parts, words, numbers, names.

Pure functions, no model. The checks built on it catch the commonest RAG
hallucinations without an LLM: an amount, date, number or name in a statement
that the context never mentions, and statements whose words are scattered
over the context instead of said together in one place.

- `wordforms`: tokens, the folded form and stem words are compared on, stopwords;
- `thesaurus`: how much a word says (its weight), synonyms, opposites, comparisons;
- `quantities`: numbers with their units, and ranges, compared by value
  (the numbers themselves come from `monitor.text.numerals`);
- `names`: capitalised names, acronyms and the phrases they spell;
- `negation`: what a negator denies;
- `vocabulary`: what a text holds, for membership tests;
- `clauses`: sentences, clauses and segments, and what a clause claims.

Words are compared on a light normal form: Unicode accents stripped, lower
case, possessive dropped, a few English inflections removed (``cities`` →
``city``, ``directed`` → ``direct``). Numbers are compared by value (``$300,000``
= ``300000`` = ``0.3 million``).
"""
