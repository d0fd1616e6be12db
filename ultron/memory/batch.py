"""Batch upload's shared parts: items checked one by one (a bad item is refused, not the batch), and the
per-item results in the batch's order. Used by the route, both SDK backends and the CLI."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from ultron import validation
from ultron.errors import PayloadTooLarge, UltronError, ValidationFailed
from ultron.memory.schemas import (
    MAX_BATCH_ITEMS,
    BatchItemResult,
    UploadBatchResult,
    UploadRequest,
    UploadResult,
)


def _reason(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or 'item'}: {e['msg']}" for e in exc.errors(include_url=False)
    )


def check_items(items: Sequence[UploadRequest | Mapping[str, Any]]) -> list[UploadRequest | UltronError]:
    """Each item as a single upload would be checked, or the error that refuses it."""
    if not items:
        raise ValidationFailed("a batch needs at least one item")
    if len(items) > MAX_BATCH_ITEMS:
        raise ValidationFailed(f"a batch holds at most {MAX_BATCH_ITEMS} items, not {len(items)}")
    out: list[UploadRequest | UltronError] = []
    for item in items:
        try:
            if not isinstance(item, UploadRequest):
                if not isinstance(item, Mapping):
                    raise ValidationFailed("an item must be an object with the fields of an upload")
                validation.check_all(dict(item))
                item = UploadRequest.model_validate(dict(item))
            out.append(item)
        except ValidationError as exc:
            out.append(ValidationFailed(_reason(exc)))
        except UltronError as exc:
            out.append(exc)
    return out


def check_batch_cost(items: Sequence[UploadRequest | UltronError], max_chars: int) -> None:
    """A batch's texts all go through redaction and NER before anything is stored, in one request: their
    total is capped (413 beyond it) so that one request cannot hold a worker thread, and the NER model,
    for minutes."""
    total = sum(
        len(r.content) + len(r.context) + len(r.resolution) + sum(map(len, r.tags))
        for r in items
        if isinstance(r, UploadRequest)
    )
    if total > max_chars:
        raise PayloadTooLarge(
            f"the batch holds {total} characters of text; the limit per request is {max_chars} "
            "(ULTRON_MAX_BATCH_CHARS): send it in smaller batches"
        )


def summarize(results: Iterable[UploadResult | UltronError]) -> UploadBatchResult:
    """The compact per-item results of a batch (ids and decisions; full records are a GET away)."""
    rows: list[BatchItemResult] = []
    for index, result in enumerate(results):
        if isinstance(result, UploadResult):
            rows.append(
                BatchItemResult(
                    index=index,
                    decision=result.decision,
                    memory_id=result.record.id,
                    memory_type=result.record.memory_type,
                    similarity=result.similarity,
                    merged_text=result.merged_text,
                )
            )
        else:
            rows.append(BatchItemResult(index=index, decision="refused", reason=result.detail))
    return UploadBatchResult(
        created=sum(r.decision == "created" for r in rows),
        merged=sum(r.decision in ("merged", "merged_judge") for r in rows),
        refused=sum(r.decision == "refused" for r in rows),
        results=rows,
    )
