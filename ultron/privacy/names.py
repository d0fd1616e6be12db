"""When a capitalised English span is a person: the context rules the NER model's PERSON spans must pass in
shared scope, and the given-name and title rules that find full names the small model misses (issue 31).

A small NER model calls almost any capitalised word a person: `Filter:` in an EXPLAIN plan, `Lesson:`, the
imperative `Format your responses`, a heading `## Important Boundaries`, `Altria`, `Yukos Oil`, `Mon-Thu`.
So a span the model calls a person is kept only when the context agrees:

* a word that is a code identifier, a product, a package, a weekday or month, or a company suffix
  (`Oil`, `Inc`, `Holdings`) rules the span out;
* a span whose first word is a known given name (GIVEN_NAMES), or that a person cue surrounds (a title,
  a kin word or `named` before it; a possessive `'s` or a verb only people do after it) is a person;
* otherwise a single word is not (a product, a place, a label, an imperative); two or more words followed
  by a verb ("Xochitl Park flies") are, unless the first is an English word that is no given name
  (WORD_NAMES: "Summer Jones runs" is someone; "Git Bash rewrites", "Cloud Run scales": products); a
  span at the start of a line or sentence, in a heading or before a colon is not when its first word is
  an English word; and a span made only of English words
  (`Important Boundaries`, `Getting Started`) is not anywhere.

English words are the model's own lemmatizer index (WordNet lemmas, shipped inside the model package);
without a model no span reaches these rules.
"""

from __future__ import annotations

import unicodedata

import regex as re
from presidio_analyzer import RecognizerResult

from ultron.privacy.spans import SpanRecognizer

