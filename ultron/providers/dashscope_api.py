"""DashScope (Alibaba Cloud Model Studio) through the official `dashscope` SDK.

The base URL is passed on every call as the SDK's `base_address` argument, so each instance talks to
its own endpoint and nothing global (`dashscope.base_http_api_url`, `dashscope.api_key`) is touched.
`base_url=None` means the SDK's own default, which honours `DASHSCOPE_HTTP_BASE_URL`. A base URL
looks like `https://dashscope.aliyuncs.com/api/v1`; the SDK appends `/services/...`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from http import HTTPStatus
from typing import Any

import requests

from ultron.providers.base import EmbedKind, ProviderError, check_vectors, normalize_rows
from ultron.providers.retry import RetryPolicy

PROVIDER = "dashscope"
# text-embedding-v3/v4 take at most 10 texts per request.
EMBED_BATCH_SIZE = 10
ERROR_MESSAGE_CHARS = 200
_BAD_URL_ERRORS = (
    requests.exceptions.InvalidURL,
    requests.exceptions.MissingSchema,
    requests.exceptions.InvalidSchema,
)


def _sdk() -> Any:
    """The dashscope module, imported on first use: it takes ~0.4 s and many set-ups never call it."""
    # start-up: see the docstring
    import dashscope
    import dashscope.common.error  # noqa: F401  (for DashScopeException below)

    return dashscope


def _bad(message: str) -> ProviderError:
    return ProviderError(PROVIDER, message, kind="bad_payload")


def _call_sdk(call: Callable[[], Any]) -> Any:
    """Run one SDK call, mapping its exceptions and non-200 answers onto ProviderError."""
    try:
        response = call()
    except requests.Timeout as exc:
        raise ProviderError(PROVIDER, "request timed out", kind="timeout") from exc
    except requests.ConnectionError as exc:
        raise ProviderError(PROVIDER, f"connection failed: {type(exc).__name__}", kind="connection") from exc
    except requests.exceptions.InvalidJSONError as exc:
        raise _bad("answer is not JSON") from exc
    except _BAD_URL_ERRORS as exc:
        raise ProviderError(PROVIDER, f"bad base URL: {type(exc).__name__}", kind="unavailable") from exc
    except requests.RequestException as exc:  # e.g. a body cut off mid-stream
        raise ProviderError(PROVIDER, f"transport failed: {type(exc).__name__}", kind="connection") from exc
    except _sdk().common.error.DashScopeException as exc:  # the SDK refusing our arguments before sending
        raise ProviderError(
            PROVIDER, f"SDK rejected the call: {type(exc).__name__}", kind="unavailable"
        ) from exc
    except (
        KeyError,
        TypeError,
        ValueError,
        AttributeError,
    ) as exc:  # the SDK wrapping a wrongly shaped answer
        raise _bad(f"answer has an unexpected shape ({type(exc).__name__})") from exc
    status = getattr(response, "status_code", None)
    if status != HTTPStatus.OK:
        message = str(getattr(response, "message", ""))[:ERROR_MESSAGE_CHARS]
        code = getattr(response, "code", "")
        raise ProviderError(PROVIDER, f"answered {status} {code}: {message}", kind="http", status_code=status)
    return response


def _embeddings_from(output: Any) -> list[list[float]]:
    """`output.embeddings = [{"text_index": i, "embedding": [...]}, ...]` in text order."""
    items = output.get("embeddings") if isinstance(output, dict) else None
    if not isinstance(items, list):
        raise _bad("embedding answer has no output.embeddings list")
    try:
        ordered = sorted(items, key=lambda item: item["text_index"])
        return [item["embedding"] for item in ordered]
    except (KeyError, TypeError) as exc:
        raise _bad("embedding answer items lack text_index or embedding") from exc


def _content_from(output: Any) -> str:
    """`output.choices[0].message.content` of a result_format="message" generation."""
    try:
        content = output["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError) as exc:
        raise _bad("generation answer has no output.choices[0].message.content") from exc
    if not isinstance(content, str):
        raise _bad("generation answer content is not text")
    return content


class DashScopeEmbedder:
    """`dashscope.TextEmbedding` with `text_type` set from `kind` (v3/v4 embed queries differently)."""

    def __init__(
        self,
        api_key: str,
        model: str = "text-embedding-v4",
        dimension: int = 1024,
        base_url: str | None = None,
        *,
        timeout: float = 30.0,
        max_retries: int = 2,
        retry_base_delay: float = 0.5,
        batch_size: int = EMBED_BATCH_SIZE,
    ) -> None:
        self.model = model
        self.model_name = f"{PROVIDER}:{model}"
        self.dimension = dimension
        self._api_key = api_key
        self._base_url = base_url
        self._timeout = timeout
        self._batch_size = batch_size
        self._retry = RetryPolicy(max_retries, retry_base_delay)

    def _request(self, texts: list[str], kind: EmbedKind) -> Any:
        return _sdk().TextEmbedding.call(
            model=self.model,
            input=texts,
            api_key=self._api_key,
            text_type=kind,
            dimension=self.dimension,
            base_address=self._base_url,
            request_timeout=self._timeout,
        )

    def _embed_batch(self, texts: list[str], kind: EmbedKind) -> list[list[float]]:
        response = self._retry.run(lambda: _call_sdk(lambda: self._request(texts, kind)))
        vectors = _embeddings_from(response.output)
        return normalize_rows(check_vectors(vectors, len(texts), self.dimension, PROVIDER), PROVIDER)

    def embed(self, texts: Sequence[str], *, kind: EmbedKind = "document") -> list[list[float]]:
        texts = list(texts)
        rows: list[list[float]] = []
        for start in range(0, len(texts), self._batch_size):
            rows.extend(self._embed_batch(texts[start : start + self._batch_size], kind))
        return rows


class DashScopeChat:
    """`dashscope.Generation` (result_format="message") at temperature 0."""

    def __init__(
        self,
        api_key: str,
        model: str = "qwen3.6-flash",
        base_url: str | None = None,
        *,
        timeout: float = 60.0,
        max_retries: int = 2,
        retry_base_delay: float = 0.5,
    ) -> None:
        self.model = model
        self.model_name = f"{PROVIDER}:{model}"
        self._api_key = api_key
        self._base_url = base_url
        self._timeout = timeout
        self._retry = RetryPolicy(max_retries, retry_base_delay)

    def _request(self, messages: list[dict[str, str]], max_tokens: int | None) -> Any:
        return _sdk().Generation.call(
            model=self.model,
            messages=messages,
            api_key=self._api_key,
            result_format="message",
            temperature=0,
            max_tokens=max_tokens,
            base_address=self._base_url,
            request_timeout=self._timeout,
        )

    def chat(self, messages: list[dict[str, str]], *, max_tokens: int | None = None) -> str:
        response = self._retry.run(lambda: _call_sdk(lambda: self._request(messages, max_tokens)))
        return _content_from(response.output)
