"""The spaCy engine Presidio runs on, built from what PyPI ships so it works offline.

Each language gets a blank spaCy pipeline. A trained model can be named for person-name detection; when
it is missing the engine logs a warning and keeps the blank pipeline. Presidio's own
`SpacyNlpEngine.load` would try `spacy download` instead, which fails or hangs without a network.

Only NER reads spaCy's output here (scores are not thresholded, so Presidio's context words are not
used), so a language without a trained model is not tokenized at all: spaCy's tokenizer is quadratic
on long unbroken runs (a 60 KB URL list took 15 s), and its tokens would go unread.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import regex as re
import spacy
from presidio_analyzer.context_aware_enhancers import ContextAwareEnhancer
from presidio_analyzer.nlp_engine import NerModelConfiguration, NlpArtifacts, SpacyNlpEngine
from spacy.lang.en.stop_words import STOP_WORDS
from spacy.language import Language
from spacy.tokens import Doc, Span

from ultron.lru import Lru
from ultron.privacy.names import NAME_WORD, TECHNICAL_WORDS, add_dictionary, english_word, person_in_context

log = logging.getLogger(__name__)

LANGUAGES = ("en", "zh")
# spaCy labels that mean a person; every other label (ORG, GPE, DATE, …) carries technical meaning: kept.
PERSON_LABELS = frozenset({"PERSON", "PER"})
_NER_PIPES = frozenset({"tok2vec", "transformer", "ner", "entity_ruler", "span_ruler"})
# No name hides in 64 characters without a space; blanking such runs keeps offsets and spaCy linear.
_LONG_RUN = re.compile(r"\S{64,}")
# Texts whose entities ENTITY_MEMO keeps, and the longest it keeps.
MEMO_SIZE = 4096
MEMO_MAX_CHARS = 4000


def model_view(text: str) -> str:
    """The text a trained pipeline reads: runs of 64 non-space characters blanked, the length kept."""
    return _LONG_RUN.sub(lambda m: " " * len(m.group()), text)


@dataclass(frozen=True, slots=True)
class Found:
    """One entity a trained pipeline found, with what its readers take from spaCy's Span."""

    text: str
    label_: str
    start_char: int
    end_char: int


class EntityMemo:
    """The entities a trained pipeline found in the last MEMO_SIZE texts it read, per (model, text).

    Two readers run the same model over the same text: the redactor (people's names, on an upload's raw
    fields) and the companion's entity links (people, places, projects, on the stored fields, which are the
    raw ones wherever nothing was redacted). The second reads the first's entities here instead of running
    the model again (~5-7 ms of CPU per field). The model is deterministic, so a hit is exactly what a
    second pass would find."""

    def __init__(self, size: int = MEMO_SIZE):
        self._found: Lru[tuple[str, str], tuple[Found, ...]] = Lru(size)
        self.hits = 0  # texts read here instead of by the model (tests)

    def forget(self) -> None:
        """Empty the memo (benchmarks: each timed upload pays its own model pass)."""
        self._found.clear()

    def get(self, model: str, text: str) -> tuple[Found, ...] | None:
        found = self._found.get((model, text))
        if found is not None:
            self.hits += 1
        return found

    def put(self, model: str, text: str, ents: Iterable[spacy.tokens.Span | Found]) -> tuple[Found, ...]:
        found = tuple(Found(e.text, e.label_, e.start_char, e.end_char) for e in ents)
        if len(text) <= MEMO_MAX_CHARS:
            self._found.put((model, text), found)
        return found


ENTITY_MEMO = EntityMemo()


