"""``python -m hypermem.cli``: the ``hypermem`` command."""

import sys

from .main import main

sys.exit(main())
