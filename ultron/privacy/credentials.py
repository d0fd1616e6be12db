"""Credentials that only context reveals: `password=…`, `"api_key": "…"`, `--token …`, `密码：…`, and the
password inside a URL."""

from __future__ import annotations

from collections.abc import Iterable

import regex as re
from presidio_analyzer import LocalRecognizer

from ultron.privacy import validators as v
from ultron.privacy.spans import FLAGS, UNQUOTED, result


class CredentialRecognizer(LocalRecognizer):
    """Generic credential assignments: `password=…`, `"api_key": "…"`, `--token …`, `密码：…`.

    Only the value is reported. The key must name a credential (`db_password`, `X-Api-Key`,
    `aws_session_token`, but not `max_tokens`, `token_count` or `primary_key`); the value must not be a
    mask, a variable, a template, a path or a code reference; an unquoted value in running text must have
    a digit or a symbol, so `the password field is required` stays as it is.
    """

    ENTITY = "REDACTED_CREDENTIAL"
    _ASSIGN = re.compile(
        r"(?<![A-Za-z0-9_.-])(?<!\$\{)(?P<kq>\\?[\"'])?(?P<key>[A-Za-z_][A-Za-z0-9_.-]*)(?(kq)\\?[\"'])"
        r"[ \t]*(?::=|=>|=|:)[ \t]*"
        r"(?:(?P<vq>\\?[\"'`])(?P<qvalue>[^\"'`\n]{1,400}?)(?P=vq)"
        rf"|(?P<value>{UNQUOTED}+))",
        FLAGS,
    )
    _AMP_TAIL = re.compile(rf"(?:&{UNQUOTED}*)+", FLAGS)
    _FLAG = re.compile(
        r"(?<![A-Za-z0-9_-])--(?P<key>[A-Za-z][A-Za-z0-9-]*)(?:=|[ \t]+)"
        r"(?P<q>[\"']?)(?P<value>[^\s\"'-][^\s\"']*)(?P=q)",
        FLAGS,
    )
    _XML = re.compile(r"<(?P<key>[A-Za-z][A-Za-z0-9_.-]*)>(?P<value>[^<\s]{3,400})</(?P=key)>", FLAGS)
    _SPECIAL = (
        # SQL: CREATE USER … WITH PASSWORD '…', ALTER USER … IDENTIFIED BY '…'
        re.compile(r"(?i:\bpassword|\bidentified[ \t]+by)[ \t]+'(?P<value>[^'\n]{3,})'", FLAGS),
        # mysql -pSECRET, sshpass -p SECRET, curl -u user:SECRET
        re.compile(
            r"(?<![\w-])(?:mysql|mysqldump|mysqladmin|mariadb)\b[^\n|;]*?[ \t]-p"
            r"(?P<q>[\"']?)(?P<value>[^\s\"']{3,})(?P=q)",
            FLAGS,
        ),
        re.compile(r"\bsshpass[ \t]+-p[ \t]+(?P<q>[\"']?)(?P<value>[^\s\"']{3,})(?P=q)", FLAGS),
        # redis-cli -a SECRET, redis-cli --pass SECRET (also redis-benchmark)
        re.compile(
            r"(?<![\w-])redis-(?:cli|benchmark)\b[^\n|;]*?[ \t](?:-a|--pass|--askpass)[ \t]+"
            r"(?P<q>[\"']?)(?P<value>[^\s\"']{3,})(?P=q)",
            FLAGS,
        ),
        re.compile(r"(?:[ \t]-u|--user)[ \t]+(?P<q>[\"']?)[^\s:\"'$]+:(?P<value>[^\s\"']{3,})(?P=q)", FLAGS),
        # requests/httpx/aiohttp basic auth: auth=("user", "pw"), HTTPBasicAuth("user", "pw")
        re.compile(
            r"(?:\bauth[ \t]*=[ \t]*[(\[]|\b(?:HTTP)?(?:Basic|Digest)Auth\()"
            r"[ \t]*[\"'][^\"'\n]*[\"'][ \t]*,[ \t]*[\"'](?P<value>[^\"'\n]{3,})[\"']",
            FLAGS,
        ),
    )
    # Service tokens whose prefix says what they are, found without any key next to them: Slack, Stripe,
    # GitLab, npm, PyPI, Shopify, SendGrid, Google OAuth access tokens.
    _PREFIXED = re.compile(
        r"(?<![A-Za-z0-9_-])(?:xox[abposr]-[A-Za-z0-9-]{10,}|(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}"
        r"|glpat-[A-Za-z0-9_-]{20,}|npm_[A-Za-z0-9]{36}|pypi-AgE[A-Za-z0-9_-]{50,}|shpat_[a-fA-F0-9]{32}"
        r"|SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}|ya29\.[A-Za-z0-9_-]{20,})",
        FLAGS,
    )
    # .netrc and friends: `machine host login alice password s3cret`, or `password s3cret` opening a line.
    _NETRC = re.compile(
        r"(?:^[ \t]*|\blogin[ \t]+\S+[ \t]+)password[ \t]+(?P<value>[^\s\"'`]+)", FLAGS | re.IGNORECASE
    )
    # Prose: "my password is hunter2", "数据库密码是 Abc@12345", "token 为 xyz123".
    _PROSE_EN = re.compile(
        r"(?i:\b(?:password|passwd|passphrase|passcode|pwd|api[ _-]?key|token|secret))"
        r"[ \t]+(?i:is|was|=)[ \t]+(?i:set[ \t]+to[ \t]+)?[\"'`]?(?P<value>[!-~]{3,})",
        FLAGS,
    )
    _PROSE_ZH = re.compile(
        r"(?:(?:密码|口令|密钥|秘钥|私钥|令牌)(?P<sep>[ \t]*(?:是|为|:|：|=)[ \t]*|[ \t]*)"
        r"|(?<![A-Za-z0-9_])(?i:api[ _-]?key|key|token|secret)[ \t]*(?P<sep>是|为|：)[ \t]*)"
        r"[\"'`“]?(?P<value>[!-~]{3,})",
        FLAGS,
    )

    def __init__(self, language: str):
        super().__init__(
            supported_entities=[self.ENTITY], supported_language=language, name="CredentialRecognizer"
        )

    def load(self) -> None:  # noqa: D102
        pass

    def analyze(self, text, entities, nlp_artifacts=None):  # noqa: D102
        spans = [*self._assignments(text), *self._flags(text), *self._others(text)]
        return [result(self, self.ENTITY, s, e) for s, e in sorted(set(spans))]

    def _assignments(self, text: str) -> Iterable[tuple[int, int]]:
        for m in self._ASSIGN.finditer(text):
            if not is_credential_key(m["key"]):
                continue
            if m["qvalue"] is not None:
                if not v.is_placeholder_value(m["qvalue"]) and not v.is_path_like(m["qvalue"]):
                    yield m.span("qvalue")
                continue
            start, end = m.span("value")
            if text[end : end + 1] == "&" and text[m.start() - 1 : m.start()] not in ("?", "&"):
                # `password=a&b`: only a query parameter ends at '&'
                end = self._AMP_TAIL.match(text, end).end()
            end = _strip_trailing(text, start, end)
            if _acceptable_unquoted(text[start:end], config_line=_at_line_start(text, m.start())):
                yield start, end

    def _flags(self, text: str) -> Iterable[tuple[int, int]]:
        for m in self._FLAG.finditer(text):
            if is_credential_key(m["key"]) and _acceptable_unquoted(m["value"], config_line=True):
                yield m.span("value")
        for m in self._XML.finditer(text):
            if is_credential_key(m["key"]) and not v.is_placeholder_value(m["value"]):
                yield m.span("value")

    def _others(self, text: str) -> Iterable[tuple[int, int]]:
        yield from (m.span() for m in self._PREFIXED.finditer(text))
        for pattern in self._SPECIAL:
            for m in pattern.finditer(text):
                if not v.is_placeholder_value(m["value"]):
                    yield m.span("value")
        for m in self._NETRC.finditer(text):
            if _acceptable_unquoted(m["value"], config_line=False):
                yield m.span("value")
        for m in self._PROSE_EN.finditer(text):
            start, end = m.span("value")
            end = _strip_trailing(text, start, end)
            if _acceptable_unquoted(text[start:end], config_line=False):
                yield start, end
        for m in self._PROSE_ZH.finditer(text):
            start, end = m.span("value")
            end = _strip_trailing(text, start, end)
            value = text[start:end]
            explicit = bool(m["sep"].strip())
            if _acceptable_unquoted(value, config_line=explicit):
                yield start, end


