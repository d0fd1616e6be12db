"""Benchmarks, evaluations, calibrations, the dashboard demo and its screenshots: the code that measures
the hub, above every domain (it builds hubs and servers of its own). Nothing in the hub imports it."""
