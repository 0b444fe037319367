"""Written replies against extracted ones on the same documentation cases: usefulness, and the code a reply names
that its passages do not hold (the code-aware check's measure).

    python -m reground.evals.runs.code_claims --run evals/results/techdocs_dev/write_qwen15_loco_uv \\
        --run evals/results/techdocs_dev/write_qwen15_loco_fastapi --system reground-write \\
        --against evals/results/techdocs_dev/reground_loco_uv \\
        --against evals/results/techdocs_dev/reground_loco_fastapi \\
        --out evals/results/techdocs_dev/write_qwen15_loco/code_claims.json

Reground's own lines (a caution, a hedge's lead-in) are not the model's claims: a caution line is left out before the
reply's code names are read (tools/signals/code_terms.py), against the passages the turn cited and the conversation.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from reground.evals.runs.usefulness import holds_every
from reground.prompts.injection import CAUTION
from reground.tools.signals.code_terms import unsupported_code

CAUTION_LEAD = CAUTION.split("{", 1)[0]
KINDS = ("answer", "partial", "hedge", "abstain", "clarify")


def _rows(runs: Sequence[Path], system: str) -> dict[str, dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {}
    for run in runs:
        for line in (run / system / "cases.jsonl").read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                rows[str(row["case_id"])] = row
    return rows


def claimed_code(row: dict[str, Any]) -> list[str]:
    """The code names a reply states that neither its passages nor the conversation hold."""
    reply = "\n".join(line for line in str(row.get("answer") or "").splitlines() if not line.startswith(CAUTION_LEAD))
    passages = [str(p.get("text") or "") for p in row.get("passages") or []]
    conversation = [str(h.get("text") or "") for h in row.get("history") or []] + [str(row.get("question") or "")]
    return unsupported_code(reply, passages, conversation)


def compare(runs: Sequence[Path], system: str, against: Sequence[Path], against_system: str) -> dict[str, Any]:
    written, extracted = _rows(runs, system), _rows(against, against_system)
    done = {c: r for c, r in written.items() if not r.get("error") and c in extracted}
    answerable = [c for c, r in done.items() if r.get("answerability") == "ANSWERABLE" and r.get("must_contain")]
    claims = {c: names for c, r in done.items() if (names := claimed_code(r))}
    return {
        "runs": [str(r) for r in runs],
        "against": [str(r) for r in against],
        "cases": len(done),
        "answerable_with_must_contain": len(answerable),
        "useful": sum(holds_every(done[c]["answer"], done[c]["must_contain"]) for c in answerable),
        "useful_against": sum(holds_every(extracted[c]["answer"], extracted[c]["must_contain"]) for c in answerable),
        "replies_naming_code_their_passages_lack": len(claims),
        "claims": claims,
        "kinds": {k: sum(r.get("kind") == k for r in done.values()) for k in KINDS},
        "llm_calls_mean": round(sum(int(r.get("llm_calls") or 0) for r in done.values()) / max(len(done), 1), 2),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m reground.evals.runs.code_claims", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--run", required=True, type=Path, action="append", help="written-reply runs (repeat)")
    parser.add_argument("--system", default="reground-write")
    parser.add_argument("--against", required=True, type=Path, action="append", help="extracted-reply runs (repeat)")
    parser.add_argument("--against-system", default="reground")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    summary = compare(args.run, args.system, args.against, args.against_system)
    text = json.dumps(summary, indent=1)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n", encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
