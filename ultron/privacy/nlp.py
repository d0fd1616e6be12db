"""The spaCy engine Presidio runs on, built from what PyPI ships so it works offline.

Each language gets a blank spaCy pipeline (tokenizer only). A trained model can be named for person-name
detection; when it is missing the engine logs a warning and keeps the blank pipeline. Presidio's own
`SpacyNlpEngine.load` would try `spacy download` instead, which fails or hangs without a network.
"""

from __future__ import annotations

import logging
import threading

import spacy
from presidio_analyzer.nlp_engine import NerModelConfiguration, SpacyNlpEngine

log = logging.getLogger(__name__)

LANGUAGES = ("en", "zh")
# spaCy labels that mean a person; every other label (ORG, GPE, DATE, …) carries technical meaning: kept.
PERSON_LABELS = frozenset({"PERSON", "PER"})
_NER_PIPES = frozenset({"tok2vec", "transformer", "ner", "entity_ruler", "span_ruler"})


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
            return super().process_text(text, language)  # a tokenizer only: safe to share
        with self._model_lock:  # trained pipelines make no thread-safety promise
            return super().process_text(text, language)

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
