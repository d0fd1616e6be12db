"""Random but valid values for the redaction corpus: secrets, PII with real checksums, technical noise.

Everything draws from the `random.Random` passed in, so the corpus is reproducible from its seed.
"""

# ruff: noqa: E501  (snippet templates are data: one realistic line each reads better unwrapped)

from __future__ import annotations

import base64
import hashlib
import json
import random
import string
import uuid

import phonenumbers

ALNUM = string.ascii_letters + string.digits
B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
B32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"

FIRST = "alice bob carol david emma frank grace henry irene jack kate liam mia noah olivia peter quinn ruth sam tina".split()
LAST = "wang smith chen garcia muller li brown zhang kim nguyen patel rossi khan silva lopez".split()
PINYIN = (
    "zhangwei wangfang liyang liuyang chenjie yangmin huanglei zhaolei wujing zhouxin sunhao linfeng".split()
)
DOMAINS = "acme.io gmail.com qq.com 163.com outlook.com corp.example.cn fintech-labs.com hotmail.com mail.ustc.edu.cn".split()


def rand_str(rng: random.Random, n: int, alphabet: str = ALNUM) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def rand_hex(rng: random.Random, n: int) -> str:
    return rand_str(rng, n, "0123456789abcdef")


def mixed(rng: random.Random, n: int, alphabet: str = ALNUM) -> str:
    """A random string guaranteed to hold an upper, a lower and a digit (as real keys almost always do)."""
    while True:
        s = rand_str(rng, n, alphabet)
        if any(c.isupper() for c in s) and any(c.islower() for c in s) and any(c.isdigit() for c in s):
            return s


# --- secrets -------------------------------------------------------------------------------------------


def llm_key(rng: random.Random) -> str:
    kind = rng.choice(["openai", "project", "dashscope", "anthropic", "openrouter", "google", "groq", "hf"])
    if kind == "openai":
        return "sk-" + mixed(rng, 20) + "T3BlbkFJ" + mixed(rng, 20)
    if kind == "project":
        body = "".join(
            rng.choice([mixed(rng, rng.randint(8, 30)), "-", "_"]) for _ in range(rng.randint(4, 9))
        )
        return "sk-proj-" + mixed(rng, 12) + body + mixed(rng, 10)
    if kind == "dashscope":
        return "sk-" + rand_hex(rng, 32)
    if kind == "anthropic":
        return "sk-ant-api03-" + mixed(rng, 60, ALNUM + "-_") + mixed(rng, 31) + "AA"
    if kind == "openrouter":
        return "sk-or-v1-" + rand_hex(rng, 64)
    if kind == "google":
        return "AIza" + mixed(rng, 35, ALNUM + "-_")
    if kind == "groq":
        return "gsk_" + mixed(rng, 52)
    return "hf_" + mixed(rng, 34)


def github_token(rng: random.Random) -> str:
    kind = rng.choice(["ghp", "ghp", "gho", "ghs", "ghu", "pat"])
    if kind == "pat":
        return "github_pat_" + mixed(rng, 22) + "_" + mixed(rng, 59)
    return f"{kind}_" + mixed(rng, 36)


def aws_access_key(rng: random.Random) -> str:
    return rng.choice(["AKIA", "AKIA", "ASIA"]) + rand_str(rng, 16, B32)


def aws_secret_key(rng: random.Random) -> str:
    return mixed(rng, 40, ALNUM + "/+")


def password(rng: random.Random) -> str:
    styles = [
        lambda: (
            rng.choice(["Tr0ub4dor", "Sunsh1ne", "Dragon", "Qwer", "Abc", "Passw0rd", "Welc0me", "Zx"])
            + rng.choice(["&3", "@12345", "!2024", "#88", "_99", "1234!", "2023", ".77"])
        ),
        lambda: mixed(rng, rng.randint(10, 18), ALNUM + "!#%^*_-+"),
        lambda: rng.choice(FIRST).capitalize() + str(rng.randint(1970, 2009)) + rng.choice("!@#$%"),
        lambda: mixed(rng, rng.randint(12, 24)),
    ]
    return rng.choice(styles)()


def opaque_token(rng: random.Random) -> str:
    kind = rng.choice(["hex", "b64url", "google", "slack", "stripe", "gitlab"])
    if kind == "hex":
        return rand_hex(rng, rng.choice([32, 40, 64]))
    if kind == "b64url":
        return mixed(rng, 43, ALNUM + "-_")
    if kind == "google":
        return "ya29.a0" + mixed(rng, 120, ALNUM + "-_")
    if kind == "slack":
        return f"xoxb-{rng.randint(10**11, 10**12)}-{rng.randint(10**11, 10**12)}-{mixed(rng, 24)}"
    if kind == "stripe":
        return "sk_live_" + mixed(rng, 24)
    return "glpat-" + mixed(rng, 20, ALNUM + "-_")


