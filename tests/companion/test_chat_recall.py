"""A companion chat, recalled with the offline defaults (local e5, heuristic LLM), as a new user tries it.

The chat was written for stop 21's try, after the ranking was tuned, and no setting was tuned on it. Seven
of its nine answers share no word with the question a user asks later; the bot's question turn before
each does. Stop 20's ranking put the bot's question first, flagged confident, for seven of the nine and
left four answers out of the top 3 (2 of 9 answers first); a question that only asks is now flagged low
and hands its place to its reply (docs/ranking.md)."""

from __future__ import annotations

import re

import pytest

from ultron.memory.schemas import UploadRequest
from ultron.tenancy import local_actor

CHAT = [
    "Hey, I'm back from the dentist.",
    "How did it go? Was it the wisdom tooth?",
    "Yeah, they pulled it. My jaw is killing me.",
    "Ouch. What did they give you for the pain?",
    "Ibuprofen, 600 mg every six hours.",
    "Got it. Any plans for the weekend to recover?",
    "My cousin Tomás is visiting from Valencia on Saturday.",
    "Nice! What are you two going to cook?",
    "Paella, obviously, he brings the saffron.",
    "How is the new apartment search going?",
    "I signed the lease yesterday, third floor, no elevator.",
    "Congrats! When do you move in?",
    "The first of March.",
    "Are you still doing the morning runs?",
    "Only twice a week now, my knee complains.",
    "Which book are you reading at the moment?",
    "The Left Hand of Darkness, halfway through.",
    "What's the name of your new manager again?",
    "Priya, she started on Monday.",
    "Anyway, I should sleep, early call tomorrow.",
]
# (question, the turn that answers it: its position)
QUESTIONS = [
    ("What painkiller did the dentist give me?", 5),
    ("Who is visiting me from Valencia?", 7),
    ("What are we cooking when my cousin visits?", 9),
    ("Which floor is my new apartment on?", 11),
    ("When am I moving in?", 13),
    ("How often do I run these days?", 15),
    ("What book am I reading?", 17),
    ("What's my new manager called?", 19),
    ("Which tooth did they pull?", 3),
]


@pytest.fixture()
def local_hub(make_hub):  # type: ignore[no-untyped-def]
    return make_hub(embedding_provider="local")


def test_a_chat_is_recalled_by_its_answers_not_by_the_bots_questions(local_hub):
    hub = local_hub
    with hub.db.session() as s:
        actor = local_actor(s)
        position = {}
        for i, turn in enumerate(CHAT, start=1):
            req = UploadRequest(content=turn, thread="chat-nu", position=i, scope="private")
            position[hub.memory.upload(s, actor, req).record.id] = i
    assert len(position) == len(CHAT)  # every turn kept
    first, ranks = 0, {}
    for question, answer in QUESTIONS:
        with hub.db.session() as s:
            results = hub.memory.search(s, actor, question, limit=3)
        got = [position[r.record.id] for r in results]
        ranks[question] = got
        first += bool(got) and got[0] == answer
        assert answer in got, (question, got)
        # a turn that only asks is never a confident result
        for r in results:
            if re.search(r"[?？]\s*$", CHAT[position[r.record.id] - 1]):
                assert r.confidence == "low", (question, got)
    assert first >= 7, ranks  # measured 8 of 9 (stop 20's ranking: 2)
