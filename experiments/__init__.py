"""Experiments run from a checkout (not installed with hypermem): each folder holds its code,
its config and a README of how to run it.  ``experiments.rag``: the WordNet RAG comparison;
``nouns_hour``: all WordNet nouns embedded in an hour."""
