"""The rule judge's text analysis: words, weights, numbers with units, names, negation,
clauses. Pure functions, no model.

See docs/local-judge.md, "Text analysis".
"""
