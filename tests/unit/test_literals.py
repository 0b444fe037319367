"""One home for every tuned number: graph/, nodes/, tools/ and the CLI (reground/) hold no bare numeric literal
outside tools/tuning/.

A threshold, a weight, a count, a cap, a timeout or a cache size is a choice somebody made, usually after a
measurement; it lives in tools/tuning/ with its meaning and that measurement, and the code reads it by name
(`TRIAGE.judge_answer_threshold`, `RERANK.fusion_k`) or from the run's Context, whose defaults come
from there. The checker reads the source with `ast` and reports every int or float literal except:

- the identities and halves of arithmetic and indexing: -1, 0, 1 and 2 (and their float forms);
- `round(x, n)`'s `n`: the precision a record is written with, not a behaviour;
- a position: a constant subscript (`row[3]`, `fields[19]`) or a regex group (`match.group(3)`); a slice's bounds
  are reported (`history[-6:]` is a window somebody chose);
- magnitudes below 1e-6: a guard against dividing by zero or a float tolerance, never tuned;
- the bounds of a pydantic field (`Field(ge=..., gt=..., le=..., lt=...)`): the domain of a setting, not its value;
- a statement or line marked `# fact: <why>`: a number the outside world fixes (a calendar or clock bound, a
  number word, an HTTP status, a file mode, a file format's version, a pinned file's size, a model's
  dimension), not a choice. The reason is required; the mark covers its line, or the whole simple statement (an
  assignment, a return) it opens or closes, never a block.

Strings are not numbers: a regex quantifier (`\\d{1,7}`) or a format width inside a string is never reported.
The home modules under tools/tuning/ are exempt: that is where the numbers go. So is reground/testing/, the
scripted chat model the tests drive (its numbers are a test's choices, not the product's). A CLI option's default
reads its declaration (`INGEST.chunk_tokens`, `DataError.exit_code`, an eval run's own default), so the command
and the code it runs cannot disagree.
"""

from __future__ import annotations

import ast
import io
import re
import textwrap
import tokenize
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FOLDERS = ("graph", "nodes", "tools", "reground")
HOME = Path("tools") / "tuning"
EXEMPT = (HOME, Path("reground") / "testing")
STRUCTURAL = {-1, 0, 1, 2}
TINY = 1e-6
BOUNDS = {"ge", "gt", "le", "lt"}
FACT = re.compile(r"#\s*fact:\s*(\S.*)?$")
# Statements a `# fact:` mark may cover whole: simple ones (an assignment, a return, an expression), never a block.
SIMPLE = (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Return, ast.Expr)


def _fact_lines(source: str) -> tuple[set[int], list[int]]:
    """(lines marked `# fact: why`, lines marked without a reason)."""
    marked: set[int] = set()
    bare: list[int] = []
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT and (match := FACT.search(token.string)):
            if match.group(1):
                marked.add(token.start[0])
            else:
                bare.append(token.start[0])
    return marked, bare


def _exempt_nodes(tree: ast.AST, facts: set[int]) -> set[int]:
    """ids of the constant nodes the rules above allow by their place in the tree."""
    exempt: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant | ast.UnaryOp):
            exempt |= {id(n) for n in ast.walk(node.slice)}
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if name in ("group", "span", "start", "end") and isinstance(func, ast.Attribute):
                exempt |= {id(n) for arg in node.args if isinstance(arg, ast.Constant) for n in ast.walk(arg)}
            if name == "round" and len(node.args) == 2:
                exempt |= {id(n) for n in ast.walk(node.args[1])}
            exempt |= {
                id(n) for kw in node.keywords if name == "round" and kw.arg == "ndigits" for n in ast.walk(kw.value)
            }
            if name == "Field":
                exempt |= {id(n) for kw in node.keywords if kw.arg in BOUNDS for n in ast.walk(kw.value)}
        if isinstance(node, SIMPLE) and (node.lineno in facts or node.end_lineno in facts):
            exempt |= {id(n) for n in ast.walk(node)}
    return exempt


