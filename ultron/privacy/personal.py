"""Names, street addresses and QQ numbers: the personal data a companion's memories are full of.

English person names come from spaCy NER (see nlp.py) and are filtered there; Chinese names come from
jieba's part-of-speech tagger (the `nr` tag of its HMM, shipped inside the `jieba` package), kept only
when the word starts with a common surname or follows a naming cue (`我女儿叫小雨`). No trained Chinese
spaCy pipeline ships in a package on PyPI (`zh-core-web-sm` there is an empty placeholder), see
docs/privacy.md. Addresses and QQ numbers are patterns.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import regex as re
from presidio_analyzer import LocalRecognizer

from ultron.lru import Lru
from ultron.privacy.names import GivenNameRecognizer
from ultron.privacy.spans import FLAGS, SpanRecognizer, result

# The ~150 most common Chinese surnames (over 85 % of people), minus characters that are far more often a
# word of their own in technical text (和 于 时 文 明 全 应 成 单 路 关 连 申 向 常 安 齐 易 …).
SURNAMES = frozenset(
    "王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐许韩冯邓曹彭曾肖田董袁潘蒋蔡余杜叶程苏魏吕丁任沈"
    "姚卢姜崔钟谭陆汪范金石廖贾夏韦付方白邹孟熊秦邱江尹薛闫段雷侯龙史陶黎贺顾毛郝龚邵万钱严覃武戴莫孔汤"
    "温康施牛樊葛邢乔伍庞颜倪庄聂章鲁岳翟殷詹欧耿兰焦俞左柳甘祝包宁尚符舒阮柯纪梅童凌毕季裴霍涂苗谷盛"
    "曲翁冉骆蓝游辛靳管柴蒙鲍喻祁蒲房滕屈饶牟艾尤穆卓缪褚娄窦戚岑景党宫费卜冷晏席卫柏宗瞿桂佟臧闵苟"
    "邬卞姬仇栾隋刁巫寇桑郎甄丛仲虞敖巩佘池邝"
)
COMPOUND_SURNAMES = frozenset(
    "欧阳 司马 上官 诸葛 东方 皇甫 令狐 慕容 尉迟 长孙 宇文 司徒 夏侯 端木 公孙".split()
)
# Words jieba tags as names that are not (seen on the corpus and in agent chatter).
NOT_NAMES_ZH = frozenset(
    "谢谢 银行卡 脱敏 连接池 哈希 申请人 鉴权 阿里 高可用 高并发 金丝雀 程序员 钱包 马上 温度 "
    "白名单 黄牛 柏林 严师".split()
)
# A name is introduced: "叫小雨", "名叫张伟", "名字是李娜".
_NAMING_CUE = re.compile(r"(?:叫|叫做|名叫|名字是|名字叫|称呼)\s*$")
_NAMED = re.compile(
    r"(?:叫|叫做|名叫|名字是|名字叫)(?P<name>[\u4e00-\u9fff]{2,3})(?=[，,。.！!？?；;、\s]|$)"
)
_NOT_NAMED = re.compile(r"^(?:什么|啥|做|作|好|醒|停|车|外卖)")
# Where jieba's tagger misses a name, a frame finds it: a surname and one or two characters between a
# cue before ("和", "联系", "感谢", ...) or a verb after that only people do ("负责", "请假", "说", ...).
_STRONG_AFTER = r"(?:负责|请假|说|提的|提了|发现|反馈|决定|一起|来了|回复|同意|批准|审批)"
_LEFT = r"(?:和|与|跟|找|联系|同事|感谢|谢谢|客户|用户|是|@|请|让|由|给|问|纪要：|纪要:)"
_RIGHT = r"(?:和|与|跟|处理|的|，|。|、|；|！|？|\s|$)"
_CJK_RUN = re.compile(r"[\u4e00-\u9fff]{2}")
# An honorific after a surname ("王经理", "李老师") points at one person as surely as a full name does.
_TITLES = ("经理", "老师", "总监", "总", "工", "先生", "女士", "同学", "医生", "阿姨", "叔叔", "师傅")


def _surname(word: str) -> int:
    """Length of the surname the word starts with (0: none)."""
    if word[:2] in COMPOUND_SURNAMES:
        return 2
    return 1 if word[:1] in SURNAMES else 0


def chinese_name(word: str, before: str) -> bool:
    """Is this `nr`-tagged word a person's name?"""
    if word in NOT_NAMES_ZH or not 2 <= len(word) <= 4 or not all("\u4e00" <= c <= "\u9fff" for c in word):
        return False
    if _NAMING_CUE.search(before):
        return True
    n = _surname(word)
    if not n:
        return False
    rest = word[n:]
    return bool(rest) and (rest in _TITLES or (len(rest) <= 2 and not _compound_word(word)))


