"""The WordNet RAG experiment (see README.md here): the data (:mod:`.data`), the baselines
(:mod:`.baselines`) and the side-by-side run (:mod:`.comparison`) around the reusable model
:class:`hypermem.nn.HyperbolicRAG`."""
