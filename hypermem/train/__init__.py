"""Training with Lightning (layer 4): models trained end to end, their data and configs.

Import the submodule you need, for example ``from hypermem.train.hierarchy_module import
HierarchyModule``.  (The WordNet RAG experiment is not installed: ``experiments/rag`` in the
checkout.)
Lightning is imported only here and below, never by layers 1-3.
"""
