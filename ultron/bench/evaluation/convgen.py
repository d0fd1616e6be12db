"""Builds the conversational development set (data/conversations.jsonl) from the hand-written scripts.

Each script (data/conversations_*.txt) is one long chat between two people over several dated sessions:

    # conv <id> <lang> <speaker A> <speaker B>
    == 2026-01-10 19:00                      a new session and when it started
    Maya: some text [label]                  a turn; the optional [label] names it for later questions
    ?single <question>                       a question answered by the turn just above
    ?multi <question> @label ...             answered by the turn above together with the labelled turns
    ?temporal <question> [@label ...]        a "when" question or one naming a date
    ?none <question>                         a question whose answer is nowhere in the conversation

Real chats also hold greetings, thanks and goodbyes that answer nothing: the builder adds a few of them
to every session (deterministically, from the pools below), so the store has the small talk a real
import has. Turns are one minute apart within a session. Run `python -m ultron.bench.evaluation.convgen` to
rebuild the JSONL after editing a script; the JSONL is committed and is what `ultron eval retrieval` reads.
"""

from __future__ import annotations

import json
import random
import re
from datetime import datetime, timedelta
from pathlib import Path

DATA = Path(__file__).parent / "data"
OUT = DATA / "conversations.jsonl"

_OPENERS = {
    "en": [
        "Hey, got a minute?",
        "Hi! Are you around tonight?",
        "Morning! Quick catch-up?",
        "Hello hello, finally a free evening.",
        "Hey you, it's been a busy week.",
        "Are you free to chat for a bit?",
        "Hi there, how was your day?",
        "Evening! I just got home.",
        "Hey, sorry for the slow reply last time.",
    ],
    "zh": [
        "在吗？",
        "晚上好呀！",
        "好久没聊了，最近怎么样？",
        "今天终于闲下来了。",
        "嗨，刚下班。",
        "你现在方便聊天吗？",
        "早啊！",
        "上次回复慢了，不好意思。",
        "周末愉快！",
    ],
}
_REPLIES = {
    "en": [
        "Yes, always for you.",
        "Sure, I'm on the sofa doing nothing.",
        "Of course, what's up?",
        "Perfect timing, I just finished dinner.",
        "Ha, same here.",
        "Go ahead, I'm listening.",
        "I'm here, tell me everything.",
        "Yep, just made some tea.",
        "All good, life has been hectic.",
    ],
    "zh": [
        "在的在的。",
        "方便，刚吃完饭。",
        "好呀，你说。",
        "我也刚忙完。",
        "哈哈，我也是。",
        "怎么了？",
        "随时都在。",
        "刚泡了杯茶，聊吧。",
        "没事，最近大家都忙。",
    ],
}
_CLOSERS = {
    "en": [
        "Okay, I have to run. Talk soon!",
        "Good night, sleep well.",
        "Let's catch up again in a couple of weeks.",
        "Gotta go, my battery is dying.",
        "Thanks for listening, really.",
        "Speak soon, take care.",
        "Right, dinner is ready. Bye!",
        "Love these chats. Later!",
        "I'll let you go. Have a good week.",
    ],
    "zh": [
        "好啦，我先去忙了，回头聊。",
        "晚安，早点睡。",
        "过两周再聊！",
        "手机快没电了，先这样。",
        "谢谢你听我唠叨。",
        "保重，有空再聊。",
        "饭好了，我先撤了。",
        "跟你聊天真开心，回见！",
        "不打扰你了，周末愉快。",
    ],
}
_BYES = {
    "en": [
        "Bye!",
        "Take care!",
        "Talk soon.",
        "Night!",
        "See you.",
        "Cheers!",
        "Later!",
        "Sure, bye.",
        "You too!",
    ],
    "zh": [
        "拜拜！",
        "回头见。",
        "晚安！",
        "好的，再见。",
        "保重！",
        "下次聊。",
        "嗯嗯，拜。",
        "你也是！",
        "好嘞。",
    ],
}