def _frames() -> re.Pattern:
    compound = "|".join(sorted(COMPOUND_SURNAMES))
    name = rf"(?P<name>(?:{compound}|[{''.join(sorted(SURNAMES))}])[\u4e00-\u9fff]{{1,2}}?)"
    return re.compile(
        rf"(?:{_LEFT}{name}(?={_RIGHT}|{_STRONG_AFTER})|{name.replace('name', 'name2')}(?={_STRONG_AFTER}))"
    )


_FRAME = _frames()


def frame_names(text: str) -> list[tuple[int, int]]:
    """Names found by the frames and the naming cue (spans of the name only)."""
    out = []
    for m in _FRAME.finditer(text):
        group = "name" if m.group("name") else "name2"
        if m.group(group) not in NOT_NAMES_ZH and not _compound_word(m.group(group)):
            out.append(m.span(group))
    for m in _NAMED.finditer(text):
        if not _NOT_NAMED.match(m.group("name")):
            out.append(m.span("name"))
    return out


# Texts whose jieba tags ChineseNameRecognizer.tagged keeps, and the longest it keeps.
TAGGED_SIZE = 4096
TAGGED_MAX_CHARS = 4000


class ChineseNameRecognizer(LocalRecognizer):
    """Person names in Chinese text, from jieba's part-of-speech tags."""

    ENTITY = "PERSON"
    _lock = threading.Lock()
    _tokenizer: Any = None
    _tagged: Lru[str, tuple[tuple[str, str], ...]] = Lru(TAGGED_SIZE)

    def __init__(self, language: str):
        super().__init__(
            supported_entities=[self.ENTITY], supported_language=language, name="ChineseNameRecognizer"
        )

    def load(self) -> None:  # noqa: D102
        pass

    @classmethod
    def _posseg(cls) -> Any:
        if cls._tokenizer is None:
            # start-up: jieba loads its dictionary (about a second), only for CJK text
            import jieba
            import jieba.posseg

            jieba.setLogLevel(logging.WARNING)
            cls._tokenizer = jieba.posseg.POSTokenizer(jieba.Tokenizer())
        return cls._tokenizer

    @classmethod
    def tagged(cls, text: str) -> tuple[tuple[str, str], ...]:
        """jieba's (word, part-of-speech flag) pairs for the text. The redactor (names, on an upload's raw
        fields) and the companion's entity links (on the stored fields, the raw ones wherever nothing was
        redacted) tag the same texts: the pairs of the last TAGGED_SIZE texts are kept, so the second
        reader of a text does not tag it again."""
        pairs = cls._tagged.get(text)
        if pairs is None:
            with cls._lock:  # jieba's tokenizers keep state between calls
                pairs = tuple((w.word, w.flag) for w in cls._posseg().cut(text))
            if len(text) <= TAGGED_MAX_CHARS:
                cls._tagged.put(text, pairs)
        return pairs

    @classmethod
    def forget(cls) -> None:
        """Empty the kept tags (benchmarks: each timed upload pays its own tagging)."""
        cls._tagged.clear()

    def analyze(self, text, entities, nlp_artifacts=None):  # noqa: D102
        if self.ENTITY not in entities or not _CJK_RUN.search(text):
            return []
        out, pos, spans = [], 0, []
        for word, flag in self.tagged(text):
            start = text.find(word, pos)
            if start < 0:
                continue
            pos = start + len(word)
            spans.append((start, pos, word, flag))
        for i, (start, end, word, flag) in enumerate(spans):
            if flag not in _NAME_FLAGS:
                continue
            prev = spans[i - 1] if i else None
            nxt = spans[i + 1] if i + 1 < len(spans) else None
            # jieba cuts some names after the surname: 王/秀英 (both tagged nr) is one name.
            if _surname(word) == len(word) and nxt and nxt[0] == end and nxt[3] in _NAME_FLAGS:
                word, end = word + nxt[2], nxt[1]
            before = text[max(0, start - 6) : start]
            if not chinese_name(word, before) or _part_of_longer_noun(prev, start, before):
                continue
            out.append(result(self, self.ENTITY, start, end))
        out += [result(self, self.ENTITY, start, end) for start, end in frame_names(text)]
        return out


