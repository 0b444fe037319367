"""The retrieval stack's numbers: RetrievalSettings (the knobs of tools/retrieval/search.py, tuned on doc2dial dev,
each with its measurement), the LLM-free rerank, keywords, BM25 and the query transforms."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal, get_args

from reground.tools.tuning.declared import setting

# The query transforms `RetrievalSettings.query_transform` selects (query_transforms.py writes their texts).
QueryTransform = Literal["none", "hyde", "topics", "multi_query"]
TRANSFORMS: tuple[str, ...] = get_args(QueryTransform)


def check_transform(name: str) -> str:
    """The transform's name, or ValueError listing the known ones."""
    if name not in TRANSFORMS:
        raise ValueError(f"unknown query transform {name!r}: use one of {', '.join(TRANSFORMS)}")
    return name


@dataclass(frozen=True)
class RetrievalSettings:
    """Knobs of the stack; defaults were tuned on doc2dial cases_dev (evals/results/retrieval_dev). Each is a
    `setting`: the Context's `retrieval` group is this dataclass, and Studio's form shows each field's meaning and
    bounds.

    Signals: {lexical|dense}_{history|question|topic} rank chunks with BM25 or MiniLM for the question plus recent
    dialogue, the question alone, or the conversation's opening exchange (a document scores its best chunk);
    document_lexical and document_question are BM25 over whole documents for the history query and the question,
    document_phrases the share of the phrase query's word n-grams a document holds verbatim (replies quote their
    documents), all three on the leading documents only (`rerank_candidates`). Each signal is max-normalised, then
    weighted and summed. Tuned on one half of doc2dial dev (dialogues split by a seeded hash), checked on the other
    half (evals/README.md "Retrieval"): the opening exchange names the topic that later short turns ("yes", "and for
    a child?") only imply.

    Topic shifts: a user message of at least `shift_min_terms` content words the documents use whose best match
    inside the document the conversation points to is weak next to its best match anywhere (their ratio, for MiniLM
    and for BM25, the larger one, below `shift_max_fit`) opens a new topic: from that turn on, the topic signal
    searches that message (and the reply to it) and the phrase signal reads only the replies since. A message that
    stands alone (tools/signals/answerability.stands_alone) and shares no content word with the dialogue needs only
    `shift_min_terms_standalone` known words. On the doc2dial dev cases the rule costs a little recall
    (evals/README.md, "Retrieval"); without the shared-word gate, generic in-topic follow-ups shifted and cost more.
    """

    chunk_k: int = setting(
        150, meaning="Chunks fetched per lexical or dense search before they are reduced to documents.", ge=1
    )
    weights: Mapping[str, float] = setting(
        meaning=(
            "Weights of the document signals ({lexical|dense}_{history|question|topic}, document_lexical, "
            "document_question, document_phrases), each max-normalised, weighted and summed (tuned on doc2dial dev)."
        ),
        factory=lambda: {
            "lexical_history": 0.9,
            "dense_topic": 1.75,
            "document_lexical": 1.25,
            "document_question": 0.3,
            "document_phrases": 0.5,
        },
    )
    phrase_ngram: int = setting(4, meaning="Word n-gram length of the document_phrases signal (stopwords kept).", ge=1)
    phrase_history_tokens: int = setting(
        400, meaning="Dialogue tokens of the phrase query (the latest assistant replies).", ge=0
    )
    fusion: Literal["score", "rrf"] = setting(
        "score", meaning="How the signals are fused: 'score' (max-normalised score sum) or 'rrf' (reciprocal rank)."
    )
    rrf_k: int = setting(60, meaning="Reciprocal rank fusion's k (fusion 'rrf').", ge=1)
    rerank_candidates: int = setting(
        40, meaning="Documents the whole-document signals rescore: the fused top ...", ge=1
    )
    signal_leaders: int = setting(5, meaning="... plus each chunk-level signal's own top documents.", ge=0)
    normalization: Literal["max", "minmax"] = setting(
        "max",
        meaning=(
            "How a chunk-level signal's document scores are scaled before weighting: 'max' (score / best) or "
            "'minmax' ((score - lowest found) / (best - lowest found), which spreads dense cosines near the best)."
        ),
    )
    keyword_weight: float = setting(
        0.0,
        meaning=(
            "Weight of the keyword cosines' sum in the paragraph score (ConvRAG's fine-grained term); 0: on doc2dial "
            "dev the passages held the gold document no more often with it (docs/experiments.md, retrieval)."
        ),
        ge=0.0,
    )
    lexical_paragraph_weight: float = setting(0.3, meaning="Weight of a BM25-like term in the paragraph score.", ge=0.0)
    doc_prior_weight: float = setting(
        3.0, meaning="Weight of the normalised document score in a paragraph's score.", ge=0.0
    )
    history_paragraph_weight: float = setting(
        0.5, meaning="Weight of cos(E(history query), E(p)) in the paragraph score.", ge=0.0
    )
    same_document_penalty: float = setting(
        0.03,
        meaning=(
            "Document-aware selection: a passage loses this much of its (max-normalised) score per passage already "
            "taken from its document, so the top documents each get their best paragraph first; 0 = score order."
        ),
        ge=0.0,
    )
    chunk_ranking: Literal["auto", "on", "off"] = setting(
        "off",
        meaning=(
            "Which paragraphs become candidates on documentation with code: the chunk ranker trained on developer "
            "docs ('auto': when a paragraph holds a fenced code block; 'on': always) or the paragraph score ('off'; "
            "the unit ranker and documentation triage were fitted on its candidates: docs/experiments.md)."
        ),
    )
    sentence_rerank_weight: float = setting(
        0.3,
        meaning=(
            "The sentence rerank: a candidate's max-normalised retrieval score plus this weight times the cosine of "
            "its sentence closest to the question (about equally good for 0.2-0.6 on doc2dial dev; evals/README.md)."
        ),
        ge=0.0,
    )
    detect_topic_shift: bool = setting(
        True, meaning="Detect a change of topic in a user message and search the new topic from then on."
    )
    shift_min_terms: int = setting(
        8, meaning="Content words the documents use that a user message needs to open a new topic.", ge=0
    )
    shift_min_terms_standalone: int = setting(
        3,
        meaning="The same for a message that stands alone and shares no content word with the dialogue.",
        ge=0,
    )
    shift_max_fit: float = setting(
        0.5,
        meaning=(
            "A message opens a new topic when its best match inside the conversation's document is below this share "
            "of its best match anywhere (MiniLM and BM25, the larger)."
        ),
        ge=0.0,
    )
    shift_history_weight: float = setting(
        1.0,
        meaning="For the turn that opens a new topic, the weight of the signals that read the earlier dialogue.",
        ge=0.0,
    )
    shift_question_weight: float = setting(
        0.0, meaning="For the turn that opens a new topic, the weight of the question-only chunk signals.", ge=0.0
    )
    query_transform: QueryTransform = setting(
        "none",
        meaning=(
            "A query transform (one refiner-model call a turn): 'hyde' and 'topics' add the dense search of the texts "
            "the model wrote as a document signal; 'multi_query' searches each variant and fuses the rankings by "
            "reciprocal rank; 'none'."
        ),
    )
    transform_weight: float = setting(
        1.0, meaning="Weight of the transform's signal, or of each multi_query variant (the original weighs 1).", ge=0.0
    )
    transform_history_tokens: int = setting(
        200, meaning="Dialogue tokens shown to the model that writes the transform's texts.", ge=0
    )
    transform_max_tokens: int = setting(160, meaning="Reply cap of the transform's call (tokens).", ge=1)

    def __post_init__(self) -> None:
        check_transform(self.query_transform)


