"""The SDK's public surface is small and explicit."""

import ultron
import ultron.sdk
from ultron.sdk._http import HttpBackend
from ultron.sdk._local import LocalBackend


def test_exported_members():
    assert ultron.sdk.__all__ == ["Ultron", "UltronClient"]
    assert set(ultron.__all__) == {"Ultron", "UltronClient", "__version__"}
    assert ultron.Ultron is ultron.sdk.Ultron
    assert issubclass(ultron.UltronClient, ultron.Ultron)


def test_both_clients_offer_the_same_methods():
    public = {name for name in dir(ultron.Ultron) if not name.startswith("_")}
    assert {
        "upload_memory",
        "upload",
        "search_memories",
        "get_memory_details",
        "get_memory",
        "get_contributions",
        "get_thread",
        "edit_memory",
        "delete_memory",
        "get_memory_stats",
        "search_skills",
        "list_skills",
        "get_skill",
        "skill_md",
        "skill_history",
        "export_skill",
        "upload_skill",
        "list_clusters",
        "get_cluster",
        "close",
    } <= public


def test_both_backends_implement_the_same_calls():
    def calls(cls: type) -> set[str]:
        return {name for name in vars(cls) if not name.startswith("_") and callable(getattr(cls, name))}

    assert calls(LocalBackend) == calls(HttpBackend)


def test_familiar_aliases_are_the_same_methods_on_both_clients():
    aliases = {
        "add": "upload_memory",
        "search": "search_memories",
        "get": "get_memory",
        "update": "edit_memory",
        "delete": "delete_memory",
    }
    for client in (ultron.Ultron, ultron.UltronClient):
        for alias, name in aliases.items():
            assert getattr(client, alias) is getattr(client, name), (client, alias)
