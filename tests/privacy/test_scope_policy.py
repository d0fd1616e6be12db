"""Names and addresses are redacted where memories are shared and kept where they are the agent's own;
a tenant's policy (tenants.settings -> 'redaction') can change that. Through the real upload path."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from ultron.config import Settings
from ultron.errors import ValidationFailed
from ultron.sdk import Ultron

LILY = "My daughter Lily is allergic to peanuts; we live at 12 Baker Street. Redis: redis-cli -a hunter2pass"
XIAOYU = "我女儿叫小雨，今年五岁，我们住在北京市朝阳区建国路88号。QQ号 123456789"


@pytest.fixture()
def hub(make_hub):  # type: ignore[no-untyped-def]
    return make_hub(redaction_enabled=True)


def test_names_kept_in_private_redacted_in_shared_and_group(hub):
    me = Ultron(hub=hub)
    me.create_group("family")
    me.add_to_group("family", "local")
    private = me.upload_memory(LILY, scope="private")
    shared = me.upload_memory(LILY + " (shared copy)")
    group = me.upload_memory(LILY + " (group copy)", scope="group", group="family")
    assert "Lily" in private.content and "12 Baker Street" in private.content
    assert "hunter2pass" not in private.content  # secrets go everywhere
    for rec in (shared, group):
        assert "Lily" not in rec.content and "<PERSON>" in rec.content
        assert "Baker Street" not in rec.content and "<STREET_ADDRESS>" in rec.content
        assert "hunter2pass" not in rec.content
    zh_private = me.upload_memory(XIAOYU, scope="private")
    zh_shared = me.upload_memory(XIAOYU + "（共享）")
    assert "小雨" in zh_private.content and "建国路88号" in zh_private.content
    assert "123456789" not in zh_private.content  # a QQ number is an account: redacted everywhere
    assert "小雨" not in zh_shared.content and "建国路" not in zh_shared.content
    assert "<QQ_NUMBER>" in zh_shared.content
    # the private memory is found by the name it keeps: queries keep names too
    found = me.search_memories("what is Lily allergic to", limit=3)
    assert found[0].record.id == private.id


def test_a_tenants_policy_overrides_the_default(hub):
    me = Ultron(hub=hub)
    with hub.db.session() as s:
        s.execute(
            text(
                "UPDATE tenants SET settings = jsonb_set(settings, '{redaction}', "
                """'{"kept_by_scope": {"shared": ["PERSON"]}}') WHERE name = 'default'"""
            )
        )
    private = me.upload_memory(LILY, scope="private")
    shared = me.upload_memory(LILY + " (shared copy)")
    assert "Lily" in shared.content and "<STREET_ADDRESS>" in shared.content
    assert "Lily" not in private.content  # this tenant keeps names in shared memories only
    with hub.db.session() as s:
        s.execute(text("""UPDATE tenants SET settings = '{"redaction": {"kept_by_scope": []}}'"""))
    with pytest.raises(ValidationFailed, match="redaction policy is invalid"):
        me.upload_memory("anything at all")


def test_settings_choose_what_each_scope_keeps(make_hub):
    hub = make_hub(redaction_keep_private="", redaction_keep_group="PERSON")
    me = Ultron(hub=hub)
    assert "Lily" not in me.upload_memory(LILY, scope="private").content
    with pytest.raises(ValueError, match="UPPER_SNAKE_CASE"):
        Settings(redaction_keep_private="person")


def _set_policy(hub, policy: str | None) -> None:  # type: ignore[no-untyped-def]
    with hub.db.session() as s:
        if policy is None:
            s.execute(text("UPDATE tenants SET settings = settings - 'redaction' WHERE name = 'default'"))
        else:
            s.execute(
                text("UPDATE tenants SET settings = jsonb_set(settings, '{redaction}', CAST(:p AS jsonb))"),
                {"p": policy},
            )


@pytest.mark.parametrize("prepared", [False, True], ids=["upload", "prepared-upload"])
def test_a_policy_changed_after_uploads_applies_to_the_very_next_one(hub, prepared):
    """The hub keeps the policy it read last and checks it in each upload's own transaction (with the
    dedup lock): an upload prepared under a policy that has changed since is prepared again, under the
    stored one, before anything is written; a prepared upload (the HTTP path) gets the same check."""
    from ultron.memory.schemas import UploadRequest
    from ultron.tenancy import local_actor

    def upload(content: str) -> str:
        req = UploadRequest(content=content, scope="private")
        with hub.db.session() as s:
            actor = local_actor(s)
            if prepared:  # prepared under the policy last read, as the router does outside the transaction
                p = hub.memory.prepare(req, actor)
                return hub.memory.upload(s, actor, req, prepared=p).record.content
            return hub.memory.upload(s, actor, req).record.content

    assert "Lily" in upload(LILY)  # the default: private memories keep names
    _set_policy(hub, '{"kept_by_scope": {"private": []}}')
    assert "Lily" not in upload("My daughter Lily has piano lessons on Tuesday at the music school")
    _set_policy(hub, None)
    assert "Lily" in upload("My daughter Lily needs new ballet shoes, size 30, before the recital")
    _set_policy(hub, '{"kept_by_scope": []}')
    with pytest.raises(ValidationFailed, match="redaction policy is invalid"):
        upload("anything at all")
