"""Any OpenAI-compatible endpoint (`/embeddings`, `/chat/completions`) over plain httpx."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import httpx

from ultron.providers.base import (
    EmbedKind,
    ProviderError,
    check_vectors,
    normalize_rows,
    retry_after_seconds,
)
from ultron.providers.retry import RetryPolicy

PROVIDER = "openai"
DEFAULT_BASE_URL = "https://api.openai.com/v1"
# Well under the API's 2048-input cap, so one slow batch holds back few texts.
EMBED_BATCH_SIZE = 64
# Characters of an error body kept in a ProviderError: enough to read the reason, not a whole page.
ERROR_BODY_CHARS = 200


class _JsonClient:
    """POSTs JSON and maps every failure onto ProviderError. httpx.Client is safe to share across threads."""

    def __init__(self, base_url: str, api_key: str, timeout: float) -> None:
        self._base_url = base_url.rstrip("/")
        self._client = httpx.Client(
            timeout=httpx.Timeout(timeout),
            headers={"Authorization": f"Bearer {api_key}"},
        )

    def post(self, path: str, payload: dict[str, Any]) -> Any:
        try:
            response = self._client.post(f"{self._base_url}{path}", json=payload)
        except httpx.TimeoutException as exc:
            raise ProviderError(PROVIDER, f"{path} timed out", kind="timeout") from exc
        except httpx.TransportError as exc:
            raise ProviderError(
                PROVIDER, f"{path} connection failed: {type(exc).__name__}", kind="connection"
            ) from exc
        if response.status_code >= 400:
            detail = response.text[:ERROR_BODY_CHARS]
            raise ProviderError(
                PROVIDER,
                f"{path} answered {response.status_code}: {detail}",
                kind="http",
                status_code=response.status_code,
                retry_after=retry_after_seconds(response.headers.get("retry-after")),
            )
        try:
            return response.json()
        except ValueError as exc:
            raise ProviderError(
                PROVIDER, f"{path} answered with a body that is not JSON", kind="bad_payload"
            ) from exc

    def close(self) -> None:
        self._client.close()


def _bad(message: str) -> ProviderError:
    return ProviderError(PROVIDER, message, kind="bad_payload")


def _embeddings_from(body: Any) -> list[list[float]]:
    """`{"data": [{"embedding": [...], "index": i}, ...]}` in index order."""
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        raise _bad("/embeddings answer has no data list")
    try:
        ordered = sorted(data, key=lambda item: item["index"])
        return [item["embedding"] for item in ordered]
    except (KeyError, TypeError) as exc:
        raise _bad("/embeddings answer items lack index or embedding") from exc


def _content_from(body: Any) -> str:
    """`choices[0].message.content` of a chat completion."""
    try:
        content = body["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError) as exc:
        raise _bad("/chat/completions answer has no choices[0].message.content") from exc
    if not isinstance(content, str):
        raise _bad("/chat/completions answer content is not text")
    return content


class OpenAIEmbedder:
    """Embeddings from `{base_url}/embeddings`.

    With `dimension` set it is sent as `dimensions` (text-embedding-3 and most compatible servers
    honour it) and every answer is checked against it. Without it the first answer fixes the dimension;
    reading `.dimension` before any call costs one probe request.
    """

    def __init__(
        self,
        base_url: str = DEFAULT_BASE_URL,
        api_key: str = "",
        model: str = "text-embedding-3-small",
        dimension: int | None = None,
        *,
        timeout: float = 30.0,
        max_retries: int = 2,
        retry_base_delay: float = 0.5,
        batch_size: int = EMBED_BATCH_SIZE,
    ) -> None:
        self.model = model
        self.model_name = f"{PROVIDER}:{model}"
        self._requested_dimension = dimension
        self._dimension = dimension
        self._dimension_lock = threading.Lock()
        self._batch_size = batch_size
        self._retry = RetryPolicy(max_retries, retry_base_delay)
        self._http = _JsonClient(base_url, api_key, timeout)

    @property
    def dimension(self) -> int:
        if self._dimension is None:
            self.embed(["dimension probe"])
        assert self._dimension is not None
        return self._dimension

    def _learn_dimension(self, matrix_width: int) -> None:
        """Fix the dimension from the first answer; later answers must agree."""
        with self._dimension_lock:
            if self._dimension is None:
                self._dimension = matrix_width
        if matrix_width != self._dimension:
            raise _bad(f"returned dimension {matrix_width}, expected {self._dimension}")

    def _embed_batch(self, texts: list[str]) -> list[list[float]]:
        payload: dict[str, Any] = {"model": self.model, "input": texts}
        if self._requested_dimension is not None:
            payload["dimensions"] = self._requested_dimension
        body = self._retry.run(lambda: self._http.post("/embeddings", payload))
        matrix = check_vectors(_embeddings_from(body), len(texts), self._dimension, PROVIDER)
        self._learn_dimension(matrix.shape[1])
        return normalize_rows(matrix, PROVIDER)

    def embed(self, texts: Sequence[str], *, kind: EmbedKind = "document") -> list[list[float]]:
        """The OpenAI API has no query/document distinction; `kind` is accepted and ignored."""
        texts = list(texts)
        rows: list[list[float]] = []
        for start in range(0, len(texts), self._batch_size):
            rows.extend(self._embed_batch(texts[start : start + self._batch_size]))
        return rows

    def close(self) -> None:
        self._http.close()


class OpenAIChat:
    """Chat completions from `{base_url}/chat/completions` at temperature 0."""

    def __init__(
        self,
        base_url: str = DEFAULT_BASE_URL,
        api_key: str = "",
        model: str = "gpt-4o-mini",
        *,
        timeout: float = 60.0,
        max_retries: int = 2,
        retry_base_delay: float = 0.5,
    ) -> None:
        self.model = model
        self.model_name = f"{PROVIDER}:{model}"
        self._retry = RetryPolicy(max_retries, retry_base_delay)
        self._http = _JsonClient(base_url, api_key, timeout)

    def chat(self, messages: list[dict[str, str]], *, max_tokens: int | None = None) -> str:
        payload: dict[str, Any] = {"model": self.model, "messages": messages, "temperature": 0}
        if max_tokens is not None:
            payload["max_tokens"] = max_tokens
        body = self._retry.run(lambda: self._http.post("/chat/completions", payload))
        return _content_from(body)

    def close(self) -> None:
        self._http.close()
