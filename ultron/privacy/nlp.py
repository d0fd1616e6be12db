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
import re
import threading

import spacy
from presidio_analyzer.context_aware_enhancers import ContextAwareEnhancer
from presidio_analyzer.nlp_engine import NerModelConfiguration, NlpArtifacts, SpacyNlpEngine

log = logging.getLogger(__name__)

LANGUAGES = ("en", "zh")
# spaCy labels that mean a person; every other label (ORG, GPE, DATE, …) carries technical meaning: kept.
PERSON_LABELS = frozenset({"PERSON", "PER"})
_NER_PIPES = frozenset({"tok2vec", "transformer", "ner", "entity_ruler", "span_ruler"})
# No name hides in 64 characters without a space; blanking such runs keeps offsets and spaCy linear.
_LONG_RUN = re.compile(r"\S{64,}")


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
        self._model_lock = threading.Lock()

    def load(self) -> None:  # noqa: D102
        self.nlp = {lang: spacy.blank(lang) for lang in LANGUAGES}
        if self.model:
            loaded = load_model(self.model)
            if loaded is not None:
                lang = loaded.lang if loaded.lang in LANGUAGES else "en"
                self.nlp[lang] = loaded
                self.person_languages = frozenset({lang})

    def process_text(self, text, language):  # noqa: D102
        if language not in self.person_languages:
            return NlpArtifacts([], self.nlp[language].make_doc(""), [], [], self, language, scores=[])
        view = _LONG_RUN.sub(lambda m: " " * len(m.group()), text)
        with self._model_lock:  # trained pipelines make no thread-safety promise
            return super().process_text(view, language)

    def _get_entities(self, doc):  # noqa: D102
        return [ent for ent in doc.ents if ent.label_ in PERSON_LABELS]

    def _get_scores_for_entities(self, doc):  # noqa: D102
        return [self.ner_model_configuration.default_score] * len(self._get_entities(doc))


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
    nlp.select_pipes(enable=[pipe for pipe in nlp.pipe_names if pipe in _NER_PIPES])
    return nlp


class NoContextEnhancer(ContextAwareEnhancer):
    """Presidio raises scores when context words surround a match; nothing here thresholds scores, and the
    default enhancer walks every token for every result (quadratic on entity-dense text), so skip it."""

    def __init__(self) -> None:
        super().__init__(0, 0, 0, 0)

    def enhance_using_context(self, text, raw_results, nlp_artifacts, recognizers, context=None):  # noqa: D102
        return raw_results