def basic_auth(rng: random.Random) -> str:
    user = rng.choice(FIRST + ["svc-ci", "deploy-bot", "admin"])
    return base64.b64encode(f"{user}:{password(rng)}".encode()).decode()


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def jwt(rng: random.Random) -> str:
    header = {"alg": rng.choice(["HS256", "RS256", "ES256"]), "typ": "JWT"}
    if rng.random() < 0.4:
        header["kid"] = rand_hex(rng, 16)
    payload = {
        "sub": str(rng.randint(10000, 99999999)),
        "iat": rng.randint(1_700_000_000, 1_730_000_000),
        "exp": rng.randint(1_730_000_000, 1_760_000_000),
    }
    if rng.random() < 0.5:
        payload["scope"] = rng.choice(["read write", "admin", "memories:read"])
    sig = b64url(bytes(rng.getrandbits(8) for _ in range(rng.choice([32, 64]))))
    return f"{b64url(json.dumps(header, separators=(',', ':')).encode())}.{b64url(json.dumps(payload, separators=(',', ':')).encode())}.{sig}"


def private_key(rng: random.Random, newline: str = "\n") -> str:
    kind = rng.choice(["RSA ", "", "EC ", "OPENSSH ", "ENCRYPTED "])
    lines = [
        base64.b64encode(bytes(rng.getrandbits(8) for _ in range(48))).decode()
        for _ in range(rng.randint(4, 12))
    ]
    last = base64.b64encode(bytes(rng.getrandbits(8) for _ in range(rng.randint(5, 40)))).decode()
    body = newline.join(lines + [last])
    return f"-----BEGIN {kind}PRIVATE KEY-----{newline}{body}{newline}-----END {kind}PRIVATE KEY-----"


def db_password(rng: random.Random) -> str:
    return mixed(rng, rng.randint(10, 20), ALNUM + "!_.~-")


# --- PII -----------------------------------------------------------------------------------------------


def email(rng: random.Random) -> str:
    first, last = rng.choice(FIRST), rng.choice(LAST)
    local = rng.choice(
        [f"{first}.{last}", f"{first}{rng.randint(1, 99)}", f"{first[0]}{last}", rng.choice(PINYIN)]
    )
    if rng.random() < 0.15:
        local = f"{local}+{rng.choice(['ultron', 'ci', 'news'])}"
    return f"{local}@{rng.choice(DOMAINS)}"


def _valid_number(rng: random.Random, region: str, make) -> phonenumbers.PhoneNumber:
    while True:
        raw = make()
        num = phonenumbers.parse(raw, region)
        if phonenumbers.is_valid_number(num):
            return num


def intl_phone(rng: random.Random) -> str:
    region = rng.choice(["US", "US", "GB", "DE", "FR", "IN", "SG", "AU"])
    lengths = {"US": 10, "GB": 10, "DE": 11, "FR": 9, "IN": 10, "SG": 8, "AU": 9}
    num = _valid_number(
        rng, region, lambda: str(rng.randint(2, 9)) + rand_str(rng, lengths[region] - 1, string.digits)
    )
    style = rng.choice(["intl", "intl", "national", "e164"])
    if region != "US" or style == "intl":
        fmt = (
            phonenumbers.PhoneNumberFormat.E164
            if style == "e164"
            else phonenumbers.PhoneNumberFormat.INTERNATIONAL
        )
        return phonenumbers.format_number(num, fmt)
    national = phonenumbers.format_number(num, phonenumbers.PhoneNumberFormat.NATIONAL)  # (415) 555-2671
    return rng.choice([national, national.replace("(", "").replace(") ", "-")])


CN_MOBILE_PREFIXES = "130 131 132 133 135 136 137 138 139 150 151 152 155 157 158 159 166 176 177 180 186 187 188 189 191 199".split()


def cn_mobile(rng: random.Random, fmt: str | None = None) -> str:
    digits = rng.choice(CN_MOBILE_PREFIXES) + rand_str(rng, 8, string.digits)
    fmt = fmt or rng.choice(["plain", "plain", "plain", "space", "dash", "plus86", "plus86space"])
    return {
        "plain": digits,
        "space": f"{digits[:3]} {digits[3:7]} {digits[7:]}",
        "dash": f"{digits[:3]}-{digits[3:7]}-{digits[7:]}",
        "plus86": "+86" + digits,
        "plus86space": f"+86 {digits[:3]} {digits[3:7]} {digits[7:]}",
    }[fmt]


def cn_landline(rng: random.Random) -> str:
    area, n = rng.choice([("010", 8), ("021", 8), ("0755", 8), ("0571", 8), ("028", 8)])
    return f"{area}-{rng.randint(2, 8)}{rand_str(rng, n - 1, string.digits)}"