def literals(source: str) -> list[tuple[int, float | int]]:
    """(line, value) of each bare numeric literal the rules above do not allow, in source order."""
    tree = ast.parse(source)
    facts, _ = _fact_lines(source)
    exempt = _exempt_nodes(tree, facts)
    negated = {
        id(node.operand)
        for node in ast.walk(tree)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant)
    }
    found: list[tuple[int, int, float | int]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Constant) or type(node.value) not in (int, float):
            continue
        if id(node) in exempt or node.lineno in facts:
            continue
        value = -node.value if id(node) in negated else node.value
        if value in STRUCTURAL or abs(value) < TINY:
            continue
        found.append((node.lineno, node.col_offset, value))
    return [(line, value) for line, _, value in sorted(found)]


def literal_report(root: Path) -> list[str]:
    """'path:line: value' for every bare numeric literal in graph/, nodes/, tools/ and reground/ outside the exempt
    folders, and 'path:line: # fact: without a reason' for a mark that gives none."""
    report: list[str] = []
    for folder in FOLDERS:
        for path in sorted((root / folder).rglob("*.py")):
            relative = path.relative_to(root)
            if any(relative.is_relative_to(folder) for folder in EXEMPT):
                continue
            source = path.read_text(encoding="utf-8")
            report += [f"{relative}:{line}: {value!r}" for line, value in literals(source)]
            report += [f"{relative}:{line}: # fact: without a reason" for line in _fact_lines(source)[1]]
    return report


def write_tree(root: Path, files: dict[str, str]) -> None:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")


def test_graph_nodes_and_tools_hold_no_bare_numeric_literal() -> None:
    report = literal_report(REPO)
    assert report == [], "move these numbers to tools/tuning/ (with their meaning and measurement):\n" + "\n".join(
        report
    )


@pytest.mark.parametrize(
    ("source", "reported"),
    [
        ("history = turns[-6:]\n", ["-6"]),
        ("def f(k: int = 10) -> None: ...\n", ["10"]),
        ("fused = fuse(rankings, k=10, weights=[1.0, 0.5, 0.5])\n", ["10", "0.5", "0.5"]),
        ("LENGTHS = {'sentence': (2, 0.9, True)}\n", ["0.9"]),
        ("if share >= max(0.5, 0.8 * best): pass\n", ["0.5", "0.8"]),
        ("x = round(score, 4) * 3\n", ["3"]),  # the precision is allowed, the factor is not
        ("LIMIT = 5  # fact:\n", ["5", "fact: without a reason"]),  # a mark needs its reason
        ("def f() -> None:  # fact: a block is never covered\n    return 7\n", ["7"]),
    ],
)
def test_a_planted_literal_is_reported(tmp_path: Path, source: str, reported: list[str]) -> None:
    write_tree(tmp_path, {"nodes/planted.py": source, "tools/tuning/ok.py": "THRESHOLD = 0.7919\n"})
    report = literal_report(tmp_path)
    assert len(report) == len(reported) and all(r.startswith("nodes/planted.py:") for r in report), report
    assert all(want in got for want, got in zip(reported, report, strict=True)), report


def test_structural_uses_and_the_home_are_not_reported(tmp_path: Path) -> None:
    write_tree(
        tmp_path,
        {
            "tools/tuning/triage.py": "JUDGE_ANSWER_THRESHOLD = 0.7919\nK = 10\n",
            "nodes/ok.py": """
                import re
                from pydantic import Field
                top_n: int = Field(default=TOP_N, ge=1, le=50)
                last = items[-1] + items[0] + 2 * 1.0 + row[3] + int(match.group(3))
                share = round(value / max(total, 1e-12), 4)
                pattern = re.compile(r"\\d{1,7}")  # a quantifier in a string is no number
                MONTHS = {"january": 1, "december": 12}  # fact: the calendar's months
                ok = 1 <= month <= 12 and 1 <= day <= 31  # fact: the calendar's bounds
            """,
        },
    )
    assert literal_report(tmp_path) == []


def test_a_cli_default_is_reported_and_the_scripted_model_is_not(tmp_path: Path) -> None:
    write_tree(
        tmp_path,
        {
            "reground/commands/planted.py": """
                parser.add_argument("--max-tokens", type=int, default=160)
                exit_code = 3
            """,
            "reground/testing/fake.py": "recent = messages[-3:]\n",
        },
    )
    report = literal_report(tmp_path)
    assert [r.split(": ")[1] for r in report] == ["160", "3"], report
    assert all(r.startswith("reground/commands/planted.py:") for r in report), report