class OfflineSpacyNlpEngine(SpacyNlpEngine):
    """Blank `en` and `zh` pipelines, optionally one trained model (its own language) for PERSON."""

    def __init__(self, model: str | None = None):
        super().__init__(
            models=[{"lang_code": lang, "model_name": f"blank:{lang}"} for lang in LANGUAGES],
            ner_model_configuration=NerModelConfiguration(
                model_to_presidio_entity_mapping={"PERSON": "PERSON", "PER": "PERSON"}
            ),
        )
        self.model = model
        self.person_languages: frozenset[str] = frozenset()
        self.pipelines: dict[str, Language] = {}
        self._model_lock = threading.Lock()

    def load(self) -> None:  # noqa: D102
        pipelines: dict[str, Language] = {lang: spacy.blank(lang) for lang in LANGUAGES}
        if self.model:
            loaded = load_model(self.model)
            if loaded is not None:
                lang = loaded.lang if loaded.lang in LANGUAGES else "en"
                pipelines[lang] = loaded
                self.person_languages = frozenset({lang})
        self.pipelines = pipelines
        # Presidio's base class leaves `nlp` unannotated and sets it to None in __init__: mypy types it None.
        self.nlp = pipelines  # type: ignore[assignment]

    def empty_artifacts(self, language: str) -> NlpArtifacts:
        """What the recognizers get when no NER is wanted: no tokens, no entities."""
        return NlpArtifacts([], self.pipelines[language].make_doc(""), [], [], self, language, scores=[])

    def process_text(self, text, language):  # noqa: D102
        if language not in self.person_languages or not may_name_someone(text, language):
            return self.empty_artifacts(language)
        view = model_view(text)
        with self._model_lock:  # trained pipelines make no thread-safety promise
            doc = self.pipelines[language](view)
        return self._artifacts(view, doc, language)

    def process_many(self, texts: list[str], language: str, batch_size: int) -> list[NlpArtifacts]:
        """`process_text` for many texts, through spaCy's `pipe` (one model pass per batch)."""
        out = [self.empty_artifacts(language) for _ in texts]
        if language not in self.person_languages:
            return out
        todo = [i for i, text in enumerate(texts) if may_name_someone(text, language)]
        views = [model_view(texts[i]) for i in todo]
        docs: list[spacy.tokens.Doc] = []
        # The lock is taken per chunk of about LOCK_CHARS characters, not for the whole list: a big batch
        # upload then holds the model for a chunk at a time, and other requests' texts (other tenants')
        # get it between chunks instead of waiting for the whole batch (29 s seen before).
        for chunk in _chunks(views, LOCK_CHARS):
            with self._model_lock:
                docs += self.pipelines[language].pipe(chunk, batch_size=batch_size)
            time.sleep(0)  # let a waiting thread take the lock before this one takes it again
        for i, view, doc in zip(todo, views, docs, strict=True):
            out[i] = self._artifacts(view, doc, language)
        return out

    def _artifacts(self, view: str, doc: spacy.tokens.Doc, language: str) -> NlpArtifacts:
        """Presidio's artifacts of a doc; its entities kept in ENTITY_MEMO for the entity linker."""
        if self.model:
            ENTITY_MEMO.put(self.model, view, doc.ents)
        return self._doc_to_nlp_artifact(doc, language)

    def _get_entities(self, doc):  # noqa: D102
        return person_spans(doc)

    def _get_scores_for_entities(self, doc):  # noqa: D102
        return [self.ner_model_configuration.default_score] * len(self._get_entities(doc))


# Each word of a name: "Maria", "O'Brien", "Jean-Luc", an initial "J.", or a particle ("van", "de").
_NAME_WORD = re.compile(rf"^(?:{NAME_WORD}|[A-Z]\.|van|von|de|da|del|der|di|du|la|le|bin|bint|ibn|al)$")
# Capitalised words a small NER model reads as a person in logs and tool output.
NOT_NAMES = frozenset(
    "Login Succeeded Max Min Error Errors Warning Failed Fatal Exception Traceback Caused Retry Retries "
    "Hello Thanks Dear Hi Hey Note Todo Fixme Done Ready Running Pending Unknown None True False Null "
    "Docker Kubernetes Redis Postgres Nginx Python Java Rust Golang Node Linux Ubuntu Debian Grafana "
    "Prometheus Kafka Jenkins Celery Flask Django Sentry Terraform Ansible Helm Alembic Pydantic Bearer "
    "Basic Token Tel Fax Phone Email Thread Crashed Release Notes Fixed Improved Input Output "
    # Type and tool names the model took for people in human-written memories (bench-batch --corpus real).
    "Vec String Strings Rc Arc RefCell Mutex Weak Jest Jupyter Forbidden Unauthorized".split()
)
# "a Vec", "the Atlas migration": one word right after an article is not a person's name.
_ARTICLE_BEFORE = re.compile(r"(?:^|[^\w])(?:a|an|the|A|An|The)\s+$")
_BEFORE_CODE = set("._/\\=@#$<{[:-")
_AFTER_CODE = re.compile(r"^(?:[_/(=\[{<@`]|\.\w|\w|:\S)")


# A capitalised name word or an initial, wherever it stands in a text (the first alternative is _NAME_WORD's).
_NAME_CANDIDATE = re.compile(rf"{NAME_WORD}|[A-Z]\.")


def may_name_someone(text: str, language: str = "en") -> bool:
    """Whether the NER model could find a name in `text` that `plausible_name` keeps; when not, the model
    is not run. A kept span begins or ends with a capitalised name word or an initial outside NOT_NAMES
    (a span between two lowercase particles is refused), and such a word is matched here whole or inside a
    longer match that no NOT_NAMES word equals: so skipping the model changes no finding. Lowercase text
    (logs, commands, most chat between agents) then costs no model pass. Only for English: a Chinese
    pipeline's names carry no capitals."""
    if language != "en":
        return True
    return any(m.group() not in NOT_NAMES for m in _NAME_CANDIDATE.finditer(text))


