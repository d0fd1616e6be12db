"""OpenAI-compatible and DashScope providers against fake servers speaking their wire formats."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from tests.fakes.servers import DEFAULT_OPENAI_DIMENSION, FAKE_API_KEY, FakeModelServer, fake_vector
from tests.providers.conftest import TEST_DIMENSION, Remote
from ultron.providers.base import ProviderError
from ultron.providers.dashscope_api import DashScopeEmbedder
from ultron.providers.openai_compat import OpenAIEmbedder

TEXTS = ["pip install fails inside Docker", "用代理解决容器内无网络", "third text"]
# Two attempts of a 0.2 s timeout plus backoff, with generous slack for a loaded CI machine.
TIMEOUT_BOUND_S = 2.0


def _normalized(vector: list[float]) -> np.ndarray:
    array = np.asarray(vector)
    return array / np.linalg.norm(array)


# --- embeddings ---------------------------------------------------------------------------------------


def test_embed_returns_normalized_vectors_in_input_order(remote: Remote) -> None:
    vectors = remote.embedder().embed(TEXTS)

    assert len(vectors) == len(TEXTS)
    for text, vector in zip(TEXTS, vectors, strict=True):
        assert len(vector) == TEST_DIMENSION
        assert np.linalg.norm(vector) == pytest.approx(1.0, abs=1e-5)
        # The fake answers in reverse order; the client must restore the input order.
        assert np.allclose(vector, _normalized(fake_vector(text, TEST_DIMENSION)), atol=1e-5)


def test_embed_sends_model_texts_and_dimension(remote: Remote) -> None:
    remote.embedder().embed(TEXTS, kind="query")

    (request,) = remote.server.requests_to(remote.embed_path)
    body = request.json
    if remote.name == "openai":
        assert body == {"model": "text-embedding-3-small", "input": TEXTS, "dimensions": TEST_DIMENSION}
    else:
        assert body["model"] == "text-embedding-v4"
        assert body["input"] == {"texts": TEXTS}
        assert body["parameters"]["dimension"] == TEST_DIMENSION
        assert body["parameters"]["text_type"] == "query"


def test_api_key_travels_in_the_header_only(remote: Remote) -> None:
    remote.embedder().embed(TEXTS)
    remote.chat().chat([{"role": "user", "content": "hi"}])

    assert len(remote.server.requests) == 2
    for request in remote.server.requests:
        assert request.headers["Authorization"] == f"Bearer {FAKE_API_KEY}"
        assert FAKE_API_KEY not in request.body


def test_embed_splits_large_inputs_into_batches(remote: Remote) -> None:
    batch = 64 if remote.name == "openai" else 10
    texts = [f"text number {i}" for i in range(batch * 2 + 1)]

    vectors = remote.embedder().embed(texts)

    assert len(vectors) == len(texts)
    sizes = [
        len(r.json["input"] if remote.name == "openai" else r.json["input"]["texts"])
        for r in remote.server.requests
    ]
    assert sizes == [batch, batch, 1]
    assert np.allclose(vectors[-1], _normalized(fake_vector(texts[-1], TEST_DIMENSION)), atol=1e-5)


def test_embed_of_nothing_sends_nothing(remote: Remote) -> None:
    assert remote.embedder().embed([]) == []
    assert remote.server.requests == []


def test_embed_timeout_raises_after_retries_in_bounded_time(remote: Remote) -> None:
    remote.server.mode = "slow"
    embedder = remote.embedder(timeout=0.2, max_retries=1)

    started = time.monotonic()
    with pytest.raises(ProviderError) as caught:
        embedder.embed(TEXTS)

    assert time.monotonic() - started < TIMEOUT_BOUND_S
    assert caught.value.is_timeout and caught.value.provider == remote.name
    assert len(remote.server.requests) == 2


def test_embed_500_is_retried_then_raised(remote: Remote) -> None:
    remote.server.mode = "500"

    with pytest.raises(ProviderError) as caught:
        remote.embedder(max_retries=2).embed(TEXTS)

    assert caught.value.kind == "http" and caught.value.status_code == 500
    assert len(remote.server.requests) == 3


def test_embed_400_is_not_retried(remote: Remote) -> None:
    remote.server.mode = "400"

    with pytest.raises(ProviderError) as caught:
        remote.embedder(max_retries=2).embed(TEXTS)

    assert caught.value.status_code == 400 and not caught.value.retryable
    assert len(remote.server.requests) == 1


@pytest.mark.parametrize("mode", ["garbage", "wrong_shape"])
def test_embed_bad_payload_raises_without_retry(remote: Remote, mode: str) -> None:
    remote.server.mode = mode

    with pytest.raises(ProviderError) as caught:
        remote.embedder(max_retries=2).embed(TEXTS)

    assert caught.value.kind == "bad_payload"
    assert len(remote.server.requests) == 1


def test_embed_429_then_ok_succeeds(remote: Remote) -> None:
    remote.server.mode = "429 then ok"

    vectors = remote.embedder(max_retries=2).embed(TEXTS)

    assert len(vectors) == len(TEXTS)
    assert len(remote.server.requests) == 2


def test_embed_rejects_a_dimension_other_than_configured(remote: Remote) -> None:
    remote.server.embedding_dim = TEST_DIMENSION + 1

    with pytest.raises(ProviderError, match="dimension"):
        remote.embedder().embed(TEXTS)


def test_embed_is_safe_across_threads(remote: Remote) -> None:
    embedder = remote.embedder()
    texts = [f"concurrent text {i}" for i in range(16)]

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda t: embedder.embed([t])[0], texts))

    for text, vector in zip(texts, results, strict=True):
        assert np.allclose(vector, _normalized(fake_vector(text, TEST_DIMENSION)), atol=1e-5)


# --- chat ---------------------------------------------------------------------------------------------

MESSAGES = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello"}]


def test_chat_returns_the_reply_and_sends_temperature_zero(remote: Remote) -> None:
    remote.server.chat_reply = "你好, world"

    assert remote.chat().chat(MESSAGES, max_tokens=32) == "你好, world"

    (request,) = remote.server.requests_to(remote.chat_path)
    body = request.json
    if remote.name == "openai":
        assert body == {"model": "fake-chat-model", "messages": MESSAGES, "temperature": 0, "max_tokens": 32}
    else:
        assert body["model"] == "fake-chat-model"
        assert body["input"]["messages"] == MESSAGES
        assert body["parameters"]["result_format"] == "message"
        assert body["parameters"]["temperature"] == 0
        assert body["parameters"]["max_tokens"] == 32


def test_chat_timeout_raises_after_retries_in_bounded_time(remote: Remote) -> None:
    remote.server.mode = "slow"
    chat = remote.chat(timeout=0.2, max_retries=1)

    started = time.monotonic()
    with pytest.raises(ProviderError) as caught:
        chat.chat(MESSAGES)

    assert time.monotonic() - started < TIMEOUT_BOUND_S
    assert caught.value.is_timeout
    assert len(remote.server.requests) == 2


def test_chat_500_is_retried_then_raised(remote: Remote) -> None:
    remote.server.mode = "500"

    with pytest.raises(ProviderError) as caught:
        remote.chat(max_retries=2).chat(MESSAGES)

    assert caught.value.status_code == 500
    assert len(remote.server.requests) == 3


@pytest.mark.parametrize("mode", ["garbage", "wrong_shape"])
def test_chat_bad_payload_raises_without_retry(remote: Remote, mode: str) -> None:
    remote.server.mode = mode

    with pytest.raises(ProviderError) as caught:
        remote.chat(max_retries=2).chat(MESSAGES)

    assert caught.value.kind == "bad_payload"
    assert len(remote.server.requests) == 1


def test_chat_429_then_ok_succeeds(remote: Remote) -> None:
    remote.server.mode = "429 then ok"
    remote.server.chat_reply = "finally"

    assert remote.chat(max_retries=2).chat(MESSAGES) == "finally"
    assert len(remote.server.requests) == 2


def test_unreachable_server_is_a_connection_error(remote: Remote) -> None:
    remote.server.stop()

    with pytest.raises(ProviderError) as caught:
        remote.chat(timeout=0.5, max_retries=0).chat(MESSAGES)

    assert caught.value.kind in ("connection", "timeout") and caught.value.retryable


# --- provider specifics -------------------------------------------------------------------------------


def test_openai_embedder_without_dimension_learns_it(fake_openai: FakeModelServer) -> None:
    embedder = OpenAIEmbedder(fake_openai.base_url, FAKE_API_KEY, "m", retry_base_delay=0.01)

    assert embedder.dimension == DEFAULT_OPENAI_DIMENSION  # one probe request
    assert "dimensions" not in fake_openai.requests[0].json
    fake_openai.embedding_dim = DEFAULT_OPENAI_DIMENSION + 1
    with pytest.raises(ProviderError, match="dimension"):
        embedder.embed(["now the server changed its mind"])


def test_dashscope_base_url_is_per_instance_and_never_global(fake_dashscope: FakeModelServer) -> None:
    import dashscope

    global_url = dashscope.base_http_api_url
    with FakeModelServer("dashscope") as other:
        first = DashScopeEmbedder(FAKE_API_KEY, dimension=4, base_url=fake_dashscope.base_url)
        second = DashScopeEmbedder(FAKE_API_KEY, dimension=4, base_url=other.base_url)
        with ThreadPoolExecutor(max_workers=4) as pool:
            list(pool.map(lambda e: e.embed(["x"]), [first, second] * 4))
        assert len(fake_dashscope.requests) == len(other.requests) == 4
    assert dashscope.base_http_api_url == global_url
