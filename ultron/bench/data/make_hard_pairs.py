"""Build the hard-negative dedup set `dedup_hard_pairs.jsonl` by rule.

`python -m ultron.bench.data.make_hard_pairs` rewrites it.

Each template is a real-looking sentence (news, sport, personal facts, coding errors, questions; English
and Chinese) with typed slots, its own rewording (a true paraphrase written by hand) and, where it has
one, its negation. Each template is filled four times from the slot pools; each filled sentence (a
*base*) gives pairs by rule:

- paraphrase: the hand-written rewording (duplicate)
- surface: punctuation, contractions, 了/过 particles, spacing (duplicate)
- swap_entities: two names of one class swapped (who beat whom, from where to where)
- swap_roles: two common nouns swapped (subject and object)
- change_name / change_number / change_date / change_version: one slot refilled
- negate: the negated sentence
- question_object: a question about another object

The held-out split is chosen by template (every base of a template lies in one split), so no sentence
shape tuned on is reported on. Deterministic: a fixed seed, the output committed.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from pathlib import Path
from typing import Any

SEED = 31
FILLS = 4
OUT = Path(__file__).with_name("dedup_hard_pairs.jsonl")
DUPLICATE_KINDS = ("paraphrase", "surface")
KINDS = (
    *DUPLICATE_KINDS,
    "swap_entities",
    "swap_roles",
    "change_name",
    "change_number",
    "change_date",
    "change_version",
    "negate",
    "question_object",
)

POOLS: dict[str, dict[str, list[str]]] = {
    "en": {
        "person": [
            "Priya Raman",
            "Lucas Moreau",
            "Maria Santos",
            "Tom Becker",
            "Aiko Tanaka",
            "Omar Haddad",
            "Elena Petrova",
            "James Okafor",
            "Sofia Lindqvist",
            "Daniel Cohen",
        ],
        "city": [
            "London",
            "Berlin",
            "Lisbon",
            "Nairobi",
            "Toronto",
            "Osaka",
            "Madrid",
            "Cape Town",
            "Dublin",
            "Melbourne",
        ],
        "club": [
            "Arsenal",
            "Ajax",
            "Sevilla",
            "Valencia",
            "Porto",
            "Celtic",
            "Juventus",
            "Benfica",
            "Feyenoord",
            "Galatasaray",
        ],
        "country": [
            "Spain",
            "Kenya",
            "Canada",
            "Japan",
            "Brazil",
            "Norway",
            "Egypt",
            "Chile",
            "Portugal",
            "Vietnam",
        ],
        "company": ["Siemens", "Nokia", "Spotify", "Shopify", "Airbus", "Philips", "Ericsson", "Unilever"],
        "package": [
            "pandas",
            "numpy",
            "requests",
            "flask",
            "django",
            "pytest",
            "sqlalchemy",
            "celery",
            "pydantic",
            "httpx",
        ],
        "version": ["1.4.2", "2.0.1", "3.11.4", "0.9.8", "4.2.0", "5.1.3"],
        "num": ["2", "3", "4", "5", "6", "7", "8", "9", "12", "15"],
        "pct": ["38%", "41%", "44%", "47%", "52%", "55%", "58%", "61%"],
        "year": ["2014", "2016", "2017", "2018", "2019", "2020", "2021", "2022"],
        "month": ["January", "March", "April", "June", "August", "October", "November", "December"],
        "weekday": ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"],
        "animal": ["dog", "cat", "fox", "horse", "goat", "rabbit"],
        "role": ["teacher", "student", "doctor", "patient", "manager", "intern"],
        "food": ["peanuts", "shellfish", "strawberries", "gluten", "eggs", "milk"],
        "thing": ["a centipede", "a jellyfish", "a scorpion", "a wasp", "a spider", "a sea urchin"],
    },
    "zh": {
        "person": ["张伟", "李娜", "王芳", "刘洋", "陈静", "赵磊", "孙丽", "周杰", "吴敏", "郑浩"],
        "city": ["北京", "上海", "广州", "成都", "杭州", "武汉", "西安", "南京", "重庆", "厦门"],
        "club": [
            "山东泰山",
            "北京国安",
            "上海海港",
            "成都蓉城",
            "浙江队",
            "河南队",
            "天津津门虎",
            "长春亚泰",
        ],
        "country": ["日本", "巴西", "德国", "法国", "韩国", "埃及", "泰国", "加拿大"],
        "company": ["华为", "小米", "腾讯", "百度", "京东", "美团", "网易", "比亚迪"],
        "package": ["pandas", "numpy", "requests", "flask", "django", "pytest", "sqlalchemy", "celery"],
        "version": ["1.4.2", "2.0.1", "3.11.4", "0.9.8", "4.2.0", "5.1.3"],
        "num": ["三", "四", "五", "六", "七", "八", "九", "十"],
        "digits": ["3", "4", "5", "6", "7", "8", "12", "15"],
        "year": ["2014", "2016", "2017", "2018", "2019", "2020", "2021", "2022"],
        "weekday": ["周一", "周二", "周三", "周四", "周五", "周六"],
        "animal": ["狗", "猫", "狐狸", "马", "山羊", "兔子"],
        "role": ["老师", "学生", "医生", "病人", "经理", "实习生"],
        "food": ["花生", "海鲜", "草莓", "牛奶", "鸡蛋", "芒果"],
        "thing": ["蜈蚣", "水母", "蝎子", "马蜂", "蜘蛛", "海胆"],
    },
}

# (id, text, hand-written paraphrase, negation or ""); slots {class1}, {class2} of POOLS' classes.
TEMPLATES: dict[str, list[tuple[str, str, str, str]]] = {
    "en": [
        (
            "sport-final",
            "{club1} beat {club2} {num1}-1 in the cup final on {weekday1}.",
            "{club1} beat {club2} {num1}-1 in {weekday1}'s cup final.",
            "{club1} did not beat {club2} {num1}-1 in the cup final on {weekday1}.",
        ),
        (
            "sport-transfer",
            "{person1} left {club1} for {club2} in {month1} {year1}.",
            "In {month1} {year1}, {person1} left {club1} for {club2}.",
            "",
        ),
        (
            "sport-countries",
            "{club1}, a club from {country1}, knocked out {club2}, a club from {country2}.",
            "{club1}, a club from {country1}, eliminated {club2}, a club from {country2}.",
            "",
        ),
        (
            "sport-coach",
            "{person1} replaced {person2} as head coach of {club1} after {num1} defeats.",
            "After {num1} defeats, {person1} replaced {person2} as head coach of {club1}.",
            "",
        ),
        (
            "news-election",
            "{person1} won {pct1} of the vote and {person2} won {pct2}.",
            "{person1} took {pct1} of the vote, while {person2} took {pct2}.",
            "",
        ),
        (
            "news-moved",
            "{person1} moved to {city1} in {year1} and later returned to {city2}.",
            "In {year1} {person1} moved to {city1} and later went back to {city2}.",
            "",
        ),
        (
            "news-acquire",
            "{company1} agreed to buy {company2} for {num1} billion dollars in {year1}.",
            "In {year1}, {company1} agreed to acquire {company2} for {num1} billion dollars.",
            "{company1} did not agree to buy {company2} for {num1} billion dollars in {year1}.",
        ),
        (
            "news-flight",
            "The flight from {city1} to {city2} was delayed by {num1} hours on {weekday1}.",
            "On {weekday1}, the flight from {city1} to {city2} was delayed by {num1} hours.",
            "The flight from {city1} to {city2} was not delayed on {weekday1}.",
        ),
        (
            "news-summit",
            "Leaders of {country1} and {country2} met in {city1} on {month1} {num1}.",
            "On {month1} {num1}, the leaders of {country1} and {country2} met in {city1}.",
            "",
        ),
        (
            "news-export",
            "{country1} exports more coffee to {country2} than it did in {year1}.",
            "{country1} now exports more coffee to {country2} than in {year1}.",
            "{country1} does not export more coffee to {country2} than it did in {year1}.",
        ),
        (
            "news-ceo",
            "{person1} succeeded {person2} as chief executive of {company1} in {year1}.",
            "In {year1}, {person1} succeeded {person2} as {company1}'s chief executive.",
            "",
        ),
        (
            "news-lawsuit",
            "{company1} sued {company2} over a patent on battery cooling.",
            "{company1} took {company2} to court over a battery cooling patent.",
            "{company1} never sued {company2} over a patent on battery cooling.",
        ),
        (
            "life-sister",
            "My sister lives in {city1} and my brother lives in {city2}.",
            "My sister lives in {city1}, and my brother lives in {city2}.",
            "",
        ),
        (
            "life-allergy",
            "I am allergic to {food1} but I can eat {food2}.",
            "I'm allergic to {food1}, but I can eat {food2}.",
            "",
        ),
        (
            "life-birthday",
            "My daughter turns {num1} in {month1} and we are planning a party.",
            "My daughter will be {num1} in {month1}, and we're planning a party.",
            "My daughter turns {num1} in {month1} and we are not planning a party.",
        ),
        (
            "life-move",
            "We moved from {city1} to {city2} when I was {num1}.",
            "When I was {num1}, we moved from {city1} to {city2}.",
            "",
        ),
        (
            "life-pet",
            "The {animal1} chased the {animal2} around the garden this morning.",
            "This morning the {animal1} chased the {animal2} around the garden.",
            "The {animal1} did not chase the {animal2} around the garden this morning.",
        ),
        (
            "life-meeting",
            "The {role1} called the {role2} on {weekday1} about the test results.",
            "On {weekday1} the {role1} called the {role2} about the test results.",
            "The {role1} did not call the {role2} on {weekday1} about the test results.",
        ),
        (
            "life-run",
            "I ran {num1} kilometres on {weekday1} with {person1}.",
            "On {weekday1} I ran {num1} kilometres with {person1}.",
            "I did not run {num1} kilometres on {weekday1} with {person1}.",
        ),
        (
            "life-job",
            "{person1} works as a nurse in {city1} and studies law in {city2}.",
            "{person1} works as a nurse in {city1} and is studying law in {city2}.",
            "",
        ),
        (
            "code-import",
            "ImportError: cannot import name 'Session' from {package1} after upgrading to {version1}.",
            "After the upgrade to {version1}, importing 'Session' from {package1} fails with ImportError.",
            "",
        ),
        (
            "code-pin",
            "Pin {package1} to {version1} because {package2} breaks with the newer release.",
            "Pin {package1} at {version1}: {package2} breaks with the newer release.",
            "Do not pin {package1} to {version1} because {package2} breaks with the newer release.",
        ),
        (
            "code-replaced",
            "We replaced {package1} with {package2} in the ingestion service.",
            "In the ingestion service, we replaced {package1} with {package2}.",
            "We did not replace {package1} with {package2} in the ingestion service.",
        ),
        (
            "code-workers",
            "The job queue runs {num1} workers and retries a failed task {num2} times.",
            "The job queue runs {num1} workers, and a failed task is retried {num2} times.",
            "",
        ),
        (
            "code-timeout",
            "The API gateway times out after {num1} seconds when the database has more than {num2} "
            "connections.",
            "When the database has more than {num2} connections, the API gateway times out after {num1} "
            "seconds.",
            "",
        ),
        (
            "code-cache",
            "Caching is enabled in staging but disabled in production.",
            "Caching is on in staging but off in production.",
            "",
        ),
        (
            "code-deploy",
            "The deploy on {weekday1} rolled back {package1} to {version1}.",
            "On {weekday1} the deploy rolled {package1} back to {version1}.",
            "The deploy on {weekday1} did not roll back {package1} to {version1}.",
        ),
        (
            "code-migrate",
            "{person1} migrated the reports from {package1} to {package2} last sprint.",
            "Last sprint {person1} migrated the reports from {package1} to {package2}.",
            "",
        ),
        ("q-poison", "Is eating {thing1} poisonous?", "Is it poisonous to eat {thing1}?", ""),
        ("q-who", "Who is this in the photo, {person1}?", "Who's this in the photo, {person1}?", ""),
        ("q-capital", "What is the capital of {country1}?", "What's the capital of {country1}?", ""),
        (
            "q-install",
            "How do I install {package1} on Windows?",
            "How can I install {package1} on Windows?",
            "",
        ),
        (
            "q-flight",
            "How long is the flight from {city1} to {city2}?",
            "How long does the flight from {city1} to {city2} take?",
            "",
        ),
        ("q-match", "Did {club1} beat {club2} last season?", "Did {club1} beat {club2} last season ?", ""),
        (
            "q-allergy",
            "Can a child who is allergic to {food1} eat {food2}?",
            "Can a kid who is allergic to {food1} eat {food2}?",
            "",
        ),
        (
            "q-convert",
            "How do I convert a {package1} dataframe to a list?",
            "How can I convert a {package1} dataframe into a list?",
            "",
        ),
    ],
    "zh": [
        (
            "sport-final",
            "{club1}在{weekday1}的足协杯决赛中击败了{club2}。",
            "{weekday1}的足协杯决赛，{club1}击败了{club2}。",
            "{club1}在{weekday1}的足协杯决赛中没有击败{club2}。",
        ),
        (
            "sport-transfer",
            "{person1}在{year1}年从{club1}转会到了{club2}。",
            "{year1}年，{person1}从{club1}转会到{club2}。",
            "",
        ),
        (
            "sport-score",
            "{club1}以{digits1}比1战胜了{club2}。",
            "{club1}{digits1}比1战胜{club2}。",
            "{club1}没有以{digits1}比1战胜{club2}。",
        ),
        (
            "sport-coach",
            "{person1}接替{person2}成为{club1}的主教练。",
            "{person1}接替了{person2}，成为{club1}的主教练。",
            "",
        ),
        (
            "news-moved",
            "{person1}{year1}年搬到{city1}，后来又回到了{city2}。",
            "{year1}年{person1}搬去了{city1}，后来又回到{city2}。",
            "",
        ),
        (
            "news-acquire",
            "{company1}宣布以{digits1}亿元收购{company2}。",
            "{company1}宣布将以{digits1}亿元收购{company2}。",
            "{company1}没有宣布以{digits1}亿元收购{company2}。",
        ),
        (
            "news-flight",
            "从{city1}飞往{city2}的航班在{weekday1}延误了{num1}个小时。",
            "{weekday1}，从{city1}飞往{city2}的航班延误了{num1}个小时。",
            "从{city1}飞往{city2}的航班在{weekday1}没有延误。",
        ),
        (
            "news-visit",
            "{country1}总理访问了{country2}，双方签署了贸易协议。",
            "{country1}总理访问{country2}，双方签署了贸易协议。",
            "{country1}总理访问了{country2}，双方没有签署贸易协议。",
        ),
        (
            "news-export",
            "{country1}向{country2}出口的汽车比{year1}年多了。",
            "{country1}对{country2}的汽车出口比{year1}年多了。",
            "{country1}向{country2}出口的汽车没有比{year1}年多。",
        ),
        (
            "news-ceo",
            "{person1}在{year1}年接替{person2}担任{company1}的首席执行官。",
            "{year1}年，{person1}接替{person2}担任{company1}首席执行官。",
            "",
        ),
        (
            "news-sue",
            "{company1}起诉了{company2}侵犯专利。",
            "{company1}起诉{company2}侵犯了专利。",
            "{company1}没有起诉{company2}侵犯专利。",
        ),
        ("life-sister", "我姐姐住在{city1}，我哥哥住在{city2}。", "我姐姐住{city1}，我哥哥住{city2}。", ""),
        ("life-allergy", "我对{food1}过敏，但是可以吃{food2}。", "我对{food1}过敏，不过可以吃{food2}。", ""),
        (
            "life-birthday",
            "我女儿{num1}月份过{digits1}岁生日。",
            "我女儿{num1}月份要过{digits1}岁生日了。",
            "",
        ),
        ("life-move", "我们家{year1}年从{city1}搬到了{city2}。", "{year1}年我们家从{city1}搬到{city2}。", ""),
        (
            "life-pet",
            "早上{animal1}在院子里追{animal2}。",
            "早上{animal1}在院子里追着{animal2}跑。",
            "早上{animal1}没有在院子里追{animal2}。",
        ),
        (
            "life-call",
            "{role1}{weekday1}给{role2}打电话说了检查结果。",
            "{weekday1}{role1}给{role2}打电话说了检查结果。",
            "{role1}{weekday1}没有给{role2}打电话说检查结果。",
        ),
        (
            "life-run",
            "我{weekday1}和{person1}一起跑了{digits1}公里。",
            "{weekday1}我和{person1}一起跑了{digits1}公里。",
            "我{weekday1}没有和{person1}一起跑{digits1}公里。",
        ),
        ("life-buy", "我在超市买了{num1}个苹果和两瓶牛奶。", "我在超市买了{num1}个苹果、两瓶牛奶。", ""),
        (
            "code-import",
            "升级到{version1}之后，从{package1}导入Session报ImportError。",
            "升级{version1}以后，从{package1}导入Session时报ImportError。",
            "",
        ),
        (
            "code-pin",
            "把{package1}固定在{version1}，因为{package2}和新版本不兼容。",
            "{package1}要固定在{version1}，因为{package2}与新版本不兼容。",
            "不要把{package1}固定在{version1}，因为{package2}和新版本不兼容。",
        ),
        (
            "code-replaced",
            "我们在数据接入服务里用{package2}替换了{package1}。",
            "数据接入服务里，我们用{package2}替换了{package1}。",
            "我们在数据接入服务里没有用{package2}替换{package1}。",
        ),
        (
            "code-workers",
            "任务队列开了{digits1}个worker，失败的任务重试{digits2}次。",
            "任务队列有{digits1}个worker，失败任务会重试{digits2}次。",
            "",
        ),
        (
            "code-cache",
            "预发环境开启了缓存，生产环境关闭了缓存。",
            "预发环境开了缓存，生产环境关了缓存。",
            "",
        ),
        (
            "code-deploy",
            "{weekday1}的发布把{package1}回滚到了{version1}。",
            "{weekday1}发布时把{package1}回滚到{version1}。",
            "{weekday1}的发布没有把{package1}回滚到{version1}。",
        ),
        (
            "code-migrate",
            "{person1}上个迭代把报表从{package1}迁移到了{package2}。",
            "上个迭代{person1}把报表从{package1}迁到了{package2}。",
            "",
        ),
        ("q-poison", "被{thing1}咬了有毒吗？", "被{thing1}咬了会中毒吗？", ""),
        ("q-who", "照片里这个人是{person1}吗？", "照片里的这个人是{person1}吗？", ""),
        ("q-capital", "{country1}的首都是哪里？", "{country1}的首都是哪儿？", ""),
        ("q-install", "在Windows上怎么安装{package1}？", "Windows上怎么安装{package1}？", ""),
        ("q-flight", "从{city1}坐飞机到{city2}要多久？", "从{city1}坐飞机去{city2}要多久？", ""),
        ("q-allergy", "对{food1}过敏的孩子能吃{food2}吗？", "对{food1}过敏的小孩能吃{food2}吗？", ""),
    ],
}

_SLOT = re.compile(r"\{([a-z]+)(\d)\}")
_CONTRACTIONS = [
    ("do not", "don't"),
    ("did not", "didn't"),
    ("does not", "doesn't"),
    ("I am", "I'm"),
    ("we are", "we're"),
    ("is not", "isn't"),
    ("What is", "What's"),
    ("Who is", "Who's"),
]
_CLASS_KIND = {
    "num": "change_number",
    "digits": "change_number",
    "pct": "change_number",
    "year": "change_date",
    "month": "change_date",
    "weekday": "change_date",
    "version": "change_version",
}
_ROLE_CLASSES = ("animal", "role", "food")


def _surface(text: str, lang: str) -> str:
    """A rewording by rule that keeps the fact: punctuation, contractions, particles."""
    if lang == "en":
        for long, short in _CONTRACTIONS:
            if long in text:
                return text.replace(long, short, 1)
            if short in text:
                return text.replace(short, long, 1)
        return text[:-1] + " !" if text.endswith(".") else text.rstrip("?") + " ?"
    if text.endswith("。"):
        return text[:-1] + "！" if "了" not in text else text.replace("了", "", 1)
    return text.replace("？", "?")


def _fill(template: str, values: dict[str, str]) -> str:
    return _SLOT.sub(lambda m: values[m.group(1) + m.group(2)], template)


def split_of(template_id: str, lang: str) -> str:
    """'dev' or 'heldout', fixed by the template (every base of one template lies in one split)."""
    return "dev" if hashlib.sha256(f"{lang}:{template_id}".encode()).digest()[0] % 2 == 0 else "heldout"


def build(seed: int = SEED) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    pairs: list[dict[str, Any]] = []
    for lang, templates in TEMPLATES.items():
        pools = POOLS[lang]
        for tid, text, para, neg in templates:
            slots = sorted(set(_SLOT.findall(text)))
            for fill in range(FILLS):
                values: dict[str, str] = {}
                for cls in sorted({c for c, _ in slots}):
                    picked = rng.sample(pools[cls], sum(1 for c, _ in slots if c == cls))
                    for (c, n), v in zip([s for s in slots if s[0] == cls], picked, strict=True):
                        values[c + n] = v
                base = _fill(text, values)
                out: list[tuple[str, str]] = [("paraphrase", _fill(para, values))]
                surface = _surface(base, lang)
                if surface != base:
                    out.append(("surface", surface))
                if neg:
                    out.append(("negate", _fill(neg, values)))
                classes = [c for c, _ in slots]
                for cls in sorted(set(classes)):
                    if classes.count(cls) == 2:
                        swapped = {**values, cls + "1": values[cls + "2"], cls + "2": values[cls + "1"]}
                        kind = "swap_roles" if cls in _ROLE_CLASSES else "swap_entities"
                        out.append((kind, _fill(text, swapped)))
                cls = classes[rng.randrange(len(classes))] if classes else None
                if cls is not None:
                    other = rng.choice([v for v in pools[cls] if v not in values.values()])
                    kind = "question_object" if tid.startswith("q-") else _CLASS_KIND.get(cls, "change_name")
                    out.append((kind, _fill(text, {**values, cls + "1": other})))
                for n, (kind, b) in enumerate(out):
                    pairs.append(
                        {
                            "id": f"{lang}-{tid}-{fill}-{n}",
                            "lang": lang,
                            "label": "duplicate" if kind in DUPLICATE_KINDS else "distinct",
                            "kind": kind,
                            "base": f"{lang}-{tid}-{fill}",
                            "template": f"{lang}-{tid}",
                            "split": split_of(tid, lang),
                            "a": {"content": base},
                            "b": {"content": b},
                        }
                    )
    return pairs


def main() -> None:
    pairs = build()
    with OUT.open("w", encoding="utf-8") as fh:
        for pair in pairs:
            fh.write(json.dumps(pair, ensure_ascii=False) + "\n")
    print(f"wrote {len(pairs)} pairs to {OUT}")


if __name__ == "__main__":
    main()
