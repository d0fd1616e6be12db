"""Pure checks the recognizers use to accept or reject a regex candidate."""

from __future__ import annotations

import datetime as dt
import ipaddress
import re

_CN_ID_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
_CN_ID_CHECK = "10X98765432"


def cn_resident_id_valid(value: str) -> bool:
    """An 18-character PRC resident identity number with a real birth date and a valid ISO 7064 check."""
    if len(value) != 18 or not value[:17].isdigit():
        return False
    try:
        born = dt.date(int(value[6:10]), int(value[10:12]), int(value[12:14]))
    except ValueError:
        return False
    if not dt.date(1900, 1, 1) <= born <= dt.date.today():
        return False
    total = sum(int(d) * w for d, w in zip(value[:17], _CN_ID_WEIGHTS, strict=True))
    return _CN_ID_CHECK[total % 11] == value[17].upper()


def looks_like_key_body(body: str) -> bool:
    """Random key material rather than hyphenated words (`sk-learn-compatible-pipeline-2024`): at least
    20 alphanumerics and two digits, and either mixed case or a 16-character hex run (DashScope keys)."""
    alnum = [c for c in body if c.isalnum()]
    if len(alnum) < 20 or sum(c.isdigit() for c in alnum) < 2:
        return False
    mixed_case = any(c.isupper() for c in alnum) and any(c.islower() for c in alnum)
    return mixed_case or bool(re.search(r"[0-9a-f]{16}", body))


def looks_like_token(value: str) -> bool:
    """An opaque token rather than an English word: it has a digit, '=' padding or inner mixed case."""
    if len(value) < 8:
        return False
    if any(c.isdigit() for c in value) or value.endswith("="):
        return True
    inner = value[1:]
    return sum(c.isupper() for c in inner) >= 2 and sum(c.islower() for c in inner) >= 2


def mixed_case_secret(value: str) -> bool:
    """AWS secret keys are 40 base64 characters; a 40-hex SHA has no upper case and is not one."""
    return any(c.isupper() for c in value) and any(c.islower() for c in value)


_PLACEHOLDER_WORDS = frozenset(
    {
        "none",
        "null",
        "nil",
        "true",
        "false",
        "undefined",
        "empty",
        "password",
        "passwd",
        "pass",
        "pwd",
        "secret",
        "token",
        "redacted",
        "masked",
        "hidden",
        "removed",
        "required",
        "optional",
        "string",
        "str",
    }
)
_PLACEHOLDER_SHAPE = re.compile(
    r"""^(?:
        [*xX#._-]{3,}                    # ****, xxxx, ...
      | <[^>]*>? | \[[^\]]*\]? | \{.*\}? | \([^)]*\)?   # <token>, [REDACTED], {password}, (hidden)
      | \$\{.*\}? | \$\(.*\)? | \$[A-Za-z_]\w*  # ${VAR}, $(cmd), $VAR
      | %\(\w+\)[sd] | %[sd] | %\w+%         # %(password)s, %s, %PASSWORD%
      | (?i:your|my|the|some)[_-].*      # your_api_key, YOUR-TOKEN
      | (?i:.*(?:placeholder|changeme|replace[_-]?me|example[_-]?(?:key|token|password)).*)
    )$""",
    re.VERBOSE,
)


def is_placeholder_value(value: str) -> bool:
    """Values that stand for a secret without being one: masks, variables, templates, sentinels."""
    stripped = value.strip("'\"`")
    if len(stripped) < 3:
        return True
    return stripped.lower() in _PLACEHOLDER_WORDS or bool(_PLACEHOLDER_SHAPE.match(stripped))


def is_path_like(value: str) -> bool:
    return value.startswith(("/", "~/", "./", "../")) or bool(re.match(r"^[A-Za-z]:[\\/]", value))


_IDENT = r"[A-Za-z_][A-Za-z0-9_]{0,31}"
_CODE_REF = re.compile(rf"^{_IDENT}(?:\.{_IDENT})*(?:\(.*|\[.*)?$")


def is_code_reference(value: str) -> bool:
    """`self.password`, `get_token()`, `os.environ[...]`: code that reads a secret, not the secret. Segments
    are short identifiers with few digits, which random tokens (`ya29.a0AfH6SM…`) are not."""
    if not any(c in value for c in ".([") or not _CODE_REF.match(value):
        return False
    head = re.split(r"[(\[]", value, maxsplit=1)[0]
    return all(sum(c.isdigit() for c in part) <= 2 for part in head.split("."))


def is_bare_identifier(value: str) -> bool:
    """`password=db_password`: a variable name with no digits."""
    return value.isidentifier() and not any(c.isdigit() for c in value)


# Public DNS resolvers (Google, Cloudflare, Quad9, OpenDNS, AdGuard, 114DNS, AliDNS, DNSPod, Baidu): in every
# resolv.conf, nginx `resolver` line and `dig @…`; they are services, not anyone's address.
PUBLIC_RESOLVERS = frozenset(
    "8.8.8.8 8.8.4.4 1.1.1.1 1.0.0.1 9.9.9.9 149.112.112.112 208.67.222.222 208.67.220.220 94.140.14.14 "
    "94.140.15.15 114.114.114.114 114.114.115.115 223.5.5.5 223.6.6.6 119.29.29.29 180.76.76.76 "
    "2001:4860:4860::8888 2001:4860:4860::8844 2606:4700:4700::1111 2606:4700:4700::1001 2620:fe::fe".split()
)


# Addresses that appear in every config file and say nothing about anyone.
def ip_is_public_interest(value: str) -> bool:
    """False for loopback, unspecified, netmask-shaped and broadcast addresses and public DNS resolvers;
    True otherwise."""
    try:
        addr = ipaddress.ip_address(value.split("/")[0].split("%")[0])
    except ValueError:
        return False
    if addr.is_loopback or addr.is_unspecified or str(addr) in PUBLIC_RESOLVERS:
        return False
    if addr.version == 4:
        bits = int(addr)
        # 255.255.255.0 and friends: contiguous ones then zeros.
        return not (value.startswith("255.") and (bits | (bits - 1)) == 0xFFFFFFFF)
    return True
