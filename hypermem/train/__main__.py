"""``python -m hypermem.train fit --config configs/mammals_poincare.yaml`` (see
:mod:`hypermem.train.hierarchy_cli`)."""

from .hierarchy_cli import main

if __name__ == "__main__":
    main()
