from __future__ import annotations

import pytest

from ultron.privacy import Redactor


@pytest.fixture(scope="session")
def redactor() -> Redactor:
    """One redactor for the whole run, as in production: building it is the slow part."""
    return Redactor()


@pytest.fixture(scope="session")
def redact(redactor: Redactor):
    """Shorthand: the redacted text only."""
    return lambda text, policy=None: redactor.redact(text, policy).text
