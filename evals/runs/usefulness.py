"""Whether replies help: the exact call, flag or value a useful reply must hold (`must_contain`), copied site markup,
and the turn's cost, per answerability class and per collection.

A case file may give each answerable turn `must_contain`: short strings (`Depends(common_parameters)`,
`uv add --dev pytest`) that a reply which answers must hold. A reply holds one when it contains it case-insensitively
with whitespace normalised; a reply is *useful* when it holds every one. Replies are also read for documentation-site
markup a reply should never carry: raw link syntax `](`, admonition and tab markers, language-conditional blocks,
autoref macros and mkdocstrings' autodoc lines.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

# Site markup that must not reach a reply (the markdown loader turns each into text or structure).
MARKUP = {
    "link": re.compile(r"\]\("),
    "admonition": re.compile(r"^\s*(!!!|\?\?\?\+?|///)\s*\w", re.M),
    "tab": re.compile(r'^\s*===\+?\s+"', re.M),
    "language_block": re.compile(r"^\s*:::\s*\w*\s*$", re.M),
    "macro": re.compile(r"@\[[^\]]+\]|\{\s*#[\w-]+\s*\}|\{\*.*?\*\}"),
    "autodoc": re.compile(r"^\s*:::\s+[A-Za-z_]\w*(\.\w+)+\b", re.M),  # mkdocstrings' `::: package.Name`
}


def _normal(text: str) -> str:
    return " ".join(text.lower().split())


def holds_every(reply: str, strings: Iterable[str]) -> bool:
    """Whether the reply holds every string, case-insensitively and whitespace-normalised."""
    said = _normal(reply)
    return all(_normal(s) in said for s in strings)


_CODE = re.compile(r"^[ \t]*(`{3,}|~{3,})[^\n]*\n.*?\n[ \t]*\1[ \t]*$|`[^`\n]+`", re.S | re.M)


def markup_in(reply: str) -> list[str]:
    """The kinds of site markup a reply carries outside its code (`items["a"](x)` in a code block is code; empty:
    none)."""
    prose = _CODE.sub(" ", reply)
    return [name for name, pattern in MARKUP.items() if pattern.search(prose)]


def _share(values: Sequence[bool]) -> float | None:
    return sum(values) / len(values) if values else None


def usefulness_table(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """{collection or "all": {class: {n, useful}}, markup counts, median seconds} over finished rows; empty when no
    row carries `must_contain`."""
    done = [r for r in rows if not r.get("error")]
    if not any(r.get("must_contain") for r in done):
        return {}
    out: dict[str, Any] = {}
    collections = sorted({str(r.get("collection") or "") for r in done})
    for collection in ["all", *[c for c in collections if c and len(collections) > 1]]:
        group = [r for r in done if collection == "all" or r.get("collection") == collection]
        by_class: dict[str, Any] = {}
        for label in sorted({str(r.get("answerability") or "") for r in group}):
            members = [r for r in group if str(r.get("answerability") or "") == label]
            hits = [
                holds_every(str(r.get("answer") or ""), r["must_contain"]) for r in members if r.get("must_contain")
            ]
            entry: dict[str, Any] = {"n": len(members)}
            if hits:
                entry.update(n_with_must_contain=len(hits), useful=_share(hits))
            by_class[label or "unlabelled"] = entry
        seconds = [float(r["seconds"]) for r in group if r.get("seconds") is not None]
        markup = [markup_in(str(r.get("answer") or "")) for r in group]
        out[collection] = {
            "classes": by_class,
            "replies_with_markup": sum(1 for m in markup if m),
            "markup": {name: sum(1 for m in markup if name in m) for name in MARKUP},
            "latency_median_s": statistics.median(seconds) if seconds else None,
        }
    return out


def useful_shares(table: Mapping[str, Any]) -> Iterable[tuple[str, str, float, int]]:
    """(collection, class, useful share, n) for every class with `must_contain` (for printing)."""
    for collection, entry in table.items():
        for label, row in entry["classes"].items():
            if row.get("useful") is not None:
                yield collection, label, float(row["useful"]), int(row["n_with_must_contain"])


def rescore(runs: Sequence[Path], cases: Path, system: str = "reground", out: Path | None = None) -> dict[str, Any]:
    """The usefulness and behaviour tables of finished `eval answers` runs, pooled (a leave-one-corpus-out pair: one
    run per collection), `must_contain` read from the case file (a run made before rows carried it is scored the
    same way); written to OUT/summary.json (default: the one run's usefulness.json)."""
    from reground.evals.data.datasets import load_cases
    from reground.evals.records import latest_by_case, read_jsonl
    from reground.evals.runs.behaviour import behaviour_table

    wanted = {c.case_id: c for c in load_cases(cases)}
    rows = []
    for run in runs:
        for case_id, row in latest_by_case(read_jsonl(run / system / "cases.jsonl")).items():
            case = wanted.get(case_id)
            if case is not None and not row.get("error"):
                rows.append({**row, "must_contain": list(case.must_contain), "collection": case.collection})
    table = {
        "runs": [str(run) for run in runs],
        "system": system,
        "cases": str(cases),
        "n_cases": len(rows),
        "usefulness": usefulness_table(rows),
        "behaviour": behaviour_table(rows),
    }
    target = out / "summary.json" if out else runs[0] / "usefulness.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(table, indent=1) + "\n", encoding="utf-8")
    return table


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m reground.evals.runs.usefulness", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--run", required=True, type=Path, action="append", help="an `eval answers` output (repeat)")
    parser.add_argument("--cases", required=True, type=Path, help="the case file carrying `must_contain`")
    parser.add_argument("--system", default="reground")
    parser.add_argument("--out", type=Path, default=None, help="write the pooled summary.json here")
    args = parser.parse_args(argv)
    table = rescore(args.run, args.cases, args.system, args.out)
    for collection, label, share, n in useful_shares(table["usefulness"]):
        print(f"useful, {collection} {label} (n={n}): {share:.3f}")
    for label, row in table["behaviour"].items():
        shares = ", ".join(f"{k}={row[k]:.3f}" for k in ("answer", "hedge", "abstain", "clarify"))
        print(f"{label} (n={row['n']}): {shares}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
