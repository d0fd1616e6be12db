"""The Trajectory Hub: sessions and messages, task segmentation, fingerprints, metrics, extraction."""