_TOKEN_NOT_SECRET = frozenset(
    "max num total page next continuation pagination sync cursor eos bos pad unk sep cls mask start end stop "
    "completion prompt input output special first last decoder sample count cache reasoning".split()
)
_KEY_QUALIFIERS = frozenset(
    "api access secret private signing encryption master auth app client subscription service account "
    "license webhook session shared admin ingest deploy".split()
)
_SECRET_WORDS = frozenset(
    "password passwd passphrase passcode pwd pw pass secret credential credentials apikey passwort".split()
)
_SECRET_SUFFIXES = ("password", "passwd", "passphrase", "apikey", "secret", "accesstoken", "authtoken")


def key_words(key: str) -> list[str]:
    """`X-Api-Key` → [x, api, key]; `SecretAccessKey` → [secret, access, key]; `PGPASSWORD` → [pgpassword]."""
    words: list[str] = []
    for part in re.split(r"[_.\-\s]+", key.strip("-")):
        words.extend(w.lower() for w in re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+", part))
    return words


def is_credential_key(key: str) -> bool:
    words = key_words(key)
    if not words:
        return False
    last, prev = words[-1], (words[-2] if len(words) > 1 else "")
    if last in _SECRET_WORDS or last.endswith(_SECRET_SUFFIXES):
        return True
    if last == "token":
        return prev not in _TOKEN_NOT_SECRET
    if last == "key":
        return prev in _KEY_QUALIFIERS
    return False


def _at_line_start(text: str, pos: int) -> bool:
    """The key opens its line (`.env`, YAML, INI, `export …`): the value is data, not code."""
    line_start = text.rfind("\n", 0, pos) + 1
    return bool(re.fullmatch(r"[ \t]*(?:export[ \t]+|set[ \t]+|-[ \t]+|#[ \t]*)?", text[line_start:pos]))


def _strip_trailing(text: str, start: int, end: int) -> int:
    while end > start and text[end - 1] in ".,;:)]}>!?" and (end == len(text) or not text[end].isalnum()):
        if text[end - 1] == "!" and end - start > 1 and text[end - 2].isalnum():
            break
        end -= 1
    return end


def _acceptable_unquoted(value: str, config_line: bool) -> bool:
    """An unquoted value is a secret unless it is a mask, variable, path, URL or code; in running text
    (not a config line) it must also have a digit or a symbol, as `hunter2` does and `required` does not."""
    if v.is_placeholder_value(value) or v.is_path_like(value) or "://" in value or v.is_code_reference(value):
        return False
    if config_line:
        return True
    if v.is_bare_identifier(value):
        return False
    return any(c.isdigit() for c in value) or any(not c.isalnum() and c not in "_-." for c in value)


class UrlPasswordRecognizer(LocalRecognizer):
    """The password in `scheme://user:password@host`. Database schemes → DB_URL_PASSWORD, others (git over
    https, ftp, smtp) → REDACTED_CREDENTIAL. The URL, user and host stay."""

    DB_SCHEMES = frozenset(
        "postgres postgresql psql mysql mariadb mongodb redis rediss amqp amqps mssql sqlserver oracle "
        "clickhouse cockroachdb timescaledb couchdb neo4j cassandra memcached nats kafka "
        "elasticsearch".split()
    )
    _URL = re.compile(
        r"(?<![A-Za-z0-9+.-])(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://(?P<user>[^\s:/@?#\"'<>]*)"
        # `#` and `?` may sit in a pasted password (`deploy:Dragon#88@git…`): the `@host` after decides.
        r":(?P<value>[^\s/\"'<>]+)@(?=[A-Za-z0-9\[_])",
        FLAGS,
    )

    def __init__(self, language: str):
        super().__init__(
            supported_entities=["DB_URL_PASSWORD", "REDACTED_CREDENTIAL"],
            supported_language=language,
            name="UrlPasswordRecognizer",
        )

    def load(self) -> None:  # noqa: D102
        pass

    def analyze(self, text, entities, nlp_artifacts=None):  # noqa: D102
        results = []
        for m in self._URL.finditer(text):
            if v.is_placeholder_value(m["value"]):
                continue
            base = re.split(r"[+:]", m["scheme"].lower())[0]
            entity = "DB_URL_PASSWORD" if base in self.DB_SCHEMES else "REDACTED_CREDENTIAL"
            if entity in entities:
                results.append(result(self, entity, *m.span("value")))
        return results
