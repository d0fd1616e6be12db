"""The local embedder's micro-batcher: concurrent requests share engine calls, each gets its own rows,
one engine call runs at a time, and an engine failure reaches every caller of that call."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from ultron.providers.local import DIMENSION, MicroBatcher


class Engine:
    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self.active = 0
        self.overlap = False

    def __call__(self, texts: list[str]) -> np.ndarray:
        self.active += 1
        self.overlap |= self.active > 1
        time.sleep(0.02)  # the engine's time, GIL released
        self.batches.append(list(texts))
        self.active -= 1
        if "boom" in texts:
            raise RuntimeError("engine failed")
        return np.array([[float(len(t))] * DIMENSION for t in texts])


def test_concurrent_requests_share_calls_and_get_their_own_rows():
    batcher, engine = MicroBatcher(max_texts=32), Engine()
    out: dict[int, np.ndarray] = {}

    def ask(n: int) -> None:
        out[n] = batcher.run(engine, ["x" * n, "y" * (n + 100)])

    threads = [threading.Thread(target=ask, args=(n,)) for n in range(1, 13)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert all(out[n][:, 0].tolist() == [n, n + 100] for n in range(1, 13))
    assert len(engine.batches) < 12 and not engine.overlap
    assert max(len(b) for b in engine.batches) <= 32


def test_a_failed_call_raises_in_each_of_its_callers_and_the_next_call_runs():
    batcher, engine = MicroBatcher(), Engine()
    with pytest.raises(RuntimeError):
        batcher.run(engine, ["boom"])
    assert batcher.run(engine, ["ok"])[0, 0] == 2.0
