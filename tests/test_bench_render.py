"""bench's figures of record rendered into docs/performance.md: a table per part, between two
marker lines that a second rendering replaces (never duplicates)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.__main__ import BEGIN, END, render, write_doc  # noqa: E402

LATEST = {
    "infer": {
        "machine": "Linux-x86_64",
        "python": "3.11.7",
        "when": "2026-11-26 14:30:00",
        "load": "2.4 2.1 2.0",
        "figures": [
            {"figure": "trnsim --help", "value": 0.317, "unit": "s", "target": "<= 2x", "naive": ""}
        ],
    }
}


def test_render_is_a_table_per_part_with_when_and_load():
    text = render(LATEST)
    assert text.startswith(BEGIN) and text.endswith(END)
    assert "### inference model and start-up (`--only infer`)" in text
    assert "2026-11-26 14:30:00, Linux-x86_64, Python 3.11.7, load average 2.4 2.1 2.0." in text
    assert "| trnsim --help | 0.317 | s | <= 2x |  |" in text


def test_write_doc_replaces_its_section_only(tmp_path):
    doc = tmp_path / "performance.md"
    doc.write_text("# Performance\n\n## What each step bought\n\ntext\n")
    write_doc(LATEST, doc)
    once = doc.read_text()
    assert once.startswith("# Performance\n\n## Figures of record\n\n" + BEGIN)
    assert once.endswith("## What each step bought\n\ntext\n")
    changed = {"infer": {**LATEST["infer"], "when": "2026-11-27 09:00:00"}}
    write_doc(changed, doc)
    twice = doc.read_text()
    assert twice.count(BEGIN) == 1 and "2026-11-27 09:00:00" in twice
    assert "2026-11-26 14:30:00" not in twice


def test_write_doc_keeps_the_parts_it_has_no_record_of(tmp_path):
    """A run of one part where ``figures.json`` holds no other (a fresh checkout) leaves the
    other parts' sections on the page as they were, in their order."""
    doc = tmp_path / "performance.md"
    doc.write_text("# Performance\n")
    synth = {
        "synth": {
            **LATEST["infer"],
            "figures": [
                {
                    "figure": "pe_int8: cells",
                    "value": 675,
                    "unit": "cells",
                    "target": "",
                    "naive": "",
                }
            ],
        }
    }
    write_doc({**LATEST, **synth}, doc)
    rerun = {"synth": {**synth["synth"], "when": "2026-11-28 10:00:00"}}
    write_doc(rerun, doc)
    text = doc.read_text()
    assert text.count("### inference model and start-up (`--only infer`)") == 1
    assert "| trnsim --help | 0.317 | s | <= 2x |  |" in text
    assert "2026-11-28 10:00:00" in text and "| pe_int8: cells | 675 | cells |" in text
    assert text.index("--only infer") < text.index("--only synth") < text.index(END)