# Given names of many origins (English, Indian, French, Nigerian, Chinese pinyin, Japanese, Spanish,
# Arabic, German, Slavic, ...). Used two ways: a model span starting with one is a person; and
# "<given name> <Surname>" is a person even where the model saw nothing.
GIVEN_NAMES = frozenset(
    # English and international
    "James John Robert Michael William David Richard Joseph Thomas Charles Christopher Daniel Matthew "
    "Anthony Mark Donald Steven Paul Andrew Joshua Kenneth Kevin Brian George Timothy Ronald Edward Jason "
    "Jeffrey Ryan Jacob Gary Nicholas Eric Jonathan Stephen Larry Justin Scott Brandon Benjamin Samuel "
    "Gregory Alexander Frank Patrick Raymond Jack Dennis Jerry Tyler Aaron Henry Adam Douglas Nathan Peter "
    "Zachary Kyle Walter Harold Jeremy Ethan Carl Keith Roger Gerald Christian Terry Sean Arthur Austin "
    "Noah Lawrence Jesse Joe Bryan Billy Jordan Albert Dylan Bruce Willie Gabriel Alan Juan Logan Wayne "
    "Ralph Roy Eugene Randy Vincent Russell Louis Philip Bobby Johnny Bradley Oliver Harry Charlie Oscar "
    "Leo Archie Alfie Freddie Theodore Arlo Callum Connor Liam Owen Rhys Nathaniel Frederick Hugh Rupert "
    "Mary Patricia Jennifer Linda Elizabeth Barbara Susan Jessica Sarah Karen Nancy Lisa Betty Margaret "
    "Sandra Ashley Kimberly Emily Donna Michelle Dorothy Carol Amanda Melissa Deborah Stephanie Rebecca "
    "Sharon Laura Cynthia Kathleen Amy Shirley Angela Helen Anna Brenda Pamela Nicole Emma Samantha "
    "Katherine Christine Debra Rachel Catherine Carolyn Janet Ruth Maria Heather Diane Virginia Julie "
    "Joyce Victoria Olivia Kelly Christina Lauren Joan Evelyn Judith Megan Cheryl Andrea Hannah Martha "
    "Jacqueline Frances Gloria Ann Teresa Kathryn Sara Janice Jean Alice Madison Doris Abigail Julia Judy "
    "Grace Denise Amber Marilyn Beverly Danielle Theresa Sophia Marie Diana Brittany Natalie Isabella "
    "Charlotte Rose Alexis Kayla Amelia Isla Ava Mia Poppy Ella Lily Evie Freya Florence Harriet Imogen "
    "Penelope Eleanor Beatrice Rosalind Matilda Clara Edith Phoebe Lucy Georgia Ruby Holly Zoe Chloe "
    "Lars Sven Erik Nils Astrid Ingrid Freja Hans Klaus Jurgen Stefan Lukas Felix Maximilian Johannes Anja "
    "Katrin Ivan Dmitri Sergei Olga Natasha Anastasia Tatiana Piotr Katarzyna Agnieszka Tomasz Jakub "
    # Short forms
    "Tom Tim Ben Sam Dan Joe Jim Bob Rob Nick Matt Pat Ted Ed Alex Chris Mike Dave Steve Andy Tony Jake "
    "Kate Liz Meg Jen Jess Beth Sue Mel Annie Katie Molly Sally Jenny Becky Nina Tina Jonas Caroline Lena "
    # Indian
    "Priya Arjun Ananya Rohan Kavya Vikram Sneha Aditya Meera Rahul Divya Siddharth Lakshmi Harsh Pooja "
    "Amit Anil Sunil Rajesh Ramesh Suresh Mahesh Ravi Vijay Sanjay Deepak Manoj Ashok Arun Karthik Nikhil "
    "Varun Rohit Vivek Aarav Vihaan Ishaan Aryan Krishna Gopal Prakash Neha Anjali Shreya Swati Kavita "
    "Sunita Anita Rekha Geeta Sita Radha Deepika Aishwarya Nisha Ritu Asha Usha Padma Saanvi Aadhya Diya "
    "Ishita Tanvi Riya Harini Shruti Vidya Aparna Nandini Kiran Sameer Rajiv Naveen Abhishek Gaurav "
    # French
    "Lucas Camille Antoine Mathieu Julien Margaux Juliette Baptiste Hugo Pierre Jacques Jean-Luc "
    "Jean-Pierre Francois Nicolas Guillaume Louis Arthur Raphael Jules Adrien Maxime Thomas Alexandre "
    "Clement Romain Quentin Florian Sebastien Olivier Philippe Christophe Laurent Vincent Manon Ines "
    "Sophie Claire Amelie Aurelie Elodie Oceane Lea Chloe Theo Etienne Mathilde Pauline Marion Lucie Emilie "
    "Celine Sandrine Nathalie Isabelle Brigitte Veronique Genevieve Josephine Margot Capucine Anais "
    # Nigerian and West African
    "Chinedu Ngozi Oluwaseun Chiamaka Emeka Funmilayo Tunde Adaeze Ifeanyi Yetunde Babatunde Nkechi Olumide "
    "Zainab Kelechi Chukwuemeka Obinna Uchenna Chidi Nnamdi Ikenna Amaka Chioma Ifeoma Nneka Adaobi Folake "
    "Bukola Temitope Oluwadamilare Damilola Ayodele Adebayo Olawale Segun Kunle Femi Tolu Tobi Kemi Sade "
    "Bisi Yemi Wale Kwame Kofi Kwabena Ama Akosua Abena Yaw Kojo Adwoa Efua Aminata Fatou Moussa Ousmane "
    "Ibrahima Mamadou Abdoulaye Aliyu Musa Usman Hauwa Aisha Halima Binta Amina Sani Garba Danjuma "
    # Chinese (pinyin given names and common syllable names written alone)
    "Xiuying Wei Min Yang Jing Lei Yan Tao Hao Jun Xiaoming Fang Yue Qiang Ming Hui Xin Ying Li Na Jie "
    "Lin Ling Yu Hong Ping Gang Bo Chen Xiaoyu Xiaohong Jiahui Zihan Yichen Haoran Yuxuan Zixuan Mingyu "
    "Jianguo Jianhua Guoqiang Zhiwei Xiaolong Wenjie Lihua Meiling Shufen Yawen Yiting Weiwei "
    # Japanese
    "Haruto Yui Sota Hina Ren Aoi Takumi Sakura Kenji Yuki Daiki Mei Riku Akari Kaito Hiroshi Takashi "
    "Satoshi Kazuki Yusuke Shota Kenta Naoki Hiroki Ryota Yuto Sho Yuna Yuka Ayaka Misaki Haruka Nanami "
    "Kaori Keiko Yoko Akiko Naomi Emi Rina Saki Miyu Kotone Tsubasa Hayato Souta Itsuki Minato Akira Kenta "
    # Spanish and Portuguese
    "Jose Maria Alejandro Lucia Javier Carmen Diego Sofia Pablo Valentina Andres Isabel Mateo Elena "
    "Santiago Carlos Miguel Luis Jorge Manuel Antonio Francisco Rafael Fernando Sergio Raul Ramon Enrique "
    "Eduardo Ricardo Gonzalo Alvaro Ignacio Adrian Marta Paula Laura Cristina Rocio Pilar Dolores Rosa "
    "Teresa Beatriz Silvia Alba Nerea Ainhoa Ximena Camila Daniela Gabriela Mariana Fernanda Catalina "
    "Joao Pedro Tiago Rodrigo Goncalo Ines Beatriz Leonor Mariana Rafaela Thiago Matheus Gustavo Felipe "
    # Arabic and Persian, Turkish
    "Omar Fatima Yousef Youssef Layla Leila Khalid Amira Tariq Noor Nour Samir Rania Hassan Mariam Ibrahim "
    "Salma Karim Ahmed Ahmad Mohammed Muhammad Mohamed Mahmoud Mustafa Ali Hussein Hamza Bilal Faisal "
    "Walid Ziad Nabil Rami Sami Yasmin Yasmine Dina Huda Hala Lina Rana Reem Sara Mona Nadia Samira Zahra "
    "Abdullah Abdulrahman Saeed Sultan Rashid Majid Fahad Nasser Jamal Adel Hadi Reza Mehdi Arash Darius "
    "Parisa Shirin Mehmet Emre Burak Elif Zeynep Ayse".split()
)
# Given names that are also ordinary English words: alone they prove nothing ("Will you", "Mark as done").
# Or names of languages and tools ("Ruby Gems", "Julia Computing", "Hugo Extended").
AMBIGUOUS_GIVEN = frozenset(
    "Will Mark Grace Rose June April May Faith Hope Joy Bill Art Rich Frank Ruby Julia Hugo Ada "
    "Pascal".split()
)
# Given names that are ordinary English words too, the ambiguous ones and more: before a verb they still
# make a two-word span someone ("Summer Jones runs the team"), where a plain word does not ("Cloud Run
# scales").
WORD_NAMES = AMBIGUOUS_GIVEN | frozenset(
    "Summer Autumn River Sky Hunter Chase Dawn Ivy Iris Daisy Violet Hazel Pearl Drew Ray Dean Victor Rusty "
    "Sunny Robin Jay Gene Earl Guy Rod Max Zephyr Crystal Jasmine Sterling Mason Cliff Dale Glen Grant Lance "
    "Miles Pierce Reed Wade Penny Ginger Misty Luna Stella".split()
)
# Last words of company names: "Yukos Oil", "Tencent Holdings", "Exxon Mobil".
ORG_SUFFIXES = frozenset(
    "Oil Inc Corp Corporation Co Company Ltd LLC PLC GmbH AG SA Group Holdings Bank Motor Motors Airlines "
    "Airways Energy Electronics Industries Steel Cement Systems Labs Technologies Technology Capital "
    "Partners Pharma Pharmaceuticals Foods Mobil Petroleum Gas Telecom Networks Software Solutions "
    "Media Studios Ventures Insurance Financial Logistics Robotics Dynamics Chemicals Mining Power".split()
)
# Capitalised words that are never a person's name here: plan nodes, policy keys, weekdays, months,
# imperatives of agent prompts, package and product names seen in technical text.
TECHNICAL_WORDS = frozenset(
    "Seq Scan Index Bitmap Heap Sort Method Hash Join Nested Loop Filter Cond Recheck Rows Removed Planning "
    "Execution Aggregate Gather Workers Materialize Subquery Append Limit Unique Memoize Buffers "
    "Principal Effect Allow Deny Action Resource Condition Statement Sid Version "
    "Mon Tue Tues Wed Thu Thur Thurs Fri Sat Sun Monday Tuesday Wednesday Thursday Friday Saturday Sunday "
    "Jan Feb Mar Apr Jun Jul Aug Sep Sept Oct Nov Dec January February March July August September "
    "October November December "
    "Lesson Lessons Summary Context Outcome Cause Fix Impact Owner Status Severity Resolution Symptom "
    "Workaround Decision Rationale Reminder Hint Tip Format Respond Answer Cite Keep Prefer Ask Use "
    "Summarize Think Refuse Mention Install Pin Upgrade Upgrading Important Boundaries Boundary "
    "PyYAML SQLAlchemy NumPy SciPy Pillow Jinja Werkzeug Kombu Twisted Sphinx Pygments Mako Tornado "
    "Gunicorn Uvicorn Starlette Matplotlib Pandas Typer Hypothesis Faker Pendulum Babel Celery "
    "Kafka Elasticsearch Datadog PagerDuty Jira Confluence Slack Figma Notion Vault Consul Nomad Snowflake "
    "BigQuery Airflow Looker Tableau Okta Cloudflare Fastly Vercel Netlify Heroku Supabase Alpine".split()
)
_TITLE = r"(?:Mr|Mrs|Ms|Miss|Mx|Dr|Prof|Professor|Dame|Madam|Mme|Mlle|Herr|Frau|Sheikh)\.?"
# A name word: "Maria", "O'Brien", "Jean-Luc", "McAllister", "Al-Sayed", "José", "Ngozi".
NAME_WORD = r"(?:(?:Mc|Mac|O['’]|Al-|El-|D['’])?\p{Lu}\p{Ll}+(?:(?:['’](?!s\b)|-)\p{Lu}?\p{Ll}+)*)"
_TITLE_BEFORE = re.compile(rf"(?:^|[^\w.]){_TITLE}\s+$")
_KIN_BEFORE = re.compile(
    r"(?i:\b(?:my|our|his|her|their)\s+(?:daughter|son|wife|husband|partner|mother|father|sister|brother|"
    r"friend|colleague|boss|manager|teammate)"
    r"|\b(?:named|called|cc|ping|thanks|thank you|dear|hi|hey|hello)),?\s+$"
)
_PERSON_AFTER = re.compile(
    r"^(?:['’]s\b|\s+(?:said|says|asked|asks|told|tells|wrote|writes|replied|thinks|thought|agreed|"
    r"mentioned|explained|suggested|promised|emailed|called|messaged|is on leave|was on leave|"
    r"and (?:I|me|we)\b))"
)
# A finite verb right after a span of two or more words: its subject is someone.
_VERB_AFTER = re.compile(
    r"^[ \t]+(?:(?:will|would|can|could|should|may|might|must|is|was|has|had|did|does)\b|[a-z]+(?:ed|es|s)\b)"
)
# What ends a sentence or a line before a span, so the span's first word is capitalised by position.
_STRUCTURAL_BEFORE = re.compile(r"(?:^|\n)[ \t]*(?:#{1,6}[ \t]+|[-*+>][ \t]+|\d+[.)][ \t]+)?$|[.!?:;][ \t]+$")

