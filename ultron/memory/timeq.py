"""The dates a search query names: "in March 2026", "early April 2026", "2026-03-14", "2026年3月",
"yesterday", "last week". Search boosts memories whose occurred_at falls in that range (docs/ranking.md).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

_MONTHS = {
    name: i
    for i, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ],
        1,
    )
    for name in names
}
_ISO_DAY = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_MONTH_YEAR = re.compile(
    r"\b(?:(early|mid|middle of|late|end of|beginning of|start of)[\s-]+)?("
    + "|".join(_MONTHS)
    + r")\.?,?\s+(\d{4})\b",
    re.IGNORECASE,
)
_ZH_DAY = re.compile(r"(\d{4})\s*年\s*(\d{1,2})\s*月\s*(\d{1,2})\s*[日号]")
_ZH_MONTH = re.compile(r"(\d{4})\s*年\s*(\d{1,2})\s*月(上旬|中旬|下旬|初|底)?")
_YEAR = re.compile(r"\b(?:in|during)\s+(\d{4})\b|(\d{4})\s*年(?!\s*\d)")
_RELATIVE = {
    "today": (0, 1),
    "yesterday": (-1, 0),
    "last week": (-7, 0),
    "this week": (-7, 1),
    "last month": (-31, 0),
    "this month": (-31, 1),
    "昨天": (-1, 0),
    "今天": (0, 1),
    "上周": (-7, 0),
    "上个月": (-31, 0),
}


def _month(year: int, month: int) -> tuple[datetime, datetime]:
    start = datetime(year, month, 1, tzinfo=UTC)
    end = datetime(year + month // 12, month % 12 + 1, 1, tzinfo=UTC)
    return start, end


def _part(start: datetime, end: datetime, part: str | None) -> tuple[datetime, datetime]:
    """early / mid / late narrow a month to roughly its first, middle or last eleven days."""
    part = (part or "").lower()
    if part in ("early", "beginning of", "start of", "上旬", "初"):
        return start, start + timedelta(days=11)
    if part in ("mid", "middle of", "中旬"):
        return start + timedelta(days=9), start + timedelta(days=21)
    if part in ("late", "end of", "下旬", "底"):
        return end - timedelta(days=11), end
    return start, end


def query_time_range(query: str, now: datetime | None = None) -> tuple[datetime, datetime] | None:
    """The [from, to) range of dates the query names, or None when it names none."""
    now = now or datetime.now(UTC)
    if m := _ISO_DAY.search(query) or _ZH_DAY.search(query):
        try:
            day = datetime(int(m.group(1)), int(m.group(2)), int(m.group(3)), tzinfo=UTC)
        except ValueError:
            return None
        return day, day + timedelta(days=1)
    if m := _MONTH_YEAR.search(query):
        start, end = _month(int(m.group(3)), _MONTHS[m.group(2).lower()])
        return _part(start, end, m.group(1))
    if m := _ZH_MONTH.search(query):
        month = int(m.group(2))
        if 1 <= month <= 12:
            start, end = _month(int(m.group(1)), month)
            return _part(start, end, m.group(3))
    lowered = query.lower()
    for phrase, (a, b) in _RELATIVE.items():
        if phrase in lowered:
            today = now.replace(hour=0, minute=0, second=0, microsecond=0)
            return today + timedelta(days=a), today + timedelta(days=b)
    if m := _YEAR.search(query):
        year = int(m.group(1) or m.group(2))
        if 1900 < year < 2200:
            return datetime(year, 1, 1, tzinfo=UTC), datetime(year + 1, 1, 1, tzinfo=UTC)
    return None