def luhn_complete(prefix: str, length: int, rng: random.Random) -> str:
    body = prefix + rand_str(rng, length - len(prefix) - 1, string.digits)
    total = 0
    for i, d in enumerate(reversed(body)):
        n = int(d)
        if i % 2 == 0:
            n = n * 2 - 9 if n * 2 > 9 else n * 2
        total += n
    return body + str((10 - total % 10) % 10)


def luhn_valid(number: str) -> bool:
    total = 0
    for i, d in enumerate(reversed(number)):
        n = int(d)
        if i % 2 == 1:
            n = n * 2 - 9 if n * 2 > 9 else n * 2
        total += n
    return total % 10 == 0


def unionpay_card(rng: random.Random) -> str:
    """A 19-digit China UnionPay debit card (622202…), as printed on receipts: plain or in groups of four."""
    number = luhn_complete(rng.choice(["622202", "622848", "621700", "622588"]), 19, rng)
    return number if rng.random() < 0.6 else " ".join(number[i : i + 4] for i in range(0, 19, 4))


def credit_card(rng: random.Random, valid: bool = True) -> str:
    prefix, length = rng.choice(
        [
            ("4", 16),
            ("4", 16),
            ("51", 16),
            ("55", 16),
            ("2221", 16),
            ("34", 15),
            ("37", 15),
            ("6011", 16),
            ("6222", 16),
        ]
    )
    if prefix == "2221":
        prefix = "5" + str(rng.randint(1, 5))
    number = luhn_complete(prefix, length, rng)
    if not valid:
        number = number[:-1] + str((int(number[-1]) + rng.randint(1, 9)) % 10)
    if length == 15:
        groups = [number[:4], number[4:10], number[10:]]
    else:
        groups = [number[i : i + 4] for i in range(0, 16, 4)]
    return rng.choice([" ", "-", ""]).join(groups)


def _iban_check(country: str, bban: str) -> str:
    rearranged = bban + country + "00"
    numeric = "".join(str(int(c, 36)) for c in rearranged)
    return f"{98 - int(numeric) % 97:02d}"


def iban(rng: random.Random) -> str:
    country = rng.choice(["DE", "GB", "FR", "NL", "ES", "IT", "CH"])
    digits = string.digits
    bban = {
        "DE": lambda: rand_str(rng, 18, digits),
        "GB": lambda: rng.choice(["NWBK", "BARC", "HBUK", "LOYD"]) + rand_str(rng, 14, digits),
        "FR": lambda: (
            rand_str(rng, 10, digits) + rand_str(rng, 11, digits + "ABCDEFGHIJK") + rand_str(rng, 2, digits)
        ),
        "NL": lambda: rng.choice(["ABNA", "INGB", "RABO"]) + rand_str(rng, 10, digits),
        "ES": lambda: rand_str(rng, 20, digits),
        "IT": lambda: rng.choice("ABCXYZ") + rand_str(rng, 10, digits) + rand_str(rng, 12, digits),
        "CH": lambda: rand_str(rng, 17, digits),
    }[country]()
    code = country + _iban_check(country, bban) + bban
    if rng.random() < 0.5:
        return " ".join(code[i : i + 4] for i in range(0, len(code), 4))
    return code


def _b58(data: bytes) -> str:
    n = int.from_bytes(data, "big")
    out = ""
    while n:
        n, r = divmod(n, 58)
        out = B58[r] + out
    return "1" * (len(data) - len(data.lstrip(b"\0"))) + out


def _bech32_polymod(values: list[int]) -> int:
    gen = [0x3B6A57B2, 0x26508E6D, 0x1EA119FA, 0x3D4233DD, 0x2A1462B3]
    chk = 1
    for v in values:
        top = chk >> 25
        chk = (chk & 0x1FFFFFF) << 5 ^ v
        for i in range(5):
            chk ^= gen[i] if ((top >> i) & 1) else 0
    return chk


def _bech32(hrp: str, program: bytes) -> str:
    charset = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"
    acc, bits, data = 0, 0, [0]
    for b in program:
        acc = (acc << 8) | b
        bits += 8
        while bits >= 5:
            bits -= 5
            data.append((acc >> bits) & 31)
    if bits:
        data.append((acc << (5 - bits)) & 31)
    hrp_exp = [ord(c) >> 5 for c in hrp] + [0] + [ord(c) & 31 for c in hrp]
    polymod = _bech32_polymod(hrp_exp + data + [0] * 6) ^ 1
    checksum = [(polymod >> 5 * (5 - i)) & 31 for i in range(6)]
    return hrp + "1" + "".join(charset[d] for d in data + checksum)