_english_words: set[str] = set()


def add_dictionary(words: set[str]) -> None:
    """English words (lowercase lemmas) from a loaded model; a span of such words needs a person cue."""
    _english_words.update(words)


def _fold(word: str) -> str:
    """'José' -> 'Jose': the lexicon is written without accents."""
    return "".join(c for c in unicodedata.normalize("NFD", word) if unicodedata.category(c) != "Mn")


def given_name(word: str) -> bool:
    return _fold(word) in GIVEN_NAMES or _fold(word.split("-")[0]) in GIVEN_NAMES


def english_word(word: str) -> bool:
    """A dictionary word in any common inflection ("Boundaries", "Started", "Getting")."""
    w = word.lower()
    if w in _english_words:
        return True
    for suffix, repl in (
        ("ies", "y"),
        ("es", ""),
        ("s", ""),
        ("ing", ""),
        ("ing", "e"),
        ("ed", ""),
        ("ed", "e"),
    ):
        if w.endswith(suffix) and w[: -len(suffix)] + repl in _english_words:
            return True
    return False


def _technical(word: str) -> bool:
    return word in TECHNICAL_WORDS or any(part in TECHNICAL_WORDS for part in word.split("-"))


def person_in_context(text: str, start: int, end: int, words: list[str]) -> bool:
    """Whether a capitalised span the model calls a person is one, given the words around it."""
    if any(_technical(w) for w in words) or words[-1] in ORG_SUFFIXES:
        return False
    before, after = text[max(0, start - 40) : start], text[end : end + 24]
    # An ambiguous given name counts only before a surname that is no English word: "Ruby Gems" is not.
    ambiguous = words[0] in AMBIGUOUS_GIVEN and (len(words) == 1 or english_word(words[-1]))
    first_given = given_name(words[0]) and not ambiguous
    if (
        first_given
        or _TITLE_BEFORE.search(before)
        or _KIN_BEFORE.search(before)
        or _PERSON_AFTER.match(after)
    ):
        return True
    if len(words) == 1:
        return False
    if _VERB_AFTER.match(after) and (not english_word(words[0]) or words[0] in WORD_NAMES):
        # "Xochitl Park flies to Lisbon", "Bill Gates founded": two name words doing something. A span
        # whose first word is a plain English word ("Git Bash rewrites", "Cloud Run scales") is a product.
        return True
    structural = bool(_STRUCTURAL_BEFORE.search(before)) or after.startswith(":") or _in_heading(text, start)
    if structural and english_word(words[0]):
        return False
    return not all(english_word(w) for w in words)


