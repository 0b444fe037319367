"""Every metric module loads by path with no network and a fresh HF home, and equals its library.

The loading runs in a subprocess: `evaluate` reads HF_HOME when first imported, and the sockets of
that process refuse every non-loopback connection, so a module that tried to reach the hub fails.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from reground.evals.metrics import METRIC_NAMES, load_metric, metric_path

TEXT_PREDICTIONS = [
    "You need a doctor's certificate from the fourth day of illness.",
    "Submit receipts in the expense portal within 30 days.",
    "The cat sat on the mat.",
]
TEXT_REFERENCES = [
    "From the fourth day of illness you need a certificate from a doctor.",
    "Receipts go into the expense portal within 30 days of the trip.",
    "A cat was sitting on the mat.",
]

# Runs in the child: block the network, load every module by path, compute on fixed inputs.
_CHILD = r"""
import json, socket, sys
_real_connect = socket.socket.connect
def _guarded(self, address):
    host = address[0] if isinstance(address, tuple) else address
    if isinstance(host, str) and host not in ("127.0.0.1", "::1", "localhost") and "/" not in host:
        raise OSError(f"network blocked in test: {address!r}")
    return _real_connect(self, address)
socket.socket.connect = _guarded
socket.create_connection = lambda *a, **k: (_ for _ in ()).throw(OSError("network blocked in test"))

try:
    socket.socket().connect(("93.184.216.34", 443))
    raise SystemExit("the network guard did not block an outbound connection")
except OSError as exc:
    assert "blocked" in str(exc), exc

from reground.evals.metrics import METRIC_NAMES, load_metric
preds, refs = json.loads(sys.argv[1]), json.loads(sys.argv[2])
out = {"loaded": []}
for name in METRIC_NAMES:
    load_metric(name)
    out["loaded"].append(name)
