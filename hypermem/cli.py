"""The ``hypermem`` command line."""

from __future__ import annotations

import argparse
import sys


def _cmd_demo(args: argparse.Namespace) -> int:
    import torch

    from .geometry import PoincareBall
    from .retrieval import cone_energy

    ball = PoincareBall(curvature=1.0)
    print("hypermem geometry demo: the Poincaré ball of curvature -1")
    animal = ball.point_at([1.0, 0.2], 1.0)
    dog = ball.point_at([1.0, 0.25], 3.0)
    car = ball.point_at([-0.3, 1.0], 3.0)
    for name, p in [("animal", animal), ("dog", dog), ("car", car)]:
        print(f"  {name:7s} depth {float(ball.distance_to_origin(p)):.3f}")
    print(f"  d(animal, dog) = {float(ball.distance(animal, dog)):.3f}")
    print(f"  d(animal, car) = {float(ball.distance(animal, car)):.3f}")
    print(f"  dog in animal's entailment cone: energy {float(cone_energy(animal, dog, ball)):.4f}")
    print(f"  car in animal's entailment cone: energy {float(cone_energy(animal, car, ball)):.4f}")
    pts = torch.stack([animal, dog, car])
    print("  pairwise distances:\n", ball.pairwise_distance(pts, pts).numpy().round(3))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hypermem", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("demo", help="run the demo")
    p.set_defaults(func=_cmd_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