def _in_heading(text: str, start: int) -> bool:
    line_start = text.rfind("\n", 0, start) + 1
    return text[line_start:start].lstrip().startswith("#")


# Chinese names in pinyin come surname first: "Zhang Min", "Sun Li", "Ouyang Nana". A common surname then
# one or two pinyin syllables is a person (both words are pinyin, so "Sun" and "Jun" are not weekdays or
# months here). "He" is left out: it starts too many English sentences.
PINYIN_SURNAMES = frozenset(
    "Wang Li Zhang Liu Chen Yang Huang Zhao Wu Zhou Xu Sun Ma Zhu Hu Guo Lin Luo Zheng Liang Xie Song Tang "
    "Han Feng Deng Cao Peng Zeng Xiao Tian Dong Yuan Pan Jiang Cai Yu Du Ye Cheng Su Wei Lu Ding Ren Shen "
    "Yao Cui Zhong Tan Jin Shi Liao Jia Xia Fu Fang Bai Zou Meng Xiong Qin Qiu Yin Xue Yan Duan Lei Hou "
    "Long Tao Gu Mao Hao Gong Shao Wan Qian Dai Mo Kong Kang Niu Ge Xing Qiao Wen Ouyang Sima Zhuge Situ "
    "Shangguan Murong".split()
)
_SYLLABLE = (
    r"(?:zh|ch|sh|[bpmfdtnlgkhjqxrzcsyw])?"
    r"(?:iang|iong|uang|ang|eng|ing|ong|ian|iao|uai|uan|ai|ei|ao|ou|an|en|in|un|ia|ie|iu|ua|uo|ui|ue|er|a|o|e|i|u)"
)
_PINYIN_GIVEN = re.compile(rf"^(?:{_SYLLABLE}){{1,2}}$")


