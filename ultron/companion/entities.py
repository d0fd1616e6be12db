"""People, places and projects a memory names, found offline: spaCy NER for English (the redactor's
model, `en_core_web_sm`), jieba's tags for Chinese (`nr` person, `ns` place, `nt`/`nz` organisation or
other proper noun). Stored per memory (`memory_entities`), they give recall an entity signal and the
Markdown vault a page per entity.

Entities are read from the stored, redacted text: a name redacted in a shared memory is `<PERSON>` and
links nothing; private memories keep names (docs/privacy.md), so a companion's people are linked there.
Where the redactor ran the same model over the same text (a field nothing was redacted from), its
entities are read from `ENTITY_MEMO` instead of running the model a second time.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterable
from typing import Any

from ultron.privacy.nlp import ENTITY_MEMO, MEMO_MAX_CHARS, Found, load_model, model_view, plausible_name
from ultron.privacy.personal import ChineseNameRecognizer, chinese_name
from ultron.privacy.policy import DEFAULT_SPACY_MODEL

log = logging.getLogger(__name__)

KINDS = ("person", "place", "project")
_EN_LABELS = {
    "PERSON": "person",
    "GPE": "place",
    "LOC": "place",
    "FAC": "place",
    "ORG": "project",
    "PRODUCT": "project",
    "WORK_OF_ART": "project",
}
_ZH_FLAGS = {"nr": "person", "nrfg": "person", "ns": "place", "nt": "project", "nz": "project"}
_CJK = re.compile(r"[\u4e00-\u9fff]")
_CAPITALISED = re.compile(r"[A-Z][a-z]")  # English text the model could find an entity in
PIPE_BATCH = 64
MAX_CHARS = 20_000
_lock = threading.Lock()
_nlp: Any = None
_loaded = False


def _english() -> Any:
    global _nlp, _loaded
    with _lock:
        if not _loaded:
            _nlp = load_model(DEFAULT_SPACY_MODEL)
            _loaded = True
    return _nlp


def _clean(name: str) -> str:
    return " ".join(name.split()).strip(" .,;:'\"()[]")


def _entities(view: str) -> tuple[Found, ...]:
    """The English model's entities in `view` (a `model_view`): the redactor's, when it read this text."""
    found = ENTITY_MEMO.get(DEFAULT_SPACY_MODEL, view)
    if found is None:
        nlp = _english()
        with _lock:  # spaCy pipelines make no thread-safety promise
            doc = nlp(view)
        found = ENTITY_MEMO.put(DEFAULT_SPACY_MODEL, view, doc.ents)
    return found


def warm(texts: Iterable[str]) -> None:
    """Run the English model over the texts `extract` will read next and the memo lacks, in `pipe` batches
    (a batch's new memories: one pass for them all rather than one call per field)."""
    views = [
        model_view(t[:MAX_CHARS]) for t in dict.fromkeys(texts) if t and _CAPITALISED.search(t[:MAX_CHARS])
    ]
    # A text past the memo's bound would be read again by `extract`: left to it.
    todo = [v for v in views if len(v) <= MEMO_MAX_CHARS and ENTITY_MEMO.get(DEFAULT_SPACY_MODEL, v) is None]
    nlp = _english() if todo else None
    if nlp is None:
        return
    with _lock:
        docs = list(nlp.pipe(todo, batch_size=PIPE_BATCH))
    for view, doc in zip(todo, docs, strict=True):
        ENTITY_MEMO.put(DEFAULT_SPACY_MODEL, view, doc.ents)


def extract(text: str) -> set[tuple[str, str]]:
    """(kind, name) pairs named in the text."""
    text = text[:MAX_CHARS]
    found: set[tuple[str, str]] = set()
    if _CAPITALISED.search(text) and _english() is not None:
        view = model_view(text)
        for ent in _entities(view):
            kind = _EN_LABELS.get(ent.label_)
            if kind is None or "<" in ent.text or not re.match(r"[A-Z]", ent.text):
                continue
            if kind == "person" and not plausible_name(view, ent):
                continue
            name = _clean(ent.text)
            if 2 <= len(name) <= 80:
                found.add((kind, name))
    if _CJK.search(text):
        for word, flag in ChineseNameRecognizer.tagged(text):
            kind = _ZH_FLAGS.get(flag)
            if kind is None or not 2 <= len(word) <= 12 or not _CJK.search(word):
                continue
            if kind == "person" and not chinese_name(word, ""):
                continue
            found.add((kind, word))
    return found
