"""Batch upload's shared parts: items checked one by one (a bad item is refused, not the batch), and the
per-item results in the batch's order. Used by the route, both SDK backends and the CLI."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from ultron import validation
from ultron.errors import UltronError, ValidationFailed
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
