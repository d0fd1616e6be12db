"""Files and text in: client-side path expansion, format normalizers, importers, raw archive."""
