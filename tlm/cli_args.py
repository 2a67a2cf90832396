"""Argument types shared by the ``trnsim`` subcommands."""

from __future__ import annotations

import argparse

__all__ = ["comma_list"]


def comma_list(convert, plural: str, singular: str):
    """An argparse type: a comma-separated list of ``convert``-ed values, at least one.

    ``plural`` and ``singular`` name the values in the errors ("expected integers separated
    by commas, not 'x'", "expected at least one size").
    """

    def parse(text: str) -> list:
        try:
            values = [convert(v) for v in text.split(",") if v.strip()]
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected {plural} separated by commas, not {text!r}"
            ) from None
        if not values:
            raise argparse.ArgumentTypeError(f"expected at least one {singular}")
        return values

    return parse