_HEADER = re.compile(r"^# conv (\S+) (\S+) (\S+) (\S+)$")
_SESSION = re.compile(r"^== (\d{4}-\d{2}-\d{2} \d{2}:\d{2})$")
_TURN = re.compile(r"^([^:：\s?=#][^:：]{0,20})[:：] (.+?)(?: \[(\w+)\])?$")
_QUESTION = re.compile(r"^\?(single|multi|temporal|none) (.+?)((?: @\w+)*)$")


def parse(path: Path) -> tuple[list[dict], list[dict]]:
    turns: list[dict] = []
    questions: list[dict] = []
    conv = lang = ""
    speakers: tuple[str, str] = ("", "")
    labels: dict[str, str] = {}
    pending: list[tuple[str, str, list[str], str | None]] = []
    session = 0
    start = datetime.min
    minute = 0
    rng = random.Random(path.name)
    pools: dict[str, list[str]] = {}

    def add_turn(speaker: str, text: str) -> str:
        nonlocal minute
        turn_id = f"{conv}-s{session}-t{len([t for t in turns if t['session'] == session]) + 1}"
        turns.append(
            {
                "kind": "turn",
                "id": turn_id,
                "conv": conv,
                "lang": lang,
                "session": session,
                "position": len(turns) + 1,
                "speaker": speaker,
                "text": text,
                "occurred_at": (start + timedelta(minutes=minute)).isoformat() + "Z",
            }
        )
        minute += 1
        return turn_id

    def small_talk(kind: str, speaker: str) -> None:
        add_turn(speaker, pools[kind].pop())

    def close_session() -> None:
        if session:
            small_talk("closers", speakers[session % 2])
            small_talk("byes", speakers[(session + 1) % 2])

    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        if m := _HEADER.match(line):
            conv, lang = m.group(1), m.group(2)
            speakers = (m.group(3), m.group(4))
            pools = {
                name: rng.sample(pool[lang], len(pool[lang]))
                for name, pool in (
                    ("openers", _OPENERS),
                    ("replies", _REPLIES),
                    ("closers", _CLOSERS),
                    ("byes", _BYES),
                )
            }
            continue
        if line.startswith("#"):
            continue
        if m := _SESSION.match(line):
            close_session()
            session += 1
            start, minute = datetime.fromisoformat(m.group(1)), 0
            opener = speakers[session % 2]
            small_talk("openers", opener)
            small_talk("replies", speakers[(session + 1) % 2])
            continue
        if m := _QUESTION.match(line):
            refs = m.group(3).split()
            category = m.group(1)
            anchor = turns[-1]["id"] if turns and category in ("single", "multi") or (not refs) else None
            if category == "none":
                anchor = None
            pending.append((category, m.group(2), [r.lstrip("@") for r in refs], anchor))
            continue
        if m := _TURN.match(line):
            turn_id = add_turn(m.group(1), m.group(2))
            if m.group(3):
                labels[m.group(3)] = turn_id
            continue
        raise ValueError(f"{path}:{number}: cannot parse {raw!r}")
    close_session()
    for n, (category, text, refs, anchor) in enumerate(pending, 1):
        evidence = ([anchor] if anchor else []) + [labels[r] for r in refs]
        if category != "none" and not evidence:
            raise ValueError(f"{path}: question {text!r} has no evidence")
        questions.append(
            {
                "kind": "question",
                "id": f"{conv}-q{n}",
                "conv": conv,
                "lang": lang,
                "category": "no-answer"
                if category == "none"
                else category + ("-hop" if category != "temporal" else ""),
                "question": text,
                "evidence": list(dict.fromkeys(evidence)),
            }
        )
    return turns, questions


def build() -> list[dict]:
    rows: list[dict] = []
    for path in sorted(DATA.glob("conversations_*.txt")):
        turns, questions = parse(path)
        rows.extend(turns)
        rows.extend(questions)
    return rows


def main() -> None:
    rows = build()
    OUT.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    turns = sum(r["kind"] == "turn" for r in rows)
    questions = [r for r in rows if r["kind"] == "question"]
    kinds: dict[str, int] = {}
    for q in questions:
        kinds[q["category"]] = kinds.get(q["category"], 0) + 1
    print(f"{OUT.name}: {turns} turns, {len(questions)} questions {kinds}")


if __name__ == "__main__":
    main()