out["token_f1"] = load_metric("token_f1").compute(predictions=preds, references=refs)["token_f1"]
out["rouge"] = load_metric("rouge").compute(predictions=preds, references=refs)
out["sacrebleu"] = load_metric("sacrebleu").compute(predictions=preds, references=refs)["score"]
out["correlation"] = load_metric("correlation").compute(
    predictions=[1, 2, 3, 4, 5], references=[2, 1, 4, 3, 5]
)
print("RESULT " + json.dumps(out))
"""


@pytest.fixture(scope="module")
def offline_child(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    home = tmp_path_factory.mktemp("hf_home")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE"))}
    env.update(HF_HOME=str(home), HF_DATASETS_CACHE=str(home / "datasets"), NO_PROXY="*")
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, json.dumps(TEXT_PREDICTIONS), json.dumps(TEXT_REFERENCES)],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULT "))
    result: dict[str, object] = json.loads(line[len("RESULT ") :])
    result["home"] = str(home)
    return result


def test_every_module_loads_offline_from_a_fresh_hf_home(offline_child: dict[str, object]) -> None:
    assert offline_child["loaded"] == list(METRIC_NAMES)
    # evaluate cached our scripts in the fresh home: it really loaded from there, by path.
    cached = {p.stem for p in Path(str(offline_child["home"])).rglob("*.py")}
    assert {"token_f1", "rouge", "meteor"} <= cached


def test_offline_values_equal_the_reference_libraries(offline_child: dict[str, object]) -> None:
    import sacrebleu
    from rouge_score import rouge_scorer

    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=False)
    scores = [scorer.score(r, p) for p, r in zip(TEXT_PREDICTIONS, TEXT_REFERENCES, strict=True)]
    rouge = offline_child["rouge"]
    assert isinstance(rouge, dict)
    for key in ("rouge1", "rouge2", "rougeL"):
        expected = sum(s[key].fmeasure for s in scores) / len(scores)
        assert rouge[key] == pytest.approx(expected, abs=1e-12)
        expected_p = sum(s[key].precision for s in scores) / len(scores)
        assert rouge[f"{key}_precision"] == pytest.approx(expected_p, abs=1e-12)
    bleu = sacrebleu.corpus_bleu(TEXT_PREDICTIONS, [TEXT_REFERENCES]).score
    assert offline_child["sacrebleu"] == pytest.approx(bleu, abs=1e-9)
    corr = offline_child["correlation"]
    assert isinstance(corr, dict)
    assert corr["spearman"] == pytest.approx(0.8) and corr["kendall"] == pytest.approx(0.6)


def test_token_f1_and_exact_match_by_hand() -> None:
    # prediction tokens (normalised): cat sat on mat ; reference: cat sat on hat today
    # overlap 3 -> P = 3/4, R = 3/5, F1 = 2PR/(P+R) = 2/3
    out = load_metric("token_f1").compute(predictions=["The cat sat on a mat!"], references=["cat sat on hat today"])
    assert out["token_f1"] == pytest.approx(2 / 3)
    em = load_metric("exact_match").compute(predictions=["The  Cat, sat.", "dog"], references=["cat sat", "a cat"])
    assert em["exact_match"] == 0.5


def test_bleu_1_to_4_equal_nltk_corpus_bleu() -> None:
    from nltk.translate.bleu_score import SmoothingFunction, corpus_bleu

    out = load_metric("bleu").compute(predictions=TEXT_PREDICTIONS, references=TEXT_REFERENCES)
    hyps = [p.lower().replace("'", " ").replace(".", " ").replace(",", " ").split() for p in TEXT_PREDICTIONS]
    refs = [[r.lower().replace("'", " ").replace(".", " ").split()] for r in TEXT_REFERENCES]
    smooth = SmoothingFunction().method1
    assert out["bleu1"] == pytest.approx(corpus_bleu(refs, hyps, weights=(1, 0, 0, 0), smoothing_function=smooth))
    assert out["bleu4"] == pytest.approx(corpus_bleu(refs, hyps, smoothing_function=smooth))
    assert 1 >= out["bleu1"] >= out["bleu2"] >= out["bleu3"] >= out["bleu4"] > 0
    # SacreBLEU accepts several references per prediction.
    multi = load_metric("sacrebleu").compute(predictions=["a b c d"], references=[["a b c d", "x y"]])
    assert multi["score"] == pytest.approx(100.0)


def test_recall_and_k_precision_by_hand() -> None:
    out = load_metric("recall_kprecision").compute(
        predictions=["You get 30 days of leave."],
        references=["30 days per year"],
        knowledge=[["Full-time staff get 30 days.", "Leave requests go to HR."]],
    )
    # reference tokens: 30 days per year -> 30, days found: 2/4
    assert out["recall"] == pytest.approx(0.5)
    # answer tokens: you get 30 days of leave -> get 30 days leave found: 4/6
    assert out["k_precision"] == pytest.approx(4 / 6)


def test_meteor_equals_nltk_or_explains_why_it_is_missing() -> None:
    from reground.evals.data.setup_wordnet import ensure_wordnet
    from reground.evals.metrics import MetricUnavailableError

    meteor = load_metric("meteor")
    if ensure_wordnet() is None:
        with pytest.raises(MetricUnavailableError, match="wordnet-base"):
            meteor.compute(predictions=["a"], references=["a"])
        pytest.skip("WordNet not installed here (apt-get install wordnet-base wordnet-sense-index)")
    from nltk.tokenize import word_tokenize
    from nltk.translate.meteor_score import meteor_score

    out = meteor.compute(predictions=TEXT_PREDICTIONS, references=TEXT_REFERENCES)
    expected = [
        meteor_score(
            [word_tokenize(r.lower(), preserve_line=True)],
            word_tokenize(p.lower(), preserve_line=True),
        )
        for p, r in zip(TEXT_PREDICTIONS, TEXT_REFERENCES, strict=True)
    ]
    assert out["meteor"] == pytest.approx(sum(expected) / 3)
    # The near-paraphrase pair scores high (exact, stem and WordNet synonym matches).
    assert out["scores"][2] > 0.5


def test_wordnet_setup_writes_real_files_and_lexnames(tmp_path: Path) -> None:
    from reground.evals.data.setup_wordnet import DEBIAN_WORDNET, LEXNAMES, install_wordnet, installed

    fake = tmp_path / "debian"
    fake.mkdir()
    for name in (
        "data.noun",
        "index.noun",
        "data.verb",
        "index.verb",
        "data.adj",
        "index.adj",
        "data.adv",
        "index.adv",
    ):
        (fake / name).write_text("x\n")
    root = install_wordnet(fake, tmp_path / "nltk_data")
    target = root / "corpora" / "wordnet"
    assert installed(root) and not (target / "data.noun").is_symlink()
    lines = (target / "lexnames").read_text().splitlines()
    assert len(lines) == len(LEXNAMES) == 45 and lines[3] == "03\tnoun.Tops\t1" and lines[44] == "44\tadj.ppl\t3"
    with pytest.raises(FileNotFoundError, match="wordnet-base"):
        install_wordnet(tmp_path / "missing", tmp_path / "other")
    assert DEBIAN_WORDNET.name == "wordnet"


def test_retrieval_levenshtein_and_correlation() -> None:
    out = load_metric("retrieval").compute(
        predictions=[["d1", "d2", "d3"], ["d4", "d5"], ["d9"]],
        references=[["d2"], ["d7"], ["d9", "d8"]],
        ks=[1, 3],
    )
    assert out == {
        "recall@1": pytest.approx(1 / 3),
        "recall@3": pytest.approx(2 / 3),
        "mrr": pytest.approx(0.5),
    }
    gold = "Full-time employees get 30 days of paid annual leave. " * 4
    near = gold.replace("30 days", "thirty days")  # distance 2 x 4 = ... well under 100
    far = "Book trains in second class through the travel portal. " * 4
    lev = load_metric("levenshtein_accuracy")
    assert lev.compute(predictions=[near, far], references=[gold, gold])["hits"] == [True, False]
    assert lev.compute(predictions=[near], references=[gold], max_distance=3)["accuracy"] == 0.0
    flat = load_metric("correlation").compute(predictions=[1, 1, 1], references=[1, 2, 3])
    assert flat["spearman"] is None and flat["n"] == 3


def test_bertscore_is_optional_and_says_what_is_missing() -> None:
    import importlib.util

    from reground.evals.metrics import MetricUnavailableError

    bertscore = load_metric("bertscore")
    if importlib.util.find_spec("bert_score") is None:
        with pytest.raises(MetricUnavailableError, match="bert-score"):
            bertscore.compute(predictions=["a"], references=["a"], knowledge=["a"])
    else:
        with pytest.raises(MetricUnavailableError, match="local model directory"):
            bertscore.compute(predictions=["a"], references=["a"], knowledge=["a"], model_type="bert-base")


def test_unknown_metric_names_the_known_ones() -> None:
    with pytest.raises(ValueError, match="token_f1"):
        metric_path("bleurt")