_NAME_FLAGS = ("nr", "nrfg", "nrt")
# jieba's tags of a proper noun: a name right after one (贝尔/高姆) is part of a transliterated place or name.
_PROPER_FLAGS = frozenset({"nr", "nrfg", "nrt", "ns", "nz", "nt"})


def _part_of_longer_noun(prev: tuple[int, int, str, str] | None, start: int, before: str) -> bool:
    """贝尔高姆 is cut 贝尔/高姆 and both are tagged names: a proper noun glued before the word (that is
    not itself a person's name or a naming cue) makes it part of a longer one."""
    if prev is None or prev[1] != start or prev[3] not in _PROPER_FLAGS or len(prev[2]) < 2:
        return False
    return not chinese_name(prev[2], "") and not _NAMING_CUE.search(before)


def _compound_word(word: str) -> bool:
    """管弦乐 is 管 + 弦乐 (string music), a surname glued to a common word, not a name: the part after the
    surname is a frequent dictionary word whose tag is not a proper noun (建国 in 王建国 is tagged a place,
    and stays a name)."""
    rest = word[_surname(word) :]
    if len(rest) < 2 or rest in _TITLES:  # 王经理, 周老师: a surname and a title
        return False
    tagger = ChineseNameRecognizer._posseg()
    tagger.tokenizer.check_initialized()
    tag = tagger.word_tag_tab.get(rest)
    return (
        tag is not None
        and tag not in _PROPER_FLAGS
        and tagger.tokenizer.FREQ.get(rest, 0) >= _COMMON_WORD_FREQ
    )


_COMMON_WORD_FREQ = 50


# --- street addresses --------------------------------------------------------------------------------

