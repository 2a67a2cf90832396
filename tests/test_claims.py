"""The claims page (docs/claims.md) is what its commands print, and its verdicts are computed."""

from tools import claims


def test_the_page_is_what_the_commands_print():
    rows = claims.verdicts()
    assert claims.PAGE.read_text() == claims.page(rows), (
        "docs/claims.md drifted from the model: run `make claims` and commit the page"
    )
    assert {v.verdict for _, v in rows} <= {
        claims.REPRODUCED,
        claims.CONTRADICTED,
        claims.UNTESTABLE,
    }
    for claim, v in rows:  # every testable verdict comes from a command on the page
        assert claim.commands or v.verdict == claims.UNTESTABLE, claim.claim


def test_verdicts_follow_the_figures(monkeypatch):
    """The same figures judged with no tolerance: the rounded claims are then contradicted."""
    server = claims.CLAIMS[0]
    assert server.judge().verdict == claims.REPRODUCED  # 20.784 PFLOPS against 20.8
    monkeypatch.setattr(claims, "WITHIN", 0.0)
    assert server.judge().verdict == claims.CONTRADICTED


def test_commands_are_typed_as_documented():
    for claim in claims.CLAIMS:
        for command in claim.commands:
            assert command.startswith("trnsim ") and "--json" not in command
            assert claims.run(command)["study"] == command.split()[1]