def plausible_name(text: str, ent: spacy.tokens.Span | Found) -> bool:
    """A span a small NER model calls a person is kept as one only when it reads like a name in prose:
    capitalised words, not glued to code (`config.json`, `--password`, `SLACK_BOT_TOKEN`), not one word
    right after an article ("a Vec", "the Atlas migration")."""
    words = ent.text.split()
    if not words or not all(_NAME_WORD.match(w) for w in words) or all(len(w) <= 2 for w in words):
        return False
    if words[0] in NOT_NAMES or words[-1] in NOT_NAMES or (words[0].islower() and words[-1].islower()):
        return False  # "Error", "Max"; a span between two particles ("van ... de") names nobody
    if len(words) == 1 and _ARTICLE_BEFORE.search(text[max(0, ent.start_char - 8) : ent.start_char]):
        return False  # one word after an article; "a John Smith called" still names someone
    before = text[ent.start_char - 1] if ent.start_char else " "
    if before in _BEFORE_CODE or before.isalnum() or _AFTER_CODE.match(text[ent.end_char :]):
        return False
    return person_in_context(text, ent.start_char, ent.end_char, words)


def person_spans(doc: Doc) -> list[Span]:
    """The model's people that `plausible_name` keeps, after three repairs of what a small model gets
    wrong on names it rarely saw: a possessive is not part of the name ("Tuomas Laine['s]"); a given name
    unknown to it is ("[Eero] Virtanen"); and two or three name words it calls an organisation, starting
    with a word no dictionary knows, are a person ("Leocadia Ferro")."""
    out = []
    for ent in doc.ents:
        start, end, label = ent.start, ent.end, ent.label_
        if end - start > 1 and doc[end - 1].text in ("'s", "’s"):
            end -= 1
        if label in PERSON_LABELS:
            if start and doc[start - 1].whitespace_ and _unknown_name_word(doc[start - 1].text):
                start -= 1
        elif label == "ORG" and 2 <= end - start <= 3 and _unknown_name_word(doc[start].text):
            if start and doc[start - 1].lower_ in ("the", "a", "an"):
                continue  # "the Fleetwood Mac cover": a band, a brand
            label = "PERSON"
        else:
            continue
        span = Span(doc, start, end, label=label)
        if plausible_name(doc.text, span):
            out.append(span)
    return out


def _unknown_name_word(word: str) -> bool:
    """A capitalised word that is no English word, code word or product: "Eero", "Leocadia"."""
    return (
        len(word) > 2
        and word.lower() not in STOP_WORDS
        and bool(_NAME_WORD.match(word))
        and word not in NOT_NAMES
        and word not in TECHNICAL_WORDS
        and not english_word(word)
    )


def load_model(name: str) -> spacy.language.Language | None:
    """A trained pipeline (package name or path) with only what NER needs, or None if it cannot load."""
    try:
        nlp = spacy.load(name)
    except (OSError, ImportError, ValueError) as exc:
        log.warning("spaCy model %r is not available (%s); person names will not be detected", name, exc)
        return None
    if "ner" not in nlp.pipe_names and not {"entity_ruler", "span_ruler"} & set(nlp.pipe_names):
        log.warning("spaCy model %r has no NER component; person names will not be detected", name)
        return None
    add_dictionary(_lemma_index(nlp))
    nlp.select_pipes(enable=[pipe for pipe in nlp.pipe_names if pipe in _NER_PIPES])
    return nlp


def _lemma_index(nlp: Language) -> set[str]:
    """The English words the model's lemmatizer knows (WordNet lemmas, inside the model package): the
    person rules use them to tell `Important Boundaries` from `Rosalind Carver`. Empty without one."""
    if "lemmatizer" not in nlp.pipe_names:
        return set()
    lookups = getattr(nlp.get_pipe("lemmatizer"), "lookups", None)
    if lookups is None or "lemma_index" not in lookups.tables:
        return set()
    index = lookups.get_table("lemma_index")
    return {w for pos in ("noun", "verb", "adj", "adv") for w in index.get(pos, ()) if w.isalpha()}


class NoContextEnhancer(ContextAwareEnhancer):
    """Presidio raises scores when context words surround a match; nothing here thresholds scores, and the
    default enhancer walks every token for every result (quadratic on entity-dense text), so skip it."""

    def __init__(self) -> None:
        super().__init__(0, 0, 0, 0)

    def enhance_using_context(self, text, raw_results, nlp_artifacts, recognizers, context=None):  # noqa: D102
        return raw_results


# Characters of text one hold of the NER model's lock covers in a batch (about a second of CPU).
LOCK_CHARS = 8_000


def _chunks(views: list[str], budget: int) -> Iterator[list[str]]:
    """`views` in order, in runs of at most `budget` characters (a longer text alone)."""
    chunk: list[str] = []
    size = 0
    for view in views:
        if chunk and size + len(view) > budget:
            yield chunk
            chunk, size = [], 0
        chunk.append(view)
        size += len(view)
    if chunk:
        yield chunk