def crypto_wallet(rng: random.Random) -> str:
    kind = rng.choice(["p2pkh", "p2sh", "bech32", "eth", "eth"])
    payload = bytes(rng.getrandbits(8) for _ in range(20))
    if kind == "eth":
        return "0x" + "".join(c.upper() if rng.random() < 0.4 else c for c in payload.hex())
    if kind == "bech32":
        return _bech32("bc", payload)
    versioned = (b"\x00" if kind == "p2pkh" else b"\x05") + payload
    check = hashlib.sha256(hashlib.sha256(versioned).digest()).digest()[:4]
    return _b58(versioned + check)


CN_REGIONS = "110101 110105 310104 310115 440305 440106 330106 510107 420106 320102 370202 500103".split()
_CN_W = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)


def cn_resident_id(rng: random.Random, valid: bool = True) -> str:
    birth = f"{rng.randint(1955, 2005)}{rng.randint(1, 12):02d}{rng.randint(1, 28):02d}"
    body = rng.choice(CN_REGIONS) + birth + rand_str(rng, 3, string.digits)
    check = "10X98765432"[sum(int(d) * w for d, w in zip(body, _CN_W, strict=True)) % 11]
    if not valid:
        check = rng.choice([c for c in "0123456789" if c != check])
    return body + check


def public_ipv4(rng: random.Random) -> str:
    while True:
        a = rng.choice([8, 23, 34, 45, 52, 66, 81, 103, 114, 120, 139, 151, 172, 185, 203, 211, 221])
        ip = f"{a}.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}"
        if not ip.startswith("172.") or not 16 <= int(ip.split(".")[1]) <= 31:
            return ip


def private_ipv4(rng: random.Random) -> str:
    return rng.choice(
        [
            f"10.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(2, 254)}",
            f"192.168.{rng.randint(0, 255)}.{rng.randint(2, 254)}",
            f"172.{rng.randint(16, 31)}.{rng.randint(0, 255)}.{rng.randint(2, 254)}",
        ]
    )


def ipv6(rng: random.Random) -> str:
    prefix = rng.choice(["2408:8207", "2a01:4f8", "2001:470", "240e:3b0", "2607:f8b0"])
    groups = [f"{rng.randint(0, 0xFFFF):x}" for _ in range(rng.choice([2, 4, 6]))]
    if len(groups) == 6:
        return prefix + ":" + ":".join(groups)
    return prefix + ":" + ":".join(groups[:1]) + "::" + ":".join(groups[1:])


def username(rng: random.Random) -> str:
    return rng.choice(
        [
            rng.choice(FIRST),
            rng.choice(PINYIN),
            f"{rng.choice(FIRST)}.{rng.choice(LAST)}",
            f"{rng.choice(FIRST)[0]}{rng.choice(LAST)}",
            f"{rng.choice(PINYIN)}{rng.randint(1, 99)}",
        ]
    )


# --- technical noise (never redacted) -----------------------------------------------------------------


def uuid4(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def epoch_ms(rng: random.Random) -> str:
    return str(rng.randint(1_690_000_000_000, 1_735_000_000_000))


def epoch_s(rng: random.Random) -> str:
    return str(rng.randint(1_690_000_000, 1_735_000_000))


def iso_ts(rng: random.Random) -> str:
    return f"2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}.{rng.randint(0, 999):03d}Z"


def log_ts(rng: random.Random) -> str:
    return f"2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d} {rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d},{rng.randint(0, 999):03d}"


def sha(rng: random.Random, n: int = 40) -> str:
    return rand_hex(rng, n)


def pod(rng: random.Random) -> str:
    app = rng.choice(["api", "worker", "memory-hub", "ingest", "gateway", "scheduler", "embedder"])
    return f"{app}-{rand_str(rng, 9, 'bcdfghjklmnpqrstvwxz2456789')}-{rand_str(rng, 5, 'bcdfghjklmnpqrstvwxz2456789')}"


def version(rng: random.Random) -> str:
    return f"{rng.randint(0, 4)}.{rng.randint(0, 30)}.{rng.randint(0, 20)}"


def mem_addr(rng: random.Random) -> str:
    return "0x7f" + rand_hex(rng, 10)


def order_id(rng: random.Random) -> str:
    return rng.choice(["2024", "2023"]) + rand_str(rng, 12, string.digits)


def base64_blob(rng: random.Random, n: int = 60) -> str:
    return base64.b64encode(bytes(rng.getrandbits(8) for _ in range(n))).decode()


def snowflake(rng: random.Random) -> str:
    return str(rng.randint(1_700_000_000_000_000_000, 1_900_000_000_000_000_000))


def bad_luhn_16(rng: random.Random) -> str:
    while True:
        n = rng.choice("456") + rand_str(rng, 15, string.digits)
        if not luhn_valid(n):
            return n


def bad_cn_id(rng: random.Random) -> str:
    return cn_resident_id(rng, valid=False)
