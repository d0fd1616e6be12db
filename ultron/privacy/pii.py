"""Personal data in technical text: home-directory user names, phone numbers, and Presidio's email, IP,
card, IBAN and crypto recognizers adjusted so ids, timestamps and versions in logs survive."""

from __future__ import annotations

import ipaddress

import phonenumbers
import regex as re
import tldextract
from presidio_analyzer import EntityRecognizer, RecognizerResult
from presidio_analyzer.predefined_recognizers import (
    CreditCardRecognizer,
    CryptoRecognizer,
    EmailRecognizer,
    IpRecognizer,
    PhoneRecognizer,
)

from ultron.privacy import validators as v
from ultron.privacy.spans import FLAGS, SpanRecognizer, result

CN_RESIDENT_ID_PATTERNS = (
    r"(?<![0-9A-Za-z])[1-9]\d{5}(?:18|19|20)\d{2}(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])\d{3}[\dXx]"
    r"(?![0-9A-Za-z])",
)
# Mainland mobile segments (13x, 145-149, 15x but 154, 162/165-167, 170-178, 18x, 19x but 194).
CN_MOBILE_PATTERN = (
    r"(?<![0-9A-Za-z+])(?:(?:\+|00)86[ -]?)?"
    r"1(?:3\d|4[5-9]|5[0-35-9]|6[25-7]|7[0-8]|8\d|9[0-35-9])(?:[ -]?\d{4}){2}(?![0-9A-Za-z])"
)
ETH_ADDRESS_PATTERN = r"(?<![0-9A-Za-z])0x(?!0{40})[0-9a-fA-F]{40}(?![0-9A-Za-z])"


class HomePathRecognizer(SpanRecognizer):
    """The user name in a home directory: `/home/alice/…`, `/Users/bob/…`, `C:\\Users\\chen.wei\\…`.

    The rest of the path stays: file names in a stack trace carry meaning. Service and CI accounts
    (`runner`, `ubuntu`, `ec2-user`, `Public`, …) are not people and are kept. Once a user name is known
    it is also replaced where it names the same account: `alice@devbox:~$` prompts, `ssh alice@host`,
    `USER=alice`.
    """

    NOT_PEOPLE = frozenset(
        "runner ubuntu ec2-user user users admin root app apps jenkins circleci vagrant node www-data git "
        "deploy shared public default administrator travis gitlab-runner vscode codespace codespaces "
        "linuxbrew docker "
        "nobody postgres mysql centos debian fedora pi opc azureuser builder build buildkite-agent ci test "
        "guest username all default.migrated".split()
    )
    PATTERNS = (
        r"(?<![A-Za-z0-9_.-])/(?:home|Users)/(?P<value>[^/\s\"'`<>|:;,()\[\]{}\\$*?%]+)",
        # Windows: C:\Users\x, C:/Users/x, C:\\Users\\x (escaped in JSON); a name with spaces ends at a
        # separator.
        r"(?<![A-Za-z0-9])[A-Za-z]:(?:\\\\|\\|/)(?i:Users|Documents and Settings)(?:\\\\|\\|/)"
        r"(?P<value>[^\\/\r\n\"'`<>|:*?%$]+)(?=\\|/)",
        r"(?<![A-Za-z0-9])[A-Za-z]:(?:\\\\|\\|/)(?i:Users|Documents and Settings)(?:\\\\|\\|/)"
        r"(?P<value>[^\\/\s\"'`<>|:*?%$,;()]+)",
        # A shell prompt: `alice@devbox:~/proj$`, `bob@gpu-3:/srv#`.
        r"^(?P<value>[a-z_][a-z0-9_.-]{0,31})@[A-Za-z0-9][A-Za-z0-9.-]*:[~/][^\n$#]*[$#]",
    )

    def __init__(self, language: str):
        super().__init__("USER", self.PATTERNS, language, accept=self._is_person)

    def _is_person(self, name: str) -> bool:
        name = name.rstrip(".")
        return bool(name) and name.lower() not in self.NOT_PEOPLE and not name.startswith(("<", "{", "~"))

    def analyze(self, text, entities, nlp_artifacts=None, regex_flags=None):  # noqa: D102
        spans = set()
        for start, end in self.spans(text):
            while end > start and text[end - 1] == ".":
                end -= 1
            spans.add((start, end))
        names = {text[s:e] for s, e in spans}
        for name in names:
            escaped = re.escape(name)
            pattern = rf"(?<![\w.-])(?P<value>{escaped})@|\b(?:USER|LOGNAME|USERNAME)=(?P<value>{escaped})\b"
            for m in re.finditer(pattern, text, FLAGS):
                spans.add(m.span("value"))
        return [self.result(s, e) for s, e in sorted(spans)]