def pinyin_name(surname: str, given: str) -> bool:
    return surname in PINYIN_SURNAMES and bool(_PINYIN_GIVEN.match(given.lower()))


# Whole words only, never glued to code (`.`, `_`, `@`, `/`, `-`).
_OPEN = r"(?<![\p{L}\p{N}_.@/\\-])"
_CLOSE = r"(?![\p{L}\p{N}_@/\\-]|\.\w)"


class GivenNameRecognizer(SpanRecognizer):
    """ "Penelope Fairweather", "Zhang Min", "Dr. Adeyemi", "Ms. Li": a known given name and a capitalised
    surname, a pinyin surname and given name, or a title and one or two name words. The small model misses
    many full names of origins it saw little of; these shapes are people wherever they stand."""

    PATTERNS = (
        rf"{_OPEN}(?P<value>{NAME_WORD}[ \t]+{NAME_WORD}){_CLOSE}",
        rf"{_OPEN}{_TITLE}[ \t]+(?P<value>{NAME_WORD}(?:[ \t]+{NAME_WORD})?){_CLOSE}",
    )

    def __init__(self, language: str):
        super().__init__("PERSON", self.PATTERNS, language, flags=re.MULTILINE)

    def analyze(self, text, entities, nlp_artifacts=None, regex_flags=None):  # noqa: D102
        out: list[RecognizerResult] = []
        for i, compiled in enumerate(self._compiled):
            for m in compiled.finditer(text, overlapped=True):
                start, end = m.span("value")
                words = m.group("value").split()
                if i == 0 and pinyin_name(*words):
                    out.append(self.result(start, end))
                    continue
                if i == 0 and not self._full_name(words):
                    continue
                if any(_technical(w) and not given_name(w) for w in words) or words[-1] in ORG_SUFFIXES:
                    continue
                out.append(self.result(start, end))
        return out

    @staticmethod
    def _full_name(words: list[str]) -> bool:
        given, surname = words
        if not given_name(given):
            return False
        # "Will Send", "Mark Done": a given name that is also a word needs a surname that is not one.
        return not (given in AMBIGUOUS_GIVEN and english_word(surname))
