"""Install WordNet for NLTK (METEOR needs it) from Debian's `wordnet-base` + `wordnet-sense-index`.

NLTK's own WordNet download is not on PyPI and reaches a host that is blocked here, so we copy the
Debian dictionary files (real files, not symlinks: NLTK's reader opens them by name) into
`<nltk_data>/corpora/wordnet` and add the `lexnames` file Debian does not ship.

    apt-get install -y wordnet-base wordnet-sense-index
    python -m reground.evals.data.setup_wordnet
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

from reground.tools.adapters.paths import cache_dir

DEBIAN_WORDNET = Path("/usr/share/wordnet")

# The 45 lexicographer files of WordNet 3.0, in number order (the `lexnames` file NLTK reads).
LEXNAMES = [
    "adj.all",
    "adj.pert",
    "adv.all",
    "noun.Tops",
    "noun.act",
    "noun.animal",
    "noun.artifact",
    "noun.attribute",
    "noun.body",
    "noun.cognition",
    "noun.communication",
    "noun.event",
    "noun.feeling",
    "noun.food",
    "noun.group",
    "noun.location",
    "noun.motive",
    "noun.object",
    "noun.person",
    "noun.phenomenon",
    "noun.plant",
    "noun.possession",
    "noun.process",
    "noun.quantity",
    "noun.relation",
    "noun.shape",
    "noun.state",
    "noun.substance",
    "noun.time",
    "verb.body",
    "verb.change",
    "verb.cognition",
    "verb.communication",
    "verb.competition",
    "verb.consumption",
    "verb.contact",
    "verb.creation",
    "verb.emotion",
    "verb.motion",
    "verb.perception",
    "verb.possession",
    "verb.social",
    "verb.stative",
    "verb.weather",
    "adj.ppl",
]
_POS_NUMBER = {"noun": 1, "verb": 2, "adj": 3, "adv": 4}

REQUIRED = (
    "data.noun",
    "index.noun",
    "data.verb",
    "index.verb",
    "data.adj",
    "index.adj",
    "data.adv",
    "index.adv",
)


def lexnames_text() -> str:
    return "".join(f"{i:02d}\t{name}\t{_POS_NUMBER[name.split('.')[0]]}\n" for i, name in enumerate(LEXNAMES))


def nltk_data_dir() -> Path:
    """Where we install: the first entry of $NLTK_DATA if set, else <reground cache>/nltk_data."""
    env = os.environ.get("NLTK_DATA", "")
    first = env.split(os.pathsep)[0] if env else ""
    return Path(first).expanduser() if first else cache_dir() / "nltk_data"


def installed(root: Path | None = None) -> bool:
    target = (root or nltk_data_dir()) / "corpora" / "wordnet"
    return all((target / name).is_file() for name in (*REQUIRED, "lexnames"))


def install_wordnet(source: Path = DEBIAN_WORDNET, root: Path | None = None) -> Path:
    """Copy the dictionary files into `<root>/corpora/wordnet`; returns the nltk_data root."""
    root = root or nltk_data_dir()
    missing = [name for name in REQUIRED if not (source / name).is_file()]
    if missing:
        raise FileNotFoundError(
            f"WordNet files {missing} not found in {source}: run "
            "`apt-get install -y wordnet-base wordnet-sense-index` (Debian/Ubuntu), or skip METEOR."
        )
    target = root / "corpora" / "wordnet"
    target.mkdir(parents=True, exist_ok=True)
    for path in source.iterdir():
        if path.is_file():
            shutil.copyfile(path.resolve(), target / path.name)
    (target / "lexnames").write_text(lexnames_text(), encoding="utf-8")
    return root


def ensure_wordnet() -> Path | None:
    """The nltk_data root holding WordNet (installed from Debian's files if needed), else None."""
    root = nltk_data_dir()
    if not installed(root):
        if not all((DEBIAN_WORDNET / name).is_file() for name in REQUIRED):
            return None
        install_wordnet(DEBIAN_WORDNET, root)
    import nltk

    if str(root) not in nltk.data.path:
        nltk.data.path.insert(0, str(root))
    return root


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source", type=Path, default=DEBIAN_WORDNET)
    parser.add_argument("--root", type=Path, default=None, help="nltk_data directory (default: $NLTK_DATA or cache)")
    args = parser.parse_args(argv)
    try:
        root = install_wordnet(args.source, args.root)
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"WordNet installed in {root / 'corpora' / 'wordnet'}; set NLTK_DATA={root} for other tools")
    return 0


if __name__ == "__main__":
    sys.exit(main())