class CnMobileRecognizer(SpanRecognizer):
    """Mainland China mobile numbers, `13800138000`, `138-0013-8000`, `+86 138 0013 8000`, unless the
    number is labelled as something else (`订单号 13912345678`, `order_id=13912345678`)."""

    def __init__(self, language: str):
        super().__init__("PHONE_NUMBER", (CN_MOBILE_PATTERN,), language)

    def analyze(self, text, entities, nlp_artifacts=None, regex_flags=None):  # noqa: D102
        return [self.result(s, e) for s, e in self.spans(text) if not labelled_as_identifier(text, s)]


_ID_LABEL = re.compile(
    r"(?i:(?:^|[^a-z])(?:id|ids|no|num|seq|order|orders|trace|txn|tx|ts|timestamp|offset|uid|pid|sku|ref|"
    r"invoice|ticket|build|job|run|task|request|req)|订单号?|单号|流水号?|编号|交易号|工单号?|序号|批次号?)"
    r"[ \t]*[:=：#]?[ \t]*[\"']?$",
    FLAGS,
)


def labelled_as_identifier(text: str, start: int) -> bool:
    """The number right after this position is introduced as an id, an order number or a timestamp."""
    return bool(_ID_LABEL.search(text[max(0, start - 24) : start]))


_PHONE_CONTEXT = re.compile(
    r"(?i:\b(?:phones?|telephone|tel|mobile|cell|call(?:ed)?|fax|whatsapp|sms|contact|reach)\b)"
    r"|电话|手机|联系|致电|座机|传真|短信|热线|号码",
    FLAGS,
)


class ContextualPhoneRecognizer(PhoneRecognizer):
    """Presidio's libphonenumber recognizer, made safe and fast for logs.

    A bare run of digits is a valid number in some region surprisingly often (epoch seconds are Indian
    mobiles), so an unformatted candidate needs a phone word within 40 characters before it; a formatted
    one (parentheses, separators) needs eight digits or that word; one starting with `+` is taken as is;
    a number labelled as an id never is. libphonenumber then validates each surviving candidate in the
    regions below instead of scanning the whole text once per region (~15 ms per KB of log).
    """

    REGIONS = ("US", "GB", "DE", "FR", "IN", "CA", "BR", "IL", "CN", "SG", "AU", "JP")
    _CANDIDATE = re.compile(r"(?<![A-Za-z0-9_.])(?:\+[ \t]?)?\(?\d[\d \t().-]{5,24}\d(?![A-Za-z0-9_])", FLAGS)

    def __init__(self, language: str):
        super().__init__(supported_language=language, supported_regions=self.REGIONS, leniency=1)

    def analyze(self, text, entities, nlp_artifacts=None):  # noqa: D102
        kept = []
        for m in self._CANDIDATE.finditer(text):
            if self._plausible(text, m.start(), m.end()):
                found = [self._shift(r, m.start()) for r in self._match(m.group())]
                kept += [r for r in found if self._plausible(text, r.start, r.end)]
        return EntityRecognizer.remove_duplicates(kept)

    def _match(self, candidate: str) -> list[RecognizerResult]:
        """The candidate as one number valid in some region (an international one parses the same in any)."""
        digits = candidate.lstrip("( ")
        if digits.startswith("+"):
            regions: tuple[str, ...] = ("US",)
        elif digits.startswith(("0", "1")):  # trunk prefixes and mainland mobiles: try China first
            regions = ("CN", *(r for r in self.supported_regions if r != "CN"))
        else:
            regions = self.supported_regions
        for region in regions:
            try:
                number = phonenumbers.parse(candidate, region)
            except phonenumbers.NumberParseException:
                continue
            if phonenumbers.is_valid_number(number):
                return [result(self, "PHONE_NUMBER", 0, len(candidate))]
        return []

    @staticmethod
    def _shift(result: RecognizerResult, offset: int) -> RecognizerResult:
        result.start += offset
        result.end += offset
        return result

    @staticmethod
    def _plausible(text: str, start: int, end: int) -> bool:
        raw = text[start:end]
        digits = sum(c.isdigit() for c in raw)
        if not 7 <= digits <= 15 or _NOT_A_PHONE.search(raw):
            return False
        if not raw.startswith("+") and re.search(r"(?<!\d)\d(?!\d)", raw):
            return False  # columns of small numbers (`LISTEN 0 244`), not a number split into groups
        if (
            labelled_as_identifier(text, start)
            or _embedded(text, start, end)
            or _coordinates(text, start, end)
        ):
            return False
        if raw.startswith("+"):
            return True
        context = _PHONE_CONTEXT.search(text[max(0, start - 40) : start])
        formatted = "(" in raw or re.search(r"\d[ .-]\d", raw)
        # A formatted number without a phone word still needs an area code: `429 7631` is a status and a size.
        return bool(context or (formatted and digits >= 8))


