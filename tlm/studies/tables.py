"""The studies' tables as text for a pipe or a file, laid out as rich lays them out.

On a terminal ``trnsim`` prints its tables with rich. Written to a pipe or a file (no colour,
200 columns) they are plain text, and importing rich and rendering through it is a large share
of a quick command's start-up (docs/performance.md): here the same layout is written out for
the one kind of table the studies print - a title, a header, every column right-justified,
rich's ``HEAVY_HEAD`` box and padding of one - giving the same characters: column widths
measured and collapsed as rich's :class:`rich.table.Table` does, cells wrapped at words, a word
too long for its column cut with an ellipsis, titles centred (``tests/test_studies_tables.py``
compares the two on random tables). Text whose characters rich may not count as one cell each
(tabs, line breaks, wide or combining characters) is left to rich: :func:`lines` returns None.

Examples
--------
>>> for text in lines("inputs", ("figure", "value"), [("tp", "16")], width=200):
...     print(text.rstrip())     # the title is centred in spaces the width of the table
      inputs
┏━━━━━━━━┳━━━━━━━┓
┃ figure ┃ value ┃
┡━━━━━━━━╇━━━━━━━┩
│     tp │    16 │
└────────┴───────┘
"""

from __future__ import annotations

import re

__all__ = ["lines", "line"]

#: Text rich counts as one cell a character (its ``cells._SINGLE_CELL_UNICODE_RANGES``).
_SINGLE = re.compile("[\x20-\x7e\xa0-\xac\xae-\u02ff\u0370-\u0482\u2500-\u25fc\u2800-\u28ff]*")
#: A word and the spaces after it (rich's ``_wrap.re_word``).
_WORD = re.compile(r"\s*\S+\s*")
#: rich's ``HEAVY_HEAD`` box: top, header row, below the header, body rows, bottom.
_TOP, _HEAD, _BELOW, _ROW, _BOTTOM = "┏━┳┓", "┃ ┃┃", "┡━╇┩", "│ ││", "└─┴┘"
#: Columns' padding, left and right.
_PAD = 1


def _plain(text: str) -> bool:
    return _SINGLE.fullmatch(text) is not None


def _breaks(text: str, width: int, fold: bool) -> list[int]:
    """Where ``text`` is cut into lines of at most ``width`` (rich's ``divide_line``)."""
    out, offset = [], 0
    for match in _WORD.finditer(text):
        start, word = match.start(), match.group()
        size = len(word.rstrip())
        if width - offset >= size:
            offset += len(word)
        elif size > width:  # a word longer than a line
            if fold:
                pieces = [word[i : i + width] for i in range(0, len(word), width)]
                for i, piece in enumerate(pieces):
                    if start:
                        out.append(start)
                    if i == len(pieces) - 1:
                        offset = len(piece)
                    else:
                        start += len(piece)
            else:
                if start:
                    out.append(start)
                offset = len(word)
        elif offset and start:
            out.append(start)
            offset = len(word)
    return out


def _cut(text: str, width: int, overflow: str) -> str:
    if len(text) <= width:
        return text
    return text[: width - 1] + "…" if overflow == "ellipsis" else text[:width]


def _wrap(text: str, width: int, justify: str, overflow: str) -> list[str]:
    """``text`` (one line) wrapped at words to ``width`` and justified (rich's ``Text.wrap``)."""
    cuts = [0, *_breaks(text, width, overflow == "fold"), len(text)]
    out = []
    for a, b in zip(cuts, cuts[1:], strict=False):
        piece = text[a:b]
        if len(piece) > width:  # spaces past the width go
            spaces = len(piece) - len(piece.rstrip())
            piece = piece[: len(piece) - min(spaces, len(piece) - width)]
        if justify in ("right", "center"):
            piece = _cut(piece.rstrip(), width, overflow)
            left = width - len(piece) if justify == "right" else (width - len(piece)) // 2
            piece = " " * left + piece
            piece += " " * (width - len(piece))
        out.append(_cut(piece, width, overflow))
    return out


