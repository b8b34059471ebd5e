"""Pathological lines in a fabric import (issue 33, item 3): a 1,000-character node-name-map line
froze the web process for 6 s (a regex backtracking over every split of its spaces) and a 60 KB
ports-report line for 4 s. Each parse here runs in a subprocess with a hard time limit: a parse
that backtracks is killed and the test fails, however the machine is loaded otherwise."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from designer.errors import ParseError
from designer.imports.lines import MAX_LINE
from designer.imports.namemap import NodeNameMapError, read_node_name_map
from designer.imports.ports_report import read_ports_report
from tests.servers import ROOT

#: what a linear parse of the inputs below takes is milliseconds; the backtracking one took 5-45 s
HARD_LIMIT_S = 3.0
FIELD_MAX = 10 * 1024 * 1024  # the API's limit on an import field


def parse_in_subprocess(reader: str, text_expr: str) -> str:
    """Run ``reader(<text_expr>)`` in a fresh interpreter killed after :data:`HARD_LIMIT_S`;
    the exception's class and message (or "ok")."""
    code = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(ROOT)!r})
        from designer.imports.namemap import read_node_name_map
        from designer.imports.ports_report import read_ports_report
        text = {text_expr}
        try:
            {reader}(text)
            print("ok")
        except Exception as exc:
            print(type(exc).__name__, exc)
        """
    )
    try:
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=HARD_LIMIT_S + 2, check=True
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{reader} did not finish within {HARD_LIMIT_S + 2:.0f} s: it backtracks")
    return done.stdout.strip()


@pytest.mark.parametrize(
    "text_expr",
    [
        "'0x1' + ' ' * 1000 + '\"'",  # the probe's line: 5.3 s before
        "'a' + '\\t ' * 500 + '\"'",
        f"'0x1' + ' ' * {MAX_LINE - 4} + '\"'",  # as long as a line may be
        "'0x2c90300000001 \"name\" # ' + '\"' * 1000",
    ],
)
def test_a_pathological_name_map_line_is_read_in_linear_time(text_expr):
    out = parse_in_subprocess("read_node_name_map", text_expr)
    assert out.startswith("NodeNameMapError") or out == "ok", out


def test_a_name_map_line_of_the_fields_full_size_is_refused_naming_the_line():
    out = parse_in_subprocess("read_node_name_map", f"'0x1 \"ok\"\\n0x2' + ' ' * {FIELD_MAX} + '\"'")
    assert (
        out.startswith("NodeNameMapError line 2:") and f"no line of a node-name map is longer than {MAX_LINE:,}" in out
    )


def test_a_pathological_ports_report_line_is_read_in_linear_time():
    head = "CA 1 1 0x1 4x EDR - SW 2 3 0x2 ( '"
    # 60 KB: refused by its length at once (4 s of backtracking before)
    out = parse_in_subprocess("read_ports_report", f"{head!r} + \"' - '\" * 12000 + 'x'")
    assert out.startswith("ParseError line 1: line is 60,0")
    # as long as a line may be, quotes and dashes all through its descriptions: parsed
    body = "' - '" * ((MAX_LINE - len(head) - 3) // 5)
    out = parse_in_subprocess("read_ports_report", f'{head!r} + {body!r} + "\' )"')
    assert out == "ok", out


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ('0x0002c90300000001 "su01-n01 HCA-1"', (0x2C90300000001, "su01-n01 HCA-1")),
        ("0x0002c90300000001 su01-n01 # a comment", (0x2C90300000001, "su01-n01")),
        ('S-0002c90300000002  "leaf #1"  # its name holds a hash', (0x2C90300000002, "leaf #1")),
        ('H-0002c90300000003\t"  spaced  "', (0x2C90300000003, "spaced")),
    ],
)
def test_name_map_entries_read_as_rdma_core_writes_them(line, expected):
    names, findings = read_node_name_map(line)
    assert names == {expected[0]: expected[1]} and findings == []


@pytest.mark.parametrize(
    "line",
    ['0x1 "unterminated', '0x1 "name" trailing text', '0x1 na"me', '0x1"name"', "zz-not-a-guid name"],
)
def test_malformed_name_map_entries_are_refused_with_their_line(line):
    with pytest.raises(NodeNameMapError) as info:
        read_node_name_map("# header\n" + line)
    assert info.value.line == 2


def test_an_entry_without_a_name_is_a_finding():
    names, findings = read_node_name_map("0x1 # nothing but a comment\n0x2")
    assert names == {} and [f.code for f in findings] == ["map-entry-without-name"] * 2


def test_a_ports_report_description_may_hold_the_separator():
    report = read_ports_report("CA 3 1 0x0002c90300000001 4x EDR - SW 2 7 0x0002c90300000010 ( 'a' - ' - 'b' )\n")
    descs = sorted(n.desc for n in report.nodes)
    assert descs == ["a' -", "b"]  # split at the last "' - '", as the greedy pattern did


def test_long_lines_are_refused_before_any_pattern_runs():
    with pytest.raises(ParseError, match=r"line 1: line is 2,000 characters long"):
        read_ports_report("x" * 2000)