# Dates, times, IPv4 addresses, dotted versions and ranges (`cost=17.00..329.50` in a query plan) look like
# formatted numbers.
_NOT_A_PHONE = re.compile(
    r"\d{4}[-./]\d{1,2}[-./]\d{1,2}|\d{1,2}[-./]\d{1,2}[-./]\d{4}|\d{1,3}(?:\.\d{1,3}){3}(?!\d)|\d+\.\d+\.\d+"
    r"|\d\.\.\d",
    FLAGS,
)
# Latitude and longitude: two decimals of four or more places side by side (`40.7128, -74.0060`,
# `[151.2093, -33.8688]`, `+35.6759 -83.6478`). A phone number is never written with a single decimal point.
_COORDINATES = re.compile(r"[-+]?\d{1,3}\.\d{4,}[ \t]*[, \t][ \t]*[-+]?\d{1,3}\.\d{4,}(?![\d.])", FLAGS)


def _coordinates(text: str, start: int, end: int) -> bool:
    """The candidate is (part of) a pair of coordinates."""
    lo = max(0, start - 24)
    return any(
        m.start() + lo < end and start < m.end() + lo for m in _COORDINATES.finditer(text[lo : end + 24])
    )


def _embedded(text: str, start: int, end: int) -> bool:
    """Digits glued to an identifier (`build-20240612-1530`, `v1.2.3`) or to a decimal are not phones."""
    before = text[start - 1] if start else " "
    after = text[end] if end < len(text) else " "
    glued_before = before in "._/-" and start > 1 and text[start - 2].isalnum()
    glued_after = after in "._/-" and text[end + 1 : end + 2].isalnum()
    return glued_before or glued_after


class OfflineEmailRecognizer(EmailRecognizer):
    """Presidio's email recognizer with the bundled public-suffix snapshot: the default `tldextract` fetches
    the list over the network on first use, which hangs or fails on an offline host."""

    _EXTRACT = tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)

    def __init__(self, language: str):
        super().__init__(supported_language=language)
        self.global_regex_flags = re.DOTALL | re.MULTILINE | re.IGNORECASE | re.ASCII

    def validate_result(self, pattern_text: str):  # noqa: D102
        return self._EXTRACT(pattern_text).fqdn != ""

    def analyze(self, text, entities, nlp_artifacts=None, regex_flags=None):  # noqa: D102
        return [
            r
            for r in super().analyze(text, entities, nlp_artifacts, regex_flags)
            if not _login_target(text, r)
        ]


_REMOTE_SHELL = re.compile(r"\b(?:ssh|scp|sftp|rsync|mosh|sshpass|ssh-copy-id)\b", FLAGS)


def _login_target(text: str, r: RecognizerResult) -> bool:
    """`ssh deploy@bastion.acme.io`, `git@github.com:org/repo`, `https://<key>@o1.ingest.sentry.io`:
    a login on a host, not a mailbox."""
    if text[max(0, r.start - 3) : r.start] == "://" or re.match(r":[~/\w]", text[r.end : r.end + 2]):
        return True
    line_start = text.rfind("\n", 0, r.start) + 1
    return bool(_REMOTE_SHELL.search(text, line_start, r.start))


class TechnicalIpRecognizer(IpRecognizer):
    """Presidio's IP recognizer minus addresses that identify nobody (loopback, 0.0.0.0, ::, netmasks) and
    minus shapes that are not addresses in technical text (`arr[::2]`, OIDs and 5-part versions)."""

    def __init__(self, language: str):
        super().__init__(supported_language=language)
        self.global_regex_flags = re.DOTALL | re.MULTILINE | re.IGNORECASE | re.ASCII

    def analyze(self, text, entities, nlp_artifacts=None, regex_flags=None):  # noqa: D102
        kept = []
        for r in super().analyze(text, entities, nlp_artifacts, regex_flags):
            value = text[r.start : r.end]
            if not v.ip_is_public_interest(value):
                continue
            if ":" in value and len([g for g in re.split(r"[:/%]", value) if g]) < 3:
                continue
            if re.match(r"\.\d", text[r.end : r.end + 2]) or (
                r.start > 1 and re.match(r"\d\.", text[r.start - 2 : r.start])
            ):
                continue  # part of a longer dotted number: an OID or a 5-part version
            if _VERSION_CONTEXT.search(text[max(0, r.start - 16) : r.start]):
                continue
            if _dns_answer(text, r.start, value):
                continue
            kept.append(r)
        return kept


