"""Metrics and logs: the kit every floor above may feed (it imports no other package of ultron)."""