_EN_STREET = (
    r"Street|St|Avenue|Ave|Road|Rd|Boulevard|Blvd|Lane|Ln|Drive|Dr|Court|Ct|Place|Pl|Way|Terrace|Parkway|"
    r"Pkwy|Square|Sq|Close|Crescent|Highway|Hwy|Strasse|Straße|Gardens|Row|Mews|Hill"
)
EN_ADDRESS = (
    # 12 Baker Street, 221B Baker St., 1600 Amphitheatre Parkway, 350 Fifth Avenue, Apt 4B
    r"(?<![\w.#/-])\d{1,5}[A-Za-z]?(?:-\d{1,4})?,?[ \t]+"
    r"(?:[A-Z][a-z]+[ \t]+|[A-Z]\.[ \t]+|\d{1,3}(?:st|nd|rd|th)[ \t]+){1,3}"
    rf"(?:{_EN_STREET})\b\.?(?:,?[ \t]+(?:Apt|Apartment|Suite|Unit|Flat|Floor)\.?[ \t]*#?\w{{1,5}})?"
)
ZH_ADDRESS = (
    # 北京市朝阳区建国路88号, 上海市浦东新区世纪大道100号3号楼1201室, 杭州市西湖区文三路 478 号
    r"(?:[\u4e00-\u9fff]{2,8}?(?:省|自治区))?(?:[\u4e00-\u9fff]{2,8}?市)?(?:[\u4e00-\u9fff]{1,8}?(?:区|县|镇))?"
    r"[\u4e00-\u9fff]{1,10}?(?:路|街|大街|大道|巷|胡同|弄|里)[ \t]*\d{1,5}[ \t]*(?:号|弄)"
    r"(?:院)?(?:[ \t]*\d{1,4}[ \t]*(?:号楼|栋|幢|单元))*(?:[ \t]*\d{1,5}[ \t]*(?:室|号房))?"
)
# What an address may not start with: words that lead up to it ("我住在", "寄到", "地址是").
_ZH_LEAD = re.compile(r"^(?:.*?(?:住在|住|在|于|到|是|址|：|:))")


class StreetAddressRecognizer(SpanRecognizer):
    """House number and street, in English and Chinese; the city alone is not personal and stays."""

    def __init__(self, language: str):
        super().__init__("STREET_ADDRESS", (EN_ADDRESS, ZH_ADDRESS), language, flags=FLAGS & ~re.ASCII)

    def spans(self, text: str):  # noqa: D102
        for start, end in super().spans(text):
            lead = _ZH_LEAD.match(text[start:end])
            if lead and "\u4e00" <= text[start] <= "\u9fff":
                start += len(lead.group())
            if end > start:
                yield start, end


# --- QQ numbers ----------------------------------------------------------------------------------------

QQ_PATTERNS = (
    # QQ号 123456789, QQ: 123456789, 扣扣 123456, qq号码是 12345678
    r"(?i:qq|扣扣)[ \t]*(?:号码|号|账号|number|no\.?|#)?[ \t]*(?:是|为|:|：|=)?[ \t]*"
    r"(?P<value>[1-9]\d{4,10})(?!\d)",
)


class QQNumberRecognizer(SpanRecognizer):
    def __init__(self, language: str):
        super().__init__("QQ_NUMBER", QQ_PATTERNS, language, flags=FLAGS & ~re.ASCII)


# --- English names a rule can see ------------------------------------------------------------------

_KIN = (
    r"daughter|son|wife|husband|partner|girlfriend|boyfriend|mom|mum|mother|dad|father|sister|brother|"
    r"grandma|grandmother|grandpa|grandfather|aunt|uncle|cousin|niece|nephew|friend|colleague|boss|manager|"
    r"teammate|neighbou?r|kid|baby|dog|cat"
)
# A name is never glued to code after it: "called Option::unwrap()", "called Result.ok()" name nobody.
_NOT_CODE = r"(?![\w(<]|::|\.\w)"
_NAME_WORDS = r"[A-Z][a-z]+(?:[ \t][A-Z][a-z]+)?"
EN_NAMED = (
    rf"(?i:\b(?:my|our|his|her|their)[ \t]+(?:{_KIN}))[ \t]+(?P<value>{_NAME_WORDS}){_NOT_CODE}",
    rf"(?i:\b(?:named|called))[ \t]+(?P<value>{_NAME_WORDS}){_NOT_CODE}",
)


class KinNameRecognizer(SpanRecognizer):
    """ "my daughter Lily", "a colleague called Sam Lee": the words before say a person follows."""

    def __init__(self, language: str):
        super().__init__("PERSON", EN_NAMED, language, flags=FLAGS)


def personal_recognizers(language: str) -> list[LocalRecognizer]:
    return [
        StreetAddressRecognizer(language),
        QQNumberRecognizer(language),
        KinNameRecognizer(language),
        GivenNameRecognizer(language),
    ]
