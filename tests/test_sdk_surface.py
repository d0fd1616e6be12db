"""The SDK's public surface is small and explicit."""

import ultron
import ultron.sdk


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
        "edit_memory",
        "delete_memory",
        "get_memory_stats",
        "close",
    } <= public
