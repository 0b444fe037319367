"""The retrieval stack's numbers: RetrievalSettings (the knobs of tools/retrieval/search.py, tuned on doc2dial dev,
each with its measurement), the LLM-free rerank, keywords, BM25 and the query transforms."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, Literal, get_args

from reground.tools.tuning.turn import BUDGETS

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
    """Knobs of the stack; defaults were tuned on doc2dial cases_dev (evals/results/retrieval_dev)."""

    chunk_k: int = 150  # chunks fetched per lexical/dense search before reducing them to documents
    # Weights of the document signals: chunk-level rankings named {lexical|dense}_{history|question}
    # (a document scores its best chunk) and `document_lexical` (BM25 over whole documents).
    # Signal names: {lexical|dense}_{history|question|topic} rank chunks with BM25 or MiniLM for the question plus
    # recent dialogue, the question alone, or the conversation's opening exchange (a document scores its best
    # chunk); document_lexical and document_question are BM25 over whole documents for the history query and the
    # question, document_phrases the phrase match below, all three on the leading documents only
    # (`rerank_candidates`). Each signal is max-normalised, then weighted and summed.
    # Tuned on one half of doc2dial dev (dialogues split by a seeded hash), checked on the other half
    # (evals/README.md "Retrieval"): the opening exchange names the topic that later short turns ("yes", "and for a
    # child?") only imply.
    weights: Mapping[str, float] = field(
        default_factory=lambda: {
            "lexical_history": 0.9,
            "dense_topic": 1.75,
            "document_lexical": 1.25,
            "document_question": 0.3,
            "document_phrases": 0.5,
        }
    )
    # document_phrases: the share of the phrase query's word n-grams (stopwords kept) that a document holds
    # verbatim; replies quote their documents, so a conversation's phrases point to the document it is about.
    phrase_ngram: int = 4
    phrase_history_tokens: int = 400  # dialogue tokens in the phrase query (conversation_query's phrase budget)
    fusion: Literal["score", "rrf"] = "score"  # max-normalised score sum, or reciprocal rank fusion
    rrf_k: int = 60
    rerank_candidates: int = 40  # documents the whole-document signals rescore (the fused top) ...
    signal_leaders: int = 5  # ... plus each chunk-level signal's own top documents
    # How a chunk-level signal's document scores are scaled before weighting: "max" (score / best) or "minmax"
    # ((score - lowest found) / (best - lowest found)), which spreads dense cosines that all sit near the best.
    normalization: Literal["max", "minmax"] = "max"
    # Weight of the keyword cosines' sum in the paragraph score (ConvRAG's fine-grained term). 0: on the doc2dial
    # dev turns with a gold answer (whole graph, scripted model) the kept passages held the gold document no more
    # often with it, token F1 equal, and each keyword cost a row in the turn's embedding call (docs/experiments.md,
    # retrieval). The keywords still reach the lexical signals.
    keyword_weight: float = 0.0
    lexical_paragraph_weight: float = 0.3  # weight of a BM25-like term in the paragraph score
    doc_prior_weight: float = 3.0  # weight of the normalised document score in a paragraph's score
    history_paragraph_weight: float = 0.5  # weight of cos(E(history query), E(p)) in the paragraph score
    # Document-aware selection of candidates and kept passages: a passage loses this much of its (max-normalised)
    # score per passage already taken from its document, so the top documents each get their best paragraph
    # before a second paragraph of one document; 0 = plain score order.
    same_document_penalty: float = 0.03
    # Which paragraphs of those documents become candidates on documentation with code: the chunk ranker trained
    # on developer docs (tools/retrieval/chunk_ranker.py) instead of the score above. "auto": when the documents'
    # paragraphs hold a fenced code block; "on": always; "off" (default): never. It keeps the paragraph holding the
    # answer more often (evals/results/units/chunk_ranker.json), but the unit ranker and the documentation triage
    # downstream were fitted on this score's candidates: with it, techdocs dev leave-one-corpus-out answered one more
    # unanswerable turn than the target allows (techdocs_dev/reground_loco_chunk_ranker/; docs/experiments.md).
    chunk_ranking: Literal["auto", "on", "off"] = "off"
    # The default rerank (`sentence_rerank`): a candidate's retrieval score (max-normalised) plus this weight times
    # the cosine of its sentence closest to the question. On the doc2dial dev turns with a gold answer (whole graph,
    # scripted model) the kept passages held the gold document more often than with the fusion rerank or the
    # retrieval order alone, about equally for weights 0.2-0.6 (evals/README.md, "Rerank by sentence").
    sentence_rerank_weight: float = 0.3
    # Topic shifts: a user message of at least `shift_min_terms` content words the documents use (a message in words
    # they never use, e.g. another language, matches nothing anywhere) whose best match inside the document
    # the conversation points to is weak next to its best match anywhere (`fit`: the ratio of the two, for MiniLM
    # and for BM25, the larger one, is below `shift_max_fit`) opens a new topic: from that turn on, the topic signal
    # searches that message (and the reply to it) instead of the conversation's opening exchange, and the phrase
    # signal reads only the replies since.
    # For the turn that opens it, the signals reading the earlier dialogue are weighted by `shift_history_weight`
    # (0 drops them) and the question-only chunk signals get `shift_question_weight`.
    # A user message needs only `shift_min_terms_standalone` known content words when it stands alone (no
    # pronoun, ellipsis or unnamed definite reference: tools/answerability.stands_alone) and shares no content word
    # with the dialogue: "How do I book a flight for a business trip?" after parental leave has three. Earlier
    # messages are judged by the same rule, so the new topic holds for the follow-ups after it. On the doc2dial dev
    # cases the rule costs a little recall (evals/README.md, "Retrieval"); without the shared-word gate, generic
    # in-topic follow-ups ("Can I pay with my bank account?") shifted and cost more.
    detect_topic_shift: bool = True
    shift_min_terms: int = 8
    shift_min_terms_standalone: int = 3
    shift_max_fit: float = 0.5
    shift_history_weight: float = 1.0
    shift_question_weight: float = 0.0
    # Query transforms (query_transforms.py, the HR chatbot paper's; one LLM call a turn with the refiner
    # model): "hyde" and "topics" add the dense search of the texts the model wrote as one more document signal
    # (weight `transform_weight`); "multi_query" searches each variant alone with the whole stack and fuses the
    # rankings with the original query's by reciprocal rank (the original weighted 1, each variant `transform_weight`).
    query_transform: QueryTransform = "none"
    transform_weight: float = 1.0
    transform_history_tokens: int = 200  # dialogue shown to the model that writes the texts
    transform_max_tokens: int = 160  # reply cap of that call

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
    """Defaults and caches of the search functions (the graph passes its Context's values)."""

    # Dialogue tokens of the history query and of the phrase query, and reciprocal rank fusion's k, when a caller
    # names none: the run's own defaults (the budgets' and RetrievalSettings'), not second copies.
    history_tokens: int = BUDGETS.history_token_budget
    phrase_tokens: int = RetrievalSettings.phrase_history_tokens
    rrf_k: int = RetrievalSettings.rrf_k
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