# `example.com. 300 IN A 93.184.215.14`: a DNS record's address.
_DNS_RECORD = re.compile(r"\sIN[ \t]+A{1,4}[ \t]+$", FLAGS)
_DIG_SHORT = re.compile(r"^\W{0,3}dig\b[^\n]*\+short", FLAGS)
_ADDRESS_LINE = re.compile(r"^[0-9A-Fa-f.:]+$")


def _dns_answer(text: str, start: int, value: str) -> bool:
    """A public address that a DNS lookup printed (`dig … +short` output, an `IN A` record) belongs to the
    server behind a public name, not to a person. Private addresses stay redacted: they map a network."""
    try:
        if not ipaddress.ip_address(value.split("/")[0].split("%")[0]).is_global:
            return False
    except ValueError:
        return False
    line_start = text.rfind("\n", 0, start) + 1
    if _DNS_RECORD.search(text[line_start:start]):
        return True
    if text[line_start:start].strip():
        return False
    # Lines of bare addresses up to the `dig … +short` that printed them.
    lines = text[:line_start].splitlines()
    while lines and _ADDRESS_LINE.match(lines[-1].strip()):
        lines.pop()
    return bool(lines) and bool(_DIG_SHORT.search(lines[-1]))


_VERSION_CONTEXT = re.compile(
    r"(?i:\b(?:v|ver|version|release|build|rev|cuda|cudnn|driver|nccl|firmware|kernel)[ \t:=v]*"
    r"|==|>=|<=|~=)$",
    FLAGS,
)


class StrictCreditCardRecognizer(CreditCardRecognizer):
    """Presidio's Luhn-checked card recognizer, minus 1xxx numbers (UATP cards are rare, while 13- to
    19-digit epoch timestamps starting with 1 are in every log and pass Luhn one time in ten) and minus
    digits right after a `+`, plus 19-digit UnionPay cards."""

    # China UnionPay debit cards run to 19 digits; Presidio's pattern stops at 17.
    _UNIONPAY = re.compile(
        r"(?<![0-9A-Za-z+])62\d{2}(?:[ -]?\d{4}){3}(?:[ -]?\d{1,3})?(?![0-9A-Za-z])", FLAGS
    )

    def __init__(self, language: str):
        super().__init__(supported_language=language)
        self.global_regex_flags = re.DOTALL | re.MULTILINE | re.IGNORECASE | re.ASCII

    def invalidate_result(self, pattern_text: str) -> bool:  # noqa: D102
        digits = re.sub(r"\D", "", pattern_text)
        return digits.startswith("1") or len(set(digits)) == 1

    def analyze(self, text, entities, nlp_artifacts=None, regex_flags=None):  # noqa: D102
        # `+4937541437280` is a phone number in E.164 whose digits happen to pass Luhn.
        results = super().analyze(text, entities, nlp_artifacts, regex_flags)
        results = [r for r in results if text[r.start - 1 : r.start] != "+"]
        taken = {(r.start, r.end) for r in results}
        for m in self._UNIONPAY.finditer(text):
            if m.span() not in taken and self.validate_result(m.group()):
                results.append(result(self, "CREDIT_CARD", *m.span()))
        return results


class CryptoWalletRecognizer(CryptoRecognizer):
    """Presidio's checksummed Bitcoin recognizer plus Ethereum addresses (0x + 40 hex)."""

    def __init__(self, language: str):
        super().__init__(supported_language=language)
        self._eth = re.compile(ETH_ADDRESS_PATTERN, FLAGS)

    def analyze(self, text, entities, nlp_artifacts=None, regex_flags=None):  # noqa: D102
        results = [
            r for r in super().analyze(text, entities, nlp_artifacts, regex_flags) if _standalone(text, r)
        ]
        return results + [result(self, "CRYPTO", *m.span()) for m in self._eth.finditer(text)]


def _standalone(text: str, r: RecognizerResult) -> bool:
    """Presidio's Bitcoin pattern has no boundaries; a checksum hit inside a longer token is a fluke."""
    before = text[r.start - 1] if r.start else " "
    after = text[r.end] if r.end < len(text) else " "
    return not (before.isascii() and before.isalnum()) and not (after.isascii() and after.isalnum())
