"""The installed package's ``ibconsole`` command (console/cli.py): help, and a clear refusal."""

from __future__ import annotations

import pytest

from console import cli


@pytest.mark.smoke
def test_help_names_the_three_commands_and_an_unknown_one_exits_2(capsys):
    cli.main([])
    said = capsys.readouterr().out
    assert all(f"ibconsole {c}" in said for c in ("agent", "manage", "up"))
    with pytest.raises(SystemExit) as refused:
        cli.main(["serve"])
    assert refused.value.code == 2 and "unknown command 'serve'" in capsys.readouterr().err


@pytest.mark.smoke
def test_manage_runs_a_manage_py_command(capsys):
    with pytest.raises(SystemExit) as done:
        cli.main(["manage", "operator", "--help"])
    assert done.value.code == 0 and "operator" in capsys.readouterr().out