@dataclass(frozen=True)
class Rerank:
    """The `fusion` rerank (search.fusion_rerank): weighted reciprocal rank fusion of three orders."""

    # RRF's k: small, so the top ranks dominate (3 passages are kept of 8).
    fusion_k: int = 10
    # Weights of the retrieval, paragraph-score and document-score orders: the retrieval order counts double.
    fusion_weights: tuple[float, float, float] = (1.0, 0.5, 0.5)


@dataclass(frozen=True)
class Search:
    """Caches and fixed limits of the search functions (every value the Context carries is passed by the caller)."""

    # Query vectors, topic-shift decisions and document n-grams a retriever keeps, and its whole-document indexes
    # (one per scope and store size).
    cache_size: int = 4096
    document_indexes: int = 8
    # Without paragraph scoring, chunks keep document order then position: a document's rank weighs this much
    # more than any chunk position.
    document_rank_stride: int = 10_000
    # Lexical keywords: at most `keywords`, words of at least `keyword_min_chars` characters.
    keywords: int = 5
    keyword_min_chars: int = 3


@dataclass(frozen=True)
class Transforms:
    """Query transforms (query_transforms.py): one LLM call that writes texts to search with."""

    # An expansion longer than this is cut (a runaway reply would dominate the embedding), and a reply's list is
    # cut to this many texts (each one is one more search).
    max_text_chars: int = 600
    max_items: int = 5
    # A hypothetical passage needs at least this many words.
    min_passage_words: int = 3


@dataclass(frozen=True)
class Bm25:
    """BM25's k1 and b: Robertson's usual values, not tuned here."""

    k1: float = 1.5
    b: float = 0.75


RERANK: Final = Rerank()
SEARCH: Final = Search()
QUERY_TRANSFORMS: Final = Transforms()
BM25_PARAMS: Final = Bm25()
