"""Data sets for hypermem (layer 2, pure I/O).

* :mod:`hypermem.data.wordnet` — the WordNet 3.0 noun hierarchy: transitive closures,
  tree forms and glosses; the mammal hierarchy ships with the package.

Import the submodule you need (``from hypermem.data.wordnet import load_mammals``).
"""
