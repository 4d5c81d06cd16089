#!/usr/bin/env python
"""Build the mammal hierarchy files that ship inside ``hypermem/data``.

Reads WordNet 3.0 from ``/usr/share/wordnet`` (Debian ``wordnet-base``; or
``$HYPERMEM_WORDNET``) and writes, reproducibly (gzip without timestamps):

* ``mammals_closure.tsv.gz`` — ``hyponym<TAB>hypernym`` pairs of the transitive closure;
* ``mammals_tree.tsv.gz`` — ``parent<TAB>child`` tree edges (one parent per synset);
* ``mammals_glosses.tsv.gz`` — ``synset<TAB>gloss``.

Usage: ``.venv/bin/python scripts/make_wordnet_data.py [--out hypermem/data]``
"""

from __future__ import annotations

import argparse
from pathlib import Path

from hypermem.data import wordnet


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "hypermem" / "data"))
    parser.add_argument("--wordnet", default=None, help="WordNet directory (default /usr/share/wordnet)")
    args = parser.parse_args()
    h = wordnet.build_hierarchy(wordnet.MAMMAL, args.wordnet)
    out = Path(args.out)
    files = wordnet.shipped_files()
    wordnet.write_tsv_gz(out / files["closure"], h.closure)
    wordnet.write_tsv_gz(out / files["tree"], h.tree)
    wordnet.write_tsv_gz(out / files["glosses"], sorted(h.glosses.items()))
    print(f"{h}: wrote {', '.join(files.values())} to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