def _measure(text: str, width: int) -> tuple[int, int]:
    """The narrowest and widest a padded cell can be within ``width`` (rich's measure of a
    ``Padding`` of a ``Text``)."""
    inner = width - 2 * _PAD
    if inner < 1:
        return width, width
    words = text.split()
    widest = len(text)
    narrowest = max(map(len, words)) if words else widest
    narrowest, widest = min(narrowest, widest, inner), min(widest, inner)
    if widest < 1:
        narrowest = widest = 0
    return min(narrowest + 2 * _PAD, width), min(widest + 2 * _PAD, width)


def _column(cells: list[str], width: int) -> int:
    """The widest a column of ``cells`` (its header first) is drawn within ``width``."""
    if width < 1:
        return 0
    return min(max(_measure(c, width)[1] for c in cells), width)


def _reduce(total: int, ratios: list[int], maximums: list[int], values: list[int]) -> list[int]:
    """``total`` taken from ``values`` in proportion to ``ratios`` (rich's ``ratio_reduce``)."""
    ratios = [r if m else 0 for r, m in zip(ratios, maximums, strict=True)]
    left_ratio = sum(ratios)
    if not left_ratio:
        return values[:]
    out = []
    for ratio, maximum, value in zip(ratios, maximums, values, strict=True):
        if ratio and left_ratio > 0:
            taken = min(maximum, round(ratio * total / left_ratio))
            out.append(value - taken)
            total -= taken
            left_ratio -= ratio
        else:
            out.append(value)
    return out


def _widths(columns: list[list[str]], room: int) -> list[int]:
    """Each column's width, padding included (rich's ``Table._calculate_column_widths``)."""
    widths = [_column(cells, room) or 1 for cells in columns]
    if sum(widths) <= room:
        return widths
    excess = sum(widths) - room
    while excess > 0:  # the widest columns narrowed to the next widest, in turn
        widest = max(widths)
        second = max((w for w in widths if w != widest), default=0)
        if not widest - second:
            break
        ratios = [1 if w == widest else 0 for w in widths]
        widths = _reduce(excess, ratios, [min(excess, widest - second)] * len(widths), widths)
        excess = sum(widths) - room
    if sum(widths) > room:  # then all of them evenly
        widths = _reduce(sum(widths) - room, [1] * len(widths), widths, widths)
    return [_column(cells, w) for cells, w in zip(columns, widths, strict=True)]


def line(text: str, width: int) -> list[str] | None:
    """A line of text as rich prints it ``width`` wide; None if rich must print it."""
    if not _plain(text) or len(text) > width:
        return None
    return [text]


def lines(title: str, header, rows, width: int) -> list[str] | None:
    """The lines of a table: ``title`` centred above, the ``header`` row, the ``rows`` (of
    strings), every column right-justified, as rich draws it ``width`` wide; None if rich
    must draw it (characters it may not count one cell each, columns narrower than their
    padding)."""
    header = list(header)
    rows = [list(r) for r in rows]
    if not all(_plain(c) for c in (title, *header, *(c for r in rows for c in r))):
        return None
    columns = [[h, *(r[i] for r in rows)] for i, h in enumerate(header)]
    extra = len(columns) + 1  # the box's verticals
    widths = _widths(columns, width - extra)
    if min(widths, default=0) < 2 * _PAD + 1:
        return None
    table_width = sum(widths) + extra
    out = _wrap(title, table_width, "center", "fold") if title else []

    def rule(box):
        return box[0] + box[2].join(box[1] * w for w in widths) + box[3]

    def drawn(cells, box, top):
        shaped = [
            _wrap(c, w - 2 * _PAD, "right", "ellipsis") for c, w in zip(cells, widths, strict=True)
        ]
        height = max(len(s) for s in shaped)
        blank = [" " * (w - 2 * _PAD) for w in widths]
        for i, s in enumerate(shaped):
            fill = [blank[i]] * (height - len(s))
            shaped[i] = fill + s if top else s + fill
        pad = " " * _PAD
        return [
            box[0] + box[2].join(pad + s[k] + pad for s in shaped) + box[3] for k in range(height)
        ]

    out.append(rule(_TOP))
    out += drawn(header, _HEAD, top=True)
    out.append(rule(_BELOW))
    for row in rows:
        out += drawn(row, _ROW, top=False)
    out.append(rule(_BOTTOM))
    return out
