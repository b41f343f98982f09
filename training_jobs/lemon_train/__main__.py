"""``python -m lemon_train sft|grpo --config FILE`` (and ``torchrun ... -m lemon_train``)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from lemon_train.cli import add_arguments, cmd_train


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lemon_train", description="Train the orchestration policy."
    )
    add_arguments(parser)
    return cmd_train(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
