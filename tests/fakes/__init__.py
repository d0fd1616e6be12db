"""Reusable fakes for tests: servers that speak external providers' wire formats on 127.0.0.1."""
