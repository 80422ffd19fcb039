"""The benchmarks: each runs from the repository root as ``python -m bench.NAME``
(docs/benchmarks.md); the shared data sets, detector interface and baselines are in
`bench.harness`."""
