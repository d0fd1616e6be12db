"""Generate tests/data/redaction_corpus.jsonl: labelled agent material for the redaction evaluation.

    python tests/data/make_redaction_corpus.py            # rewrites the JSONL next to this file

Each snippet is {"id", "lang", "kind", "text", "entities": [{"type", "value"}]}. A snippet with no entities
must come out of the redactor byte-identical; planted values must disappear behind the right placeholder.
Families below mix planted secrets and PII with the technical noise that must survive (UUIDs, hashes,
epoch timestamps, pod names, versions, ports, loopback addresses) and with hard negatives (order ids,
checksum-failing ids and cards, `sk-learn`, masked keys, prose about passwords).
"""

# ruff: noqa: E501  (snippet templates are data: one realistic line each reads better unwrapped)

from __future__ import annotations

import json
import random
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import corpus_values as cv  # noqa: E402

SEED = 20240612
OUT = Path(__file__).resolve().parent / "redaction_corpus.jsonl"


class S:
    """One snippet under construction: each planting method records the value it returns."""

    def __init__(self, rng: random.Random, index: int = 0):
        self.rng = rng
        self.index = index
        self.entities: list[dict[str, str]] = []

    def pick(self, options: list):
        """Variants in turn, so every variant of a family is in the corpus."""
        return options[self.index % len(options)]

    def plant(self, entity: str, value: str) -> str:
        if {"type": entity, "value": value} not in self.entities:
            self.entities.append({"type": entity, "value": value})
        return value

    def llm(self) -> str:
        return self.plant("LLM_API_KEY", cv.llm_key(self.rng))

    def dashscope(self) -> str:
        return self.plant("LLM_API_KEY", "sk-" + cv.rand_hex(self.rng, 32))

    def gh(self) -> str:
        return self.plant("GITHUB_TOKEN", cv.github_token(self.rng))

    def akia(self) -> str:
        return self.plant("AWS_ACCESS_KEY", cv.aws_access_key(self.rng))

    def aws_secret(self) -> str:
        return self.plant("AWS_SECRET_KEY", cv.aws_secret_key(self.rng))

    def token(self) -> str:
        return self.plant("REDACTED_TOKEN", cv.opaque_token(self.rng))

    def basic(self) -> str:
        return self.plant("REDACTED_TOKEN", cv.basic_auth(self.rng))

    def cred(self, value: str | None = None) -> str:
        return self.plant("REDACTED_CREDENTIAL", value or cv.password(self.rng))

    def cred_token(self) -> str:
        return self.plant("REDACTED_CREDENTIAL", cv.opaque_token(self.rng))

    def pem(self, newline: str = "\n") -> str:
        return self.plant("PRIVATE_KEY", cv.private_key(self.rng, newline))

    def jwt(self) -> str:
        return self.plant("JWT", cv.jwt(self.rng))

    def dbpw(self) -> str:
        return self.plant("DB_URL_PASSWORD", cv.db_password(self.rng))

    def email(self) -> str:
        return self.plant("EMAIL_ADDRESS", cv.email(self.rng))

    def phone(self) -> str:
        return self.plant("PHONE_NUMBER", cv.intl_phone(self.rng))

    def cn_phone(self, fmt: str | None = None) -> str:
        return self.plant("PHONE_NUMBER", cv.cn_mobile(self.rng, fmt))

    def landline(self) -> str:
        return self.plant("PHONE_NUMBER", cv.cn_landline(self.rng))

    def card(self) -> str:
        return self.plant("CREDIT_CARD", cv.credit_card(self.rng))

    def ip(self) -> str:
        return self.plant("IP_ADDRESS", cv.public_ipv4(self.rng))

    def private_ip(self) -> str:
        return self.plant("IP_ADDRESS", cv.private_ipv4(self.rng))

    def ip6(self) -> str:
        return self.plant("IP_ADDRESS", cv.ipv6(self.rng))

    def iban(self) -> str:
        return self.plant("IBAN_CODE", cv.iban(self.rng))

    def wallet(self) -> str:
        return self.plant("CRYPTO", cv.crypto_wallet(self.rng))

    def cn_id(self) -> str:
        return self.plant("CN_RESIDENT_ID", cv.cn_resident_id(self.rng))

    def user(self) -> str:
        return self.plant("USER", cv.username(self.rng))


# ---------------------------------------------------------------------------------------------------------
# English material with secrets
# ---------------------------------------------------------------------------------------------------------


def env_file(s: S) -> tuple[str, str, str]:
    r = s.rng
    secret_lines = [
        lambda: f"OPENAI_API_KEY={s.llm()}",
        lambda: f"DASHSCOPE_API_KEY={s.dashscope()}",
        lambda: f"DATABASE_URL=postgresql://ultron:{s.dbpw()}@db-prod.internal:5432/ultron",
        lambda: f"AWS_ACCESS_KEY_ID={s.akia()}\nAWS_SECRET_ACCESS_KEY={s.aws_secret()}",
        lambda: f"GITHUB_TOKEN={s.gh()}",
        lambda: f"REDIS_PASSWORD={s.cred()}",
        lambda: f"JWT_SECRET={s.cred(cv.mixed(r, 48))}",
        lambda: f"SLACK_BOT_TOKEN={s.cred_token()}",
        lambda: f"STRIPE_SECRET_KEY={s.cred('sk_live_' + cv.mixed(r, 24))}",
        lambda: f"export PGPASSWORD='{s.cred()}'",
        lambda: f'SMTP_PASSWORD="{s.cred()}"',
        lambda: (
            f"SENTRY_DSN=https://{cv.rand_hex(r, 32)}@o{r.randint(10000, 99999)}.ingest.sentry.io/{r.randint(1000000, 9999999)}"
        ),
    ]
    benign = [
        "PORT=8080",
        "LOG_LEVEL=info",
        f"MAX_TOKENS={r.choice([1024, 2048, 4096])}",
        "TOKENIZER=cl100k_base",
        "NODE_ENV=production",
        f"APP_VERSION={cv.version(r)}",
        f"REQUEST_TIMEOUT_MS={r.choice([3000, 15000, 30000])}",
        "EMBEDDING_MODEL=text-embedding-v3",
        f"BUILD_SHA={cv.sha(r, 12)}",
        "PASSWORD_MIN_LENGTH=12",
        "TOKEN_TTL_SECONDS=3600",
        "REDIS_URL=redis://localhost:6379/0",
    ]
    lines = [f() for f in r.sample(secret_lines, r.randint(2, 4))] + r.sample(benign, r.randint(2, 4))
    r.shuffle(lines)
    header = r.choice(["# .env.production", "# generated by deploy script, do not commit", "$ cat .env", ""])
    return "en", "config", (header + "\n" if header else "") + "\n".join(lines)


def yaml_config(s: S) -> tuple[str, str, str]:
    r = s.rng
    blocks = [
        lambda: f'database:\n  host: db.internal\n  port: 5432\n  user: app\n  password: "{s.cred()}"',
        lambda: f"llm:\n  provider: openai\n  model: gpt-4o-mini\n  api_key: {s.llm()}\n  max_tokens: 2048",
        lambda: f'dashscope:\n  api_key: "{s.dashscope()}"\n  model: qwen-plus',
        lambda: f"cache:\n  url: redis://:{s.dbpw()}@redis-master.cache.svc:6379/0",
        lambda: f"github:\n  token: {s.gh()}\n  org: acme",
        lambda: f"smtp:\n  host: smtp.example.com\n  username: noreply\n  password: {s.cred()}",
        lambda: f"oauth:\n  client_id: {cv.rand_hex(r, 20)}\n  client_secret: {s.cred(cv.mixed(r, 40))}",
        lambda: f"s3:\n  bucket: ultron-archive\n  access_key: {s.akia()}\n  secret_key: {s.aws_secret()}",
    ]
    benign = [
        f"server:\n  port: 8080\n  workers: {r.randint(2, 16)}",
        "logging:\n  level: INFO\n  format: json",
        f"retry:\n  max_attempts: 5\n  backoff_ms: {r.choice([200, 500])}",
        "auth:\n  enabled: true\n  password_min_length: 12\n  token_ttl: 3600",
        "secrets:\n  secretName: ultron-db-credentials\n  key: password",
    ]
    parts = [f() for f in r.sample(blocks, r.randint(1, 3))] + r.sample(benign, r.randint(1, 2))
    r.shuffle(parts)
    return "en", "config", r.choice(["# config/production.yaml\n", "```yaml\n", ""]) + "\n".join(parts)


def json_config(s: S) -> tuple[str, str, str]:
    r = s.rng
    variant = r.randrange(4)
    if variant == 0:
        sa = {
            "type": "service_account",
            "project_id": f"ultron-{r.randint(100, 999)}",
            "private_key_id": cv.rand_hex(r, 40),
            "private_key": "@@KEY@@",
            "client_email": f"ultron-sync@ultron-{r.randint(100, 999)}.iam.gserviceaccount.com",
            "client_id": str(r.randint(10**20, 10**21)),
            "token_uri": "https://oauth2.googleapis.com/token",
        }
        text = json.dumps(sa, indent=2).replace('"@@KEY@@"', json.dumps(s.pem("\n")))
        key = s.entities[-1]["value"]
        s.entities[-1]["value"] = json.dumps(key)[1:-1]  # as it appears, with \n escapes
        s.plant("EMAIL_ADDRESS", sa["client_email"])
        return "en", "config", text
    if variant == 1:
        cfg = {
            "endpoint": "https://api.openai.com/v1",
            "api_key": "@@A@@",
            "timeout_ms": 30000,
            "max_tokens": 4096,
            "request_id": cv.uuid4(r),
        }
        return "en", "config", json.dumps(cfg, indent=2).replace("@@A@@", s.llm())
    if variant == 2:
        cfg = {
            "mcpServers": {
                "github": {
                    "command": "npx",
                    "args": ["-y", "@modelcontextprotocol/server-github"],
                    "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "@@G@@"},
                }
            }
        }
        return "en", "config", json.dumps(cfg, indent=2).replace("@@G@@", s.gh())
    cfg = {
        "user": {
            "id": r.randint(1000, 99999),
            "email": "@@E@@",
            "last_login_ip": "@@I@@",
            "created_at": cv.iso_ts(r),
        }
    }
    return "en", "log", json.dumps(cfg).replace("@@E@@", s.email()).replace("@@I@@", s.ip())


def shell_session(s: S) -> tuple[str, str, str]:
    r = s.rng
    user = s.user()
    host = r.choice(["devbox", "gpu-node-3", "macbook", "ip-10-0-1-17"])
    prompt = f"{user}@{host}:~/ultron$"
    cmds = [
        lambda: f"{prompt} export ANTHROPIC_API_KEY={s.llm()}\n{prompt} python -m agent.run --task triage",
        lambda: (
            f'{prompt} curl -s https://api.openai.com/v1/models -H "Authorization: Bearer {s.llm()}" | jq \'.data[0].id\'\n"gpt-4o-mini"'
        ),
        lambda: (
            f"{prompt} mysql -u root -p'{s.cred()}' -h db.internal -e 'show databases;'\nERROR 2003 (HY000): Can't connect to MySQL server on 'db.internal:3306' (111)"
        ),
        lambda: (
            f"{prompt} git clone https://x-access-token:{s.gh()}@github.com/acme/ultron.git\nCloning into 'ultron'...\nremote: Enumerating objects: {r.randint(1000, 9000)}, done."
        ),
        lambda: (
            f"{prompt} psql \"postgresql://app:{s.dbpw()}@db-prod.internal:5432/app\" -c 'select 1'\n ?column?\n----------\n        1"
        ),
        lambda: (
            f"{prompt} docker login -u {r.choice(['ci-bot', 'deploy'])} --password {s.cred()} registry.acme.io\nLogin Succeeded"
        ),
        lambda: (
            f"{prompt} aws configure\nAWS Access Key ID [None]: {s.akia()}\nAWS Secret Access Key [None]: {s.aws_secret()}\nDefault region name [None]: us-east-1"
        ),
        lambda: f"{prompt} ls /home/{user}/ultron\nREADME.md  pyproject.toml  ultron  tests",
        lambda: (
            f"{prompt} python train.py --config /home/{user}/ultron/configs/sft.yaml\nloading checkpoint from /home/{user}/ckpt/step_{r.randint(100, 9000)}"
        ),
        lambda: f"{prompt} sshpass -p {s.cred()} ssh deploy@bastion.acme.io",
    ]
    picked = r.sample(cmds, r.randint(1, 3))
    return "en", "shell", "\n".join(f() for f in picked) + f"\n{prompt} "


def python_traceback_with_leak(s: S) -> tuple[str, str, str]:
    r = s.rng
    user = s.user()
    home = r.choice([f"/home/{user}", f"/Users/{user}"])
    frames = (
        f'  File "{home}/projects/agent/main.py", line {r.randint(10, 300)}, in <module>\n    run()\n'
        f'  File "{home}/.venv/lib/python3.11/site-packages/httpx/_client.py", line {r.randint(800, 1700)}, in send\n'
        f"    response = self._send_handling_auth(\n"
    )
    endings = [
        lambda: (
            f"httpx.HTTPStatusError: Client error '401 Unauthorized' for url 'https://api.example.com/v2/search?q=timeout&api_key={s.cred_token()}'"
        ),
        lambda: (
            f"psycopg.OperationalError: connection failed: host=db.internal port=5432 user=app password={s.cred()} dbname=ultron: Connection refused"
        ),
        lambda: f"ValueError: invalid header value b'Bearer {s.token()}'",
        lambda: (
            f"requests.exceptions.ConnectionError: HTTPSConnectionPool(host='{s.ip()}', port=443): Max retries exceeded with url: /v1/embeddings (Caused by NewConnectionError('<urllib3.connection.HTTPSConnection object at {cv.mem_addr(r)}>: Failed to establish a new connection: [Errno 110] Connection timed out'))"
        ),
        lambda: (
            f"sqlalchemy.exc.OperationalError: (pymysql.err.OperationalError) (1045, \"Access denied for user 'app'@'10.0.3.17' (using password: YES)\")\n(Background on this error at: https://sqlalche.me/e/20/e3q8)\nengine url: mysql+pymysql://app:{s.dbpw()}@mysql.svc.cluster.local:3306/app"
        ),
    ]
    ending = s.pick(endings)()
    if "10.0.3.17" in ending:
        s.plant("IP_ADDRESS", "10.0.3.17")
    rid = cv.uuid4(r)
    text = f"[{cv.log_ts(r)}] ERROR request_id={rid} task failed\nTraceback (most recent call last):\n{frames}{ending}"
    return "en", "stacktrace", text


def java_go_trace_with_leak(s: S) -> tuple[str, str, str]:
    r = s.rng
    if r.random() < 0.5:
        user = s.user()
        text = (
            f"panic: runtime error: invalid memory address or nil pointer dereference\n"
            f"[signal SIGSEGV: segmentation violation code=0x1 addr=0x0 pc={cv.mem_addr(r)}]\n\n"
            f"goroutine {r.randint(1, 400)} [running]:\n"
            f"github.com/acme/ultron/internal/store.(*Client).Put(0xc000{cv.rand_hex(r, 6)}, {{0x{cv.rand_hex(r, 6)}, 0x{r.randint(10, 99)}}})\n"
            f"\t/Users/{user}/go/src/github.com/acme/ultron/internal/store/client.go:{r.randint(40, 400)} +0x{cv.rand_hex(r, 3)}\n"
            f"main.main()\n\t/Users/{user}/go/src/github.com/acme/ultron/cmd/hub/main.go:{r.randint(20, 90)} +0x{cv.rand_hex(r, 3)}\n"
            f"exit status 2"
        )
        return "en", "stacktrace", text
    text = (
        f"{cv.log_ts(r)} ERROR [http-nio-8080-exec-{r.randint(1, 20)}] c.a.u.web.AuthFilter - rejected request traceId={cv.rand_hex(r, 32)}\n"
        f"org.springframework.security.authentication.BadCredentialsException: token rejected: Authorization=Basic {s.basic()}\n"
        f"\tat c.a.u.web.AuthFilter.doFilterInternal(AuthFilter.java:{r.randint(40, 200)})\n"
        f"\tat org.springframework.web.filter.OncePerRequestFilter.doFilter(OncePerRequestFilter.java:116)\n"
        f"\tat java.base/java.lang.Thread.run(Thread.java:1583)\n"
        f"client={s.ip()} userAgent=okhttp/4.12.0"
    )
    return "en", "stacktrace", text


def http_request(s: S) -> tuple[str, str, str]:
    r = s.rng
    variants = [
        lambda: f'$ curl -u {r.choice(cv.FIRST)}:{s.cred()} https://jenkins.acme.io/api/json\n{{"jobs": []}}',
        lambda: (
            f"$ curl https://api.acme.io/v1/memories -H 'X-Api-Key: {s.cred_token()}' -H 'Content-Type: application/json' -d '{{\"limit\": 20}}'"
        ),
        lambda: (
            f"GET /api/v1/search?q=oom+killer&access_token={s.cred_token()} HTTP/1.1\nHost: hub.acme.io\nUser-Agent: ultron-sdk/{cv.version(r)}"
        ),
        lambda: (
            f"POST /v1/chat/completions HTTP/1.1\nHost: dashscope.aliyuncs.com\nAuthorization: Bearer {s.dashscope()}\nContent-Type: application/json\nX-Request-Id: {cv.uuid4(r)}"
        ),
        lambda: (
            f"> GET /repos/acme/ultron/pulls HTTP/2\n> Host: api.github.com\n> Authorization: token {s.gh()}\n> Accept: application/vnd.github+json\n< HTTP/2 200"
        ),
        lambda: (
            f"> POST /oauth/token HTTP/1.1\n> Authorization: Basic {s.basic()}\n> Content-Type: application/x-www-form-urlencoded\n< HTTP/1.1 200 OK"
        ),
        lambda: (
            f"Request headers: {{'Authorization': 'Bearer {s.token()}', 'X-Trace-Id': '{cv.rand_hex(r, 32)}', 'Accept': '*/*'}}"
        ),
        lambda: f"Set-Cookie: session={s.jwt()}; Path=/; HttpOnly; Secure; SameSite=Lax",
    ]
    return "en", "http", s.pick(variants)()


def code_snippet(s: S) -> tuple[str, str, str]:
    r = s.rng
    variants = [
        lambda: (
            f'from openai import OpenAI\n\nclient = OpenAI(api_key="{s.llm()}")\nresp = client.chat.completions.create(model="gpt-4o-mini", messages=msgs, max_tokens=512)'
        ),
        lambda: (
            f's3 = boto3.client(\n    "s3",\n    aws_access_key_id="{s.akia()}",\n    aws_secret_access_key="{s.aws_secret()}",\n    region_name="us-west-2",\n)'
        ),
        lambda: (
            f'engine = create_engine("postgresql+psycopg://etl:{s.dbpw()}@warehouse.internal:5432/analytics", pool_size=10)'
        ),
        lambda: (
            f'# TODO remove before commit\nGITHUB_TOKEN = "{s.gh()}"\nheaders = {{"Authorization": f"token {{GITHUB_TOKEN}}"}}'
        ),
        lambda: f'const redis = new Redis({{ host: "cache.internal", port: 6379, password: "{s.cred()}" }});',
        lambda: (
            f'payload = jwt.decode("{s.jwt()}", options={{"verify_signature": False}})\nprint(payload["sub"])'
        ),
        lambda: (
            f"<settings>\n  <servers>\n    <server>\n      <id>nexus</id>\n      <username>deployer</username>\n      <password>{s.cred()}</password>\n    </server>\n  </servers>\n</settings>"
        ),
        lambda: (
            f"CREATE USER reporting WITH PASSWORD '{s.cred()}';\nGRANT SELECT ON ALL TABLES IN SCHEMA public TO reporting;"
        ),
        lambda: (
            f'mongo_uri = "mongodb+srv://admin:{s.dbpw()}@cluster0.{cv.rand_str(r, 5).lower()}.mongodb.net/ultron?retryWrites=true"'
        ),
        lambda: (
            f'dashscope.api_key = "{s.dashscope()}"\nresp = dashscope.Generation.call(model="qwen-max", prompt=prompt)'
        ),
    ]
    return "en", "code", s.pick(variants)()


def private_key_material(s: S) -> tuple[str, str, str]:
    r = s.rng
    variants = [
        ("shell", lambda: f"$ cat ~/.ssh/id_ed25519\n{s.pem()}\n$ chmod 600 ~/.ssh/id_ed25519"),
        (
            "chat",
            lambda: (
                f"Agent memory: deploy key for the staging box (added to authorized_keys on bastion):\n{s.pem()}"
            ),
        ),
        (
            "config",
            lambda: (
                "tls:\n  cert_file: /etc/ultron/tls.crt\n  key: |\n    "
                + s.plant("PRIVATE_KEY", cv.private_key(r).replace("\n", "\n    "))
            ),
        ),
        ("log", lambda: f"[{cv.log_ts(r)}] DEBUG loaded signing key: {s.pem(chr(92) + 'n')}"),
        (
            "shell",
            lambda: (
                f"kubectl create secret tls hub-tls --cert=tls.crt --key=tls.key\n# tls.key was:\n{s.pem()}"
            ),
        ),
    ]
    kind, make = s.pick(variants)
    return "en", kind, make()


def jwt_material(s: S) -> tuple[str, str, str]:
    r = s.rng
    variants = [
        (
            "log",
            lambda: (
                f"{cv.log_ts(r)} INFO  auth: issued token for user_id={r.randint(1000, 99999)} jwt={s.jwt()} expires_in=3600"
            ),
        ),
        (
            "shell",
            lambda: (
                f'$ curl -H "Authorization: Bearer {s.jwt()}" https://hub.acme.io/api/v1/memories?limit=5\n{{"items": [], "next": null}}'
            ),
        ),
        (
            "chat",
            lambda: (
                f"The refresh failed again; here is the token from localStorage so you can decode it: {s.jwt()}"
            ),
        ),
        ("log", lambda: f"WARN token expired (exp < now) token={s.jwt()} trace={cv.rand_hex(r, 16)}"),
        ("http", lambda: f'{{"access_token": "{s.jwt()}", "token_type": "bearer", "expires_in": 3600}}'),
    ]
    kind, make = s.pick(variants)
    return "en", kind, make()


def aws_material(s: S) -> tuple[str, str, str]:
    r = s.rng
    variants = [
        (
            "shell",
            lambda: (
                f"$ cat ~/.aws/credentials\n[default]\naws_access_key_id = {s.akia()}\naws_secret_access_key = {s.aws_secret()}\n\n[prod]\nregion = ap-southeast-1"
            ),
        ),
        (
            "shell",
            lambda: (
                f"$ aws sts assume-role --role-arn arn:aws:iam::{r.randint(10**11, 10**12)}:role/ci --role-session-name ci\n"
                f'{{\n    "Credentials": {{\n        "AccessKeyId": "{s.akia()}",\n        "SecretAccessKey": "{s.aws_secret()}",\n'
                f'        "SessionToken": "{s.cred("FwoGZXIvYXdzE" + cv.mixed(r, 120, cv.ALNUM + "/+"))}",\n        "Expiration": "{cv.iso_ts(r)}"\n    }}\n}}'
            ),
        ),
        (
            "config",
            lambda: (
                f"User name,Password,Access key ID,Secret access key\nci-uploader,,{s.akia()},{s.aws_secret()}"
            ),
        ),
        (
            "chat",
            lambda: (
                f'Found the leak: someone committed AWS keys in terraform.tfvars -> access_key = "{s.akia()}" secret_key = "{s.aws_secret()}". Rotating now.'
            ),
        ),
    ]
    kind, make = s.pick(variants)
    return "en", kind, make()


# ---------------------------------------------------------------------------------------------------------
# English material with PII
# ---------------------------------------------------------------------------------------------------------


def git_log(s: S) -> tuple[str, str, str]:
    r = s.rng
    first, last = r.choice(cv.FIRST).capitalize(), r.choice(cv.LAST).capitalize()
    commits = []
    for _ in range(r.randint(1, 2)):
        commits.append(
            f"commit {cv.sha(r)}\nAuthor: {s.plant('PERSON', f'{first} {last}')} <{s.email()}>\nDate:   Wed Jun {r.randint(1, 28)} {r.randint(0, 23):02d}:{r.randint(10, 59)}:{r.randint(10, 59)} 2024 +0800\n\n"
            f"    {r.choice(['fix: retry embedding on 429', 'feat: dedup memories by cosine >= 0.92', 'chore: bump presidio to 2.2.366'])}\n"
        )
    return "en", "shell", "$ git log -n 2\n" + "\n".join(commits)


def support_chat(s: S) -> tuple[str, str, str]:
    r = s.rng
    variants = [
        lambda: (
            f"User: I can't log in since the migration. My account email is {s.email()} and you can call me on {s.phone()} after 5pm."
        ),
        lambda: (
            f"Customer wrote: please refund order #{cv.order_id(r)} to the card ending... actually the full number is {s.card()}, exp 09/27."
        ),
        lambda: (
            f"Hi team, payroll bounced. Correct IBAN is {s.iban()} (account holder same as before). Ticket {cv.uuid4(r)}."
        ),
        lambda: (
            f"Support note: user paid with crypto, wallet {s.wallet()}, tx still pending after {r.randint(2, 9)} confirmations."
        ),
        lambda: f"Reach me at {s.email()} or WhatsApp {s.phone()} - I'm travelling this week.",
        lambda: (
            f"Can you update my billing details? New card {s.card()} and send the invoice to {s.email()}."
        ),
        lambda: (
            f"The webhook from Stripe shows card {s.card()} declined (do_not_honor), customer {cv.rand_str(r, 14)}."
        ),
        lambda: f"Donations: BTC {s.wallet()} / ETH {s.wallet()}",
        lambda: (
            f"Please wire the deposit to {s.iban()} before Friday; reference INV-{r.randint(10000, 99999)}."
        ),
        lambda: (
            f"Caller left a voicemail, number {s.phone()}, says the export job {cv.pod(r)} keeps failing."
        ),
    ]
    return "en", "chat", s.pick(variants)()


def access_log(s: S) -> tuple[str, str, str]:
    r = s.rng
    lines = []
    for _ in range(r.randint(2, 4)):
        client = s.ip() if r.random() < 0.75 else s.ip6()
        lines.append(
            f"{client} - - [{r.randint(1, 28):02d}/Jun/2024:{r.randint(0, 23):02d}:{r.randint(10, 59)}:{r.randint(10, 59)} +0000] "
            f'"{r.choice(["GET", "POST"])} /api/v1/{r.choice(["memories", "search", "skills"])}?limit={r.randint(5, 50)} HTTP/1.1" '
            f'{r.choice([200, 200, 401, 429, 502])} {r.randint(100, 9000)} "-" "ultron-sdk/{cv.version(r)}" rt={r.random():.3f}'
        )
    if r.random() < 0.4:
        lines.append(f"upstream: {s.private_ip()}:8000 x-forwarded-for: {s.ip()}, 127.0.0.1")
    return "en", "log", "\n".join(lines)


def user_record(s: S) -> tuple[str, str, str]:
    r = s.rng
    rec = {
        "event": "signup",
        "user_id": r.randint(10000, 999999),
        "email": "@@E@@",
        "phone": "@@P@@",
        "ip": "@@I@@",
        "ts": int(cv.epoch_ms(r)),
        "trace_id": cv.rand_hex(r, 32),
    }
    text = json.dumps(rec).replace("@@E@@", s.email()).replace("@@P@@", s.phone()).replace("@@I@@", s.ip())
    return "en", "log", text


def payment_log(s: S) -> tuple[str, str, str]:
    r = s.rng
    variants = [
        lambda: (
            f"{cv.log_ts(r)} WARN  payments.charge failed card={s.card()} amount=129.00 currency=EUR attempt={r.randint(1, 3)} idempotency_key={cv.uuid4(r)}"
        ),
        lambda: (
            f"{cv.log_ts(r)} INFO  payouts: sepa transfer queued iban={s.iban()} amount_cents={r.randint(1000, 900000)} batch={cv.order_id(r)}"
        ),
        lambda: (
            f"{cv.log_ts(r)} ERROR withdraw rejected: destination {s.wallet()} is on the sanctions list (rule_id={r.randint(100, 999)})"
        ),
        lambda: f"refund ok: card {s.card()} order={cv.order_id(r)} ts={cv.epoch_ms(r)}",
    ]
    return "en", "log", s.pick(variants)()


def finance(s: S) -> tuple[str, str, str]:
    r = s.rng
    variants = [
        lambda: (
            "en",
            "log",
            f"Invoice {cv.order_id(r)} paid by card {s.card()} (3DS ok), payout to {s.iban()}",
        ),
        lambda: (
            "en",
            "log",
            f'{{"type": "sepa_debit", "iban": "{s.iban()}", "mandate": "{cv.uuid4(r)}", "amount": {r.randint(100, 99999)}}}',
        ),
        lambda: (
            "en",
            "log",
            f"customer {r.randint(1000, 99999)} saved card: {s.card()} exp {r.randint(1, 12):02d}/{r.randint(25, 31)}",
        ),
        lambda: (
            "en",
            "log",
            f"Withdrawal to {s.wallet()} flagged: {r.randint(2, 40)} transfers in 24h (rule velocity_v{r.randint(1, 4)})",
        ),
        lambda: ("zh", "chat", f"退款失败，请核对收款账户：{s.iban()}，开户名一致后重新提交"),
        lambda: (
            "zh",
            "chat",
            f"用户绑卡：{s.card()}，有效期 {r.randint(1, 12):02d}/{r.randint(25, 31)}，已做脱敏展示（尾号 {r.randint(1000, 9999)}）",
        ),
        lambda: (
            "zh",
            "chat",
            f"充值地址（ERC20）：{s.plant('CRYPTO', '0x' + cv.rand_hex(r, 40))}，不要转错链",
        ),
        lambda: (
            "zh",
            "chat",
            f"工资卡换成 {s.plant('CREDIT_CARD', cv.unionpay_card(r))}（工行），下个月开始打这张",
        ),
        lambda: (
            "en",
            "log",
            f"payout batch {cv.order_id(r)}: {s.iban()} -> ok, {s.iban()} -> rejected (account closed)",
        ),
        lambda: ("en", "chat", f"BTC refund address: {s.wallet()}; memo {cv.rand_hex(r, 8)}"),
    ]
    return s.pick(variants)()


def auth_headers(s: S) -> tuple[str, str, str]:
    r = s.rng
    variants = [
        lambda: (
            "en",
            "http",
            f"$ http GET https://hub.acme.io/api/v1/skills 'Authorization:Bearer {s.token()}'",
        ),
        lambda: (
            "en",
            "log",
            f"{cv.log_ts(r)} DEBUG httpx: request headers={{'authorization': 'Basic {s.basic()}', 'user-agent': 'ultron-sdk/{cv.version(r)}'}}",
        ),
        lambda: (
            "en",
            "code",
            f'fetch("/api/v1/memories", {{ headers: {{ Authorization: "Bearer {s.token()}" }} }})',
        ),
        lambda: ("zh", "chat", f"调接口一直 401，我用的是 Bearer {s.token()}，帮忙看下是不是过期了"),
        lambda: ("en", "http", f"proxy-authorization: Basic {s.basic()}\nvia: 1.1 squid"),
    ]
    return s.pick(variants)()


def zh_identity(s: S) -> tuple[str, str, str]:
    r = s.rng
    variants = [
        lambda: (
            "zh",
            "log",
            f'{{"name": "张*", "id_card": "{s.cn_id()}", "verified": false, "reason": "公安接口超时"}}',
        ),
        lambda: ("zh", "chat", f"帮我查下这个身份证 {s.cn_id()} 为什么实名不过，手机号 {s.cn_phone()}"),
        lambda: (
            "zh",
            "ticket",
            f"证件类型：居民身份证\n证件号码：{s.cn_id()}\n有效期：2020.06.12-2040.06.12",
        ),
        lambda: (
            "zh",
            "log",
            f"{cv.log_ts(r)} WARN kyc: idcard={s.cn_id()} birthday mismatch, trace_id={cv.rand_hex(r, 32)}",
        ),
        lambda: (
            "en",
            "log",
            f"KYC rejected: national id {s.cn_id()} (CN) failed face match, score=0.{r.randint(10, 60)}",
        ),
    ]
    return s.pick(variants)()


# ---------------------------------------------------------------------------------------------------------
# Chinese material
# ---------------------------------------------------------------------------------------------------------


def zh_chat_pii(s: S) -> tuple[str, str, str]:
    r = s.rng
    name = r.choice(["张工", "王经理", "李老师", "小陈", "刘总"])
    variants = [
        lambda: (
            f"@{s.plant('PERSON', name) if name != '小陈' else name} 服务器又挂了，我手机{s.cn_phone()}，有事直接打我"
        ),
        lambda: f"用户反馈：登录不上，手机号 {s.cn_phone()}，邮箱 {s.email()}，麻烦看一下",
        lambda: f"实名认证失败，身份证号：{s.cn_id()}，请人工审核（工单 {cv.order_id(r)}）",
        lambda: f"客户信息：联系电话 {s.cn_phone()}；身份证 {s.cn_id()}；收件邮箱{s.email()}",
        lambda: f"【工单】客户来电 {s.cn_phone('dash')}，反馈扣款异常，银行卡号 {s.card()}，请财务核实",
        lambda: f"麻烦把报销打到我的卡上：{s.card()}，谢谢！有问题微信或者打我电话 {s.cn_phone()}",
        lambda: f"座机 {s.landline()}，手机 {s.cn_phone('space')}，工作日 9:00-18:00 在线",
        lambda: f"他说他的邮箱是{s.email()}，但是一直收不到验证码",
        lambda: f"国际用户，电话 {s.phone()}，邮箱 {s.email()}，时区 UTC+8",
        lambda: (
            f"请用这个地址收 USDT：{s.plant('CRYPTO', '0x' + cv.rand_hex(r, 40))}，BTC 的话用 {s.wallet()}"
        ),
        lambda: f"我手机号换了，新号码：+86 {s.plant('PHONE_NUMBER', cv.cn_mobile(r, 'plain'))}",
        lambda: f"客户 {r.choice(['赵女士', '孙先生'])}，身份证号码{s.cn_id()}，手机{s.cn_phone()}，已核验",
    ]
    return "zh", "chat", s.pick(variants)()


def zh_ticket(s: S) -> tuple[str, str, str]:
    r = s.rng
    text = (
        f"工单号：{cv.order_id(r)}\n提交时间：{cv.log_ts(r)}\n问题描述：用户在 App {cv.version(r)} 版本下单后支付失败，"
        f"订单号 {cv.order_id(r)}，request_id={cv.uuid4(r)}。\n"
    )
    extras = [
        lambda: f"联系人手机：{s.cn_phone()}\n",
        lambda: f"联系邮箱：{s.email()}\n",
        lambda: f"证件号：{s.cn_id()}\n",
        lambda: f"客户端IP：{s.ip()}\n",
        lambda: f"退款账户（IBAN）：{s.iban()}\n",
        lambda: f"绑定银行卡：{s.card()}\n",
    ]
    for f in r.sample(extras, r.randint(1, 3)):
        text += f()
    return "zh", "ticket", text + "处理人：二线支持"


def zh_secrets(s: S) -> tuple[str, str, str]:
    r = s.rng
    variants = [
        (
            "config",
            lambda: (
                f"# 数据库配置（生产）\nDB_HOST={s.private_ip()}\nDB_USER=ultron\nDB_PASSWORD={s.cred()}\nDB_POOL_SIZE=20"
            ),
        ),
        ("chat", lambda: f"通义千问的 key 先用我的：{s.dashscope()}，用完记得换掉"),
        ("chat", lambda: f"把 GitHub token 改成 {s.gh()} 就能推了，旧的已经吊销"),
        ("chat", lambda: f"服务器账号 root，密码：{s.cred()}，登录后先改密码"),
        ("chat", lambda: f"测试环境 Redis 密码是 {s.cred()}，别外传"),
        (
            "config",
            lambda: (
                f"【配置】DASHSCOPE_API_KEY={s.dashscope()}\nEMBEDDING_MODEL=text-embedding-v3\nMAX_TOKENS=2048"
            ),
        ),
        ("chat", lambda: f"报错信息：openai.AuthenticationError，我用的 key 是 {s.llm()}，是不是过期了？"),
        (
            "log",
            lambda: (
                f"部署日志：\n{cv.log_ts(r)} INFO 连接数据库 postgresql://ultron:{s.dbpw()}@pg-master.prod:5432/ultron\n{cv.log_ts(r)} INFO 迁移完成，耗时 {r.randint(100, 9999)} ms"
            ),
        ),
        ("chat", lambda: f"接口鉴权头：Authorization: Bearer {s.token()}，过期时间 2 小时"),
        ("chat", lambda: f"AWS 账号给你：AccessKey {s.akia()}，SecretKey {s.aws_secret()}，只读权限"),
        ("chat", lambda: f"登录拿到的 token：{s.jwt()}，你解一下看看 payload"),
        ("chat", lambda: f"私钥在这（别发群里了）：\n{s.pem()}"),
        (
            "chat",
            lambda: f"阿里云 OSS 的 access_key_secret: {s.cred(cv.mixed(r, 30))}，bucket 是 ultron-archive",
        ),
        ("chat", lambda: f"VPN 口令 {s.cred(cv.mixed(r, 8) + '!')}，有效期一周"),
    ]
    kind, make = s.pick(variants)
    return "zh", kind, make()


def zh_shell(s: S) -> tuple[str, str, str]:
    r = s.rng
    user = s.user()
    text = (
        f"{user}@gpu-{r.randint(1, 9)}:~$ nvidia-smi --query-gpu=memory.used --format=csv\nmemory.used [MiB]\n{r.randint(1000, 80000)} MiB\n"
        f"{user}@gpu-{r.randint(1, 9)}:~$ python /home/{user}/sft/train.py --lr 1e-5\n"
        f"# 训练第 {r.randint(1, 9)} 轮 loss={r.random():.4f}，checkpoint 保存在 /home/{user}/ckpt/{cv.sha(r, 8)}"
    )
    return "zh", "shell", text


def zh_log_with_pii(s: S) -> tuple[str, str, str]:
    r = s.rng
    variants = [
        lambda: (
            f"{cv.log_ts(r)} WARN  [sms] 短信发送失败 mobile={s.cn_phone()} code=isv.BUSINESS_LIMIT_CONTROL request_id={cv.uuid4(r)}"
        ),
        lambda: f"{cv.log_ts(r)} INFO  用户 {s.cn_phone()} 登录成功，ip={s.ip()}，耗时 {r.randint(5, 900)}ms",
        lambda: (
            f"{cv.log_ts(r)} ERROR 实名校验接口返回 40003：证件号 {s.cn_id()} 与姓名不匹配 trace={cv.rand_hex(r, 32)}"
        ),
        lambda: f"{cv.log_ts(r)} INFO  发送邮件到 {s.email()} 成功，message_id={cv.uuid4(r)}",
    ]
    text = s.pick(variants)()
    return "zh", "log", text


# ---------------------------------------------------------------------------------------------------------
# Clean material: technical text and hard negatives that must come through untouched
# ---------------------------------------------------------------------------------------------------------


def clean_python_trace(s: S) -> tuple[str, str, str]:
    r = s.rng
    return (
        "en",
        "stacktrace",
        (
            f"[{cv.log_ts(r)}] ERROR worker={cv.pod(r)} job={cv.uuid4(r)} attempt={r.randint(1, 5)}/5\n"
            f"Traceback (most recent call last):\n"
            f'  File "/srv/ultron/ultron/worker/loop.py", line {r.randint(20, 400)}, in run_once\n    result = handler(job)\n'
            f'  File "/usr/local/lib/python3.11/site-packages/sqlalchemy/engine/base.py", line {r.randint(1000, 2200)}, in _execute_context\n'
            f"    self.dialect.do_execute(\n"
            f"sqlalchemy.exc.OperationalError: (psycopg.errors.LockNotAvailable) canceling statement due to lock timeout\n"
            f"[SQL: UPDATE memories SET hit_count = hit_count + 1 WHERE id = %(id)s::UUID]\n"
            f"[parameters: {{'id': '{cv.uuid4(r)}'}}]\n"
            f"(Background on this error at: https://sqlalche.me/e/20/e3q8) elapsed_ms={r.randint(100, 9000)} ts={cv.epoch_ms(r)}"
        ),
    )


def clean_java_trace(s: S) -> tuple[str, str, str]:
    r = s.rng
    return (
        "en",
        "stacktrace",
        (
            f"{cv.log_ts(r)} ERROR [kafka-consumer-{r.randint(0, 9)}] c.a.u.ingest.MemoryConsumer - failed offset={r.randint(10**6, 10**9)} partition={r.randint(0, 63)}\n"
            f"java.util.concurrent.TimeoutException: Timeout after {r.choice([30000, 60000])}ms waiting for ack (requestId={cv.uuid4(r)})\n"
            f"\tat org.apache.kafka.clients.producer.internals.FutureRecordMetadata.valueOrError(FutureRecordMetadata.java:{r.randint(50, 120)})\n"
            f"\tat c.a.u.ingest.MemoryConsumer.handle(MemoryConsumer.java:{r.randint(40, 300)})\n"
            f"\tat java.base/java.lang.Thread.run(Thread.java:1583)\n"
            f"Caused by: java.net.SocketTimeoutException: connect timed out to 127.0.0.1:9092 (snowflakeId={cv.snowflake(r)})"
        ),
    )


def clean_go_trace(s: S) -> tuple[str, str, str]:
    r = s.rng
    return (
        "en",
        "stacktrace",
        (
            f"panic: send on closed channel\n\ngoroutine {r.randint(1, 900)} [running]:\n"
            f"github.com/acme/ultron/internal/queue.(*Broker).Publish(0xc000{cv.rand_hex(r, 6)}, {{0xc000{cv.rand_hex(r, 6)}, 0x{r.randint(10, 99)}}})\n"
            f"\t/build/internal/queue/broker.go:{r.randint(40, 400)} +0x{cv.rand_hex(r, 3)}\n"
            f"created by github.com/acme/ultron/internal/queue.NewBroker in goroutine 1\n"
            f"\t/build/internal/queue/broker.go:{r.randint(20, 60)} +0x{cv.rand_hex(r, 3)}\n"
            f"build={cv.sha(r, 12)} go1.22.{r.randint(0, 5)} listening on 0.0.0.0:{r.choice([8080, 9090, 50051])}"
        ),
    )


def clean_node_trace(s: S) -> tuple[str, str, str]:
    r = s.rng
    return (
        "en",
        "stacktrace",
        (
            f"Error: connect ECONNREFUSED 127.0.0.1:{r.choice([5432, 6379, 27017])}\n"
            f"    at TCPConnectWrap.afterConnect [as oncomplete] (node:net:{r.randint(1400, 1600)}:{r.randint(10, 20)}) {{\n"
            f"  errno: -111,\n  code: 'ECONNREFUSED',\n  syscall: 'connect',\n  address: '127.0.0.1',\n  port: {r.choice([5432, 6379])}\n}}\n"
            f"requestId: {cv.uuid4(r)} spanId: {cv.rand_hex(r, 16)} durationMs: {r.randint(1, 3000)}"
        ),
    )


def clean_k8s(s: S) -> tuple[str, str, str]:
    r = s.rng
    rows = "\n".join(
        f"{cv.pod(r):38s} {r.choice(['1/1', '0/1'])}     {r.choice(['Running', 'CrashLoopBackOff', 'OOMKilled'])}   {r.randint(0, 40):<8d} {r.randint(1, 59)}m"
        for _ in range(r.randint(2, 5))
    )
    return (
        "en",
        "shell",
        (
            f"$ kubectl -n ultron get pods\nNAME                                   READY   STATUS    RESTARTS   AGE\n{rows}\n"
            f"$ kubectl -n ultron describe pod {cv.pod(r)} | grep -i image\n    Image:  registry.acme.io/ultron/hub@sha256:{cv.sha(r, 64)}"
        ),
    )


def clean_docker_git(s: S) -> tuple[str, str, str]:
    r = s.rng
    lines = [
        f"{cv.sha(r, 7)} {r.choice(['fix', 'feat', 'chore', 'refactor'])}: {r.choice(['handle 429 from embeddings', 'cap memory text at 8k', 'add HNSW ef_search knob', 'retry on LockNotAvailable'])}"
        for _ in range(r.randint(2, 5))
    ]
    return (
        "en",
        "shell",
        (
            "$ git log --oneline -n 5\n" + "\n".join(lines) + "\n"
            f"$ docker ps --format '{{{{.ID}}}} {{{{.Image}}}} {{{{.Status}}}}'\n{cv.sha(r, 12)} postgres:16 Up {r.randint(1, 9)} hours\n{cv.sha(r, 12)} ultron/hub:{cv.version(r)} Up {r.randint(2, 50)} minutes"
        ),
    )


def clean_pip(s: S) -> tuple[str, str, str]:
    r = s.rng
    return (
        "en",
        "shell",
        (
            f"$ pip install scikit-learn=={r.choice(['1.4.2', '1.5.0'])} sentencepiece\n"
            f"Collecting scikit-learn==1.4.2\n  Downloading scikit_learn-1.4.2-cp311-cp311-manylinux_2_17_x86_64.whl (12.1 MB)\n"
            f"Successfully installed joblib-1.4.2 scikit-learn-1.4.2 threadpoolctl-3.5.0\n"
            f"# note: the old sk-learn alias is deprecated; import sklearn instead (sk-learn != scikit-learn on PyPI)"
        ),
    )


def clean_config(s: S) -> tuple[str, str, str]:
    r = s.rng
    variants = [
        "database:\n  host: ${DB_HOST}\n  password: ${DB_PASSWORD}\n  pool_size: 20",
        "OPENAI_API_KEY=<your-api-key>\nDASHSCOPE_API_KEY=your_dashscope_key_here\nMAX_TOKENS=4096",
        'llm:\n  api_key: "${OPENAI_API_KEY}"\n  max_tokens: 2048\n  tokenizer: cl100k_base\n  temperature: 0.2',
        "env:\n  - name: DB_PASSWORD\n    valueFrom:\n      secretKeyRef:\n        name: ultron-db\n        key: password",
        "redis:\n  url: redis://localhost:6379/0\npostgres:\n  dsn: postgresql://localhost:5432/ultron\n  password_file: /run/secrets/pg_password",
        'auth:\n  token: "****"\n  password: "********"\n  api_key: null',
        "[server]\nbind = 0.0.0.0:8080\nnetmask = 255.255.255.0\ntoken_ttl = 3600\nmax_tokens_per_request = 8192",
        '{\n  "password": {"type": "string", "minLength": 12},\n  "api_key": {"type": "string", "pattern": "^sk-"}\n}',
        "spring:\n  datasource:\n    url: jdbc:postgresql://localhost:5432/app\n    username: app\n    password: ${SPRING_DATASOURCE_PASSWORD}",
        'tokenizer_config:\n  eos_token: "</s>"\n  pad_token: "<pad>"\n  bos_token_id: 1\n  model_max_length: 32768',
        f"cache:\n  primary_key: memory_id\n  partition_key: tenant_id\n  ttl_seconds: {r.choice([60, 300, 3600])}",
        "auth:\n  type: basic\n  password_env: HUB_PASSWORD\n  secret_name: hub-basic-auth",
    ]
    return "en", "config", s.pick(variants)


def clean_prose(s: S) -> tuple[str, str, str]:
    variants = [
        "The password field is required and must be at least 12 characters; the token expires after one hour.",
        "Bearer authentication is required for every endpoint except /healthz; Basic auth was removed in v2.",
        "If you see 'Incorrect API key provided: sk-abc12***************************wxyz' the key was revoked, not mistyped.",
        "Rotate the GitHub token and the AWS access key before the audit; never paste secrets into memories.",
        "Set max_tokens to 4096 and make sure the tokenizer matches the model, otherwise token counts drift.",
        "We store a hash of the API key (sha256) and only the last four characters for display.",
        "Use `docker login --password-stdin` instead of passing the password on the command line.",
        "The secret is mounted from the vault at runtime; the pod never sees the raw value in its env.",
        "sk-learn is not a package, the import name is sklearn; pinned scikit-learn 1.4.2 fixes the warning.",
        "Remember: password: required, token: optional, api_key: read from env. That is the whole auth story.",
        "Our primary key is a UUIDv7 so ids sort by creation time; the partition key is tenant_id.",
        "Reset link expired? Ask the user to request a new one; we never email passwords.",
    ]
    return "en", "chat", s.pick(variants)


def clean_hard_numbers(s: S) -> tuple[str, str, str]:
    r = s.rng
    variants = [
        lambda: (
            f"order_id={r.choice(cv.CN_MOBILE_PREFIXES)}{cv.rand_str(r, 8, '0123456789')} amount=42.00 created_at={cv.epoch_ms(r)}"
        ),
        lambda: (
            f"batch {cv.bad_cn_id(r)} imported {r.randint(100, 9999)} rows in {r.randint(100, 9000)} ms (ts={cv.epoch_ms(r)})"
        ),
        lambda: f"test card numbers that must fail validation: {cv.bad_luhn_16(r)}, {cv.bad_luhn_16(r)}",
        lambda: (
            f"event_id={cv.snowflake(r)} offset={r.randint(10**9, 10**10)} lag_ms={r.randint(0, 5000)} epoch={cv.epoch_s(r)}"
        ),
        lambda: f"thumbnail: data:image/png;base64,{cv.base64_blob(r, 90)}",
        lambda: (
            f'checksum sha256:{cv.sha(r, 64)} size={r.randint(10**5, 10**8)} bytes etag="{cv.sha(r, 32)}"'
        ),
        lambda: f"sha1={cv.sha(r)} parent={cv.sha(r)} tree={cv.sha(r)}",
        lambda: (
            f"trace_id={cv.rand_hex(r, 32)} span_id={cv.rand_hex(r, 16)} ts_us={r.randint(1_700_000_000_000_000, 1_730_000_000_000_000)}"
        ),
        lambda: (
            f"segfault at {cv.mem_addr(r)} ip {cv.mem_addr(r)} sp {cv.mem_addr(r)} error 4 in libtorch_cuda.so[{cv.mem_addr(r)}+{cv.rand_hex(r, 7)}]"
        ),
        lambda: (
            f"Installed CUDA {r.choice(['12.1.105', '12.4.131'])}, driver 550.{r.randint(10, 99)}.{r.randint(10, 99)}, cudnn 9.1.0.70, NCCL 2.21.5"
        ),
        lambda: (
            f"invoice_no: {cv.order_id(r)}  ticket #{r.randint(10**6, 10**8)}  build-{cv.order_id(r)[:8]}-{r.randint(1000, 9999)}"
        ),
        lambda: (
            f"cron: 0 3 * * * /opt/ultron/bin/decay --batch 5000 --since {cv.epoch_s(r)} >> /var/log/ultron/decay.log 2>&1"
        ),
        lambda: (
            f"SNMP OID 1.3.6.1.4.1.{r.randint(1000, 60000)}.1.2 returned {r.randint(0, 999)}; firmware 10.0.19045.3803"
        ),
        lambda: "numpy slicing arr[::2] and arr[::-1]; dict(a=1)::text cast; std::vector<int> v(10);",
        lambda: f"user_id: {cv.uuid4(r)}\nsession_id: {cv.uuid4(r)}\ntenant: {cv.uuid4(r)}",
        lambda: f"Masked key from the dashboard: sk-...{cv.rand_str(r, 4)} (created {cv.iso_ts(r)})",
    ]
    return "en", "log", s.pick(variants)()


def clean_zh(s: S) -> tuple[str, str, str]:
    r = s.rng
    variants = [
        (
            "chat",
            lambda: f"重启了一下 pod {cv.pod(r)} 就好了，应该是连接池泄漏，先观察 {r.randint(1, 24)} 小时",
        ),
        (
            "chat",
            lambda: (
                f"v{cv.version(r)} 版本有个 bug：批量上传超过 {r.choice([500, 1000])} 条会超时，request_id={cv.uuid4(r)}"
            ),
        ),
        (
            "log",
            lambda: (
                f"订单号 {cv.order_id(r)} 金额 ¥{r.randint(10, 9999)}.00，创建时间戳 {cv.epoch_ms(r)}，状态：已退款"
            ),
        ),
        ("log", lambda: "密码错误次数过多，账号已锁定 30 分钟，请稍后重试"),
        ("chat", lambda: "token 过期了，需要重新登录获取；刷新 token 的接口是 /api/v1/auth/refresh"),
        ("chat", lambda: "请输入密码（至少 12 位，包含大小写字母和数字）"),
        ("chat", lambda: "身份证号格式不对，应该是 18 位，最后一位可以是 X"),
        (
            "chat",
            lambda: (
                f"今天的发布：commit {cv.sha(r, 8)}，镜像 ultron/hub:{cv.version(r)}，灰度 {r.randint(5, 50)}%"
            ),
        ),
        (
            "log",
            lambda: (
                f"订单号：{r.choice(cv.CN_MOBILE_PREFIXES)}{cv.rand_str(r, 8, '0123456789')}，请勿重复提交"
            ),
        ),
        (
            "chat",
            lambda: (
                f"向量检索 P99 从 {r.randint(80, 200)}ms 降到 {r.randint(10, 60)}ms，HNSW 参数 m=16 ef_construction=64"
            ),
        ),
        ("log", lambda: f"工单编号 {cv.bad_cn_id(r)} 已关闭，处理时长 {r.randint(1, 72)} 小时"),
        ("chat", lambda: "这个问题我昨天也遇到了，清一下缓存再试试就好了"),
        ("chat", lambda: f"日志里只有 trace_id={cv.rand_hex(r, 32)}，没有别的线索，先抓包看看"),
        ("chat", lambda: "API key 不要写进代码里，用环境变量 DASHSCOPE_API_KEY；密钥轮换周期 90 天"),
        (
            "chat",
            lambda: (
                f"监听地址 0.0.0.0:{r.choice([8080, 8000])}，本地调试用 127.0.0.1，子网掩码 255.255.255.0"
            ),
        ),
        (
            "log",
            lambda: (
                f"流水号 {r.choice(cv.CN_MOBILE_PREFIXES)}{cv.rand_str(r, 8, '0123456789')} 对账不平，差额 {r.randint(1, 99)} 元"
            ),
        ),
    ]
    kind, make = s.pick(variants)
    return "zh", kind, make()


def clean_shell_misc(s: S) -> tuple[str, str, str]:
    r = s.rng
    variants = [
        lambda: "$ echo $OPENAI_API_KEY | wc -c\n52\n$ export OPENAI_API_KEY=${OPENAI_API_KEY:?missing}",
        lambda: (
            '$ cat ~/.pgpass | wc -l\n3\n$ psql -h localhost -U app -W\nPassword for user app:\npsql: error: connection to server at "localhost" (127.0.0.1), port 5432 failed: FATAL:  password authentication failed for user "app"'
        ),
        lambda: (
            f"$ ls -la /srv/ultron\ntotal {r.randint(20, 90)}\ndrwxr-xr-x  7 ultron ultron 4096 Jun 12 10:15 .\n-rw-r--r--  1 ultron ultron  {r.randint(100, 9999)} Jun 12 10:15 pyproject.toml"
        ),
        lambda: (
            f'$ ss -ltnp | grep {r.choice([5432, 6379])}\nLISTEN 0 244 127.0.0.1:{r.choice([5432, 6379])} 0.0.0.0:* users:(("postgres",pid={r.randint(100, 99999)},fd=6))'
        ),
        lambda: (
            f"$ uptime\n {r.randint(0, 23):02d}:{r.randint(10, 59)}:{r.randint(10, 59)} up {r.randint(1, 300)} days, load average: 0.{r.randint(10, 99)}, 0.{r.randint(10, 99)}, 0.{r.randint(10, 99)}"
        ),
        lambda: (
            "$ docker login registry.acme.io -u ci-bot --password-stdin < /run/secrets/registry\nLogin Succeeded"
        ),
        lambda: (
            f"$ python -c 'import uuid; print(uuid.uuid4())'\n{cv.uuid4(r)}\n$ date +%s%3N\n{cv.epoch_ms(r)}"
        ),
        lambda: (
            f"runner@fv-az{r.randint(100, 999)}:/home/runner/work/ultron/ultron$ pytest -q\n{r.randint(100, 400)} passed in {r.randint(10, 90)}.{r.randint(10, 99)}s"
        ),
    ]
    return "en", "shell", s.pick(variants)()


# Written by hand, in formats the generators above do not produce, before the detectors were run on them;
# they keep the evaluation from only measuring what the generators and the recognizers agree on.
HANDWRITTEN: list[tuple[str, str, str, list[tuple[str, str]]]] = [
    (
        "en",
        "config",
        "machine api.heroku.com\n  login alice@acme.io\n  password Hx9!kP2mQz",
        [("EMAIL_ADDRESS", "alice@acme.io"), ("REDACTED_CREDENTIAL", "Hx9!kP2mQz")],
    ),
    (
        "en",
        "config",
        "services:\n  db:\n    image: postgres:16\n    environment:\n      - POSTGRES_PASSWORD=pg_Secr3t_2024\n      - POSTGRES_USER=ultron",
        [("REDACTED_CREDENTIAL", "pg_Secr3t_2024")],
    ),
    (
        "en",
        "shell",
        "$ git remote -v\norigin  https://oauth2:glpat-Xy3kLm9PqRsT7uVwZa1B@gitlab.acme.io/ai/ultron.git (fetch)\norigin  https://oauth2:glpat-Xy3kLm9PqRsT7uVwZa1B@gitlab.acme.io/ai/ultron.git (push)",
        [("REDACTED_CREDENTIAL", "glpat-Xy3kLm9PqRsT7uVwZa1B")],
    ),
    (
        "en",
        "code",
        'In [3]: os.environ["OPENAI_API_KEY"] = "sk-Qm3vT9xLr2Pz8NcW5yHb4KdJT3BlbkFJa7Fs1Ge6Uo0Ri2Wq"\nIn [4]: client.models.list()',
        [("LLM_API_KEY", "sk-Qm3vT9xLr2Pz8NcW5yHb4KdJT3BlbkFJa7Fs1Ge6Uo0Ri2Wq")],
    ),
    (
        "zh",
        "chat",
        "老板，新的阿里云 AccessKey ID：LTAI5tQ9xXyZ7aBcDeFgHiJk，Secret：mN3pQ8rS2tU7vW1xY6zA0bC5dE9fGh 已经生效",
        [("REDACTED_CREDENTIAL", "mN3pQ8rS2tU7vW1xY6zA0bC5dE9fGh")],
    ),
    (
        "zh",
        "chat",
        "发件人: 王芳 <wang.fang@corp.example.cn>\n主题：周报\n附件太大发不了，我放网盘了",
        [("PERSON", "王芳"), ("EMAIL_ADDRESS", "wang.fang@corp.example.cn")],
    ),
    (
        "en",
        "chat",
        "Call (646) 872-3310 ext. 42 and ask for the on-call SRE; the pager rotates at 09:00.",
        [("PHONE_NUMBER", "(646) 872-3310")],
    ),
    (
        "en",
        "config",
        "slack:\n  bot_token: xoxb-8837120044-5512093388-Zk2mP9qT4vXw7yB1cD3eF5gH\n  channel: '#ops-alerts'",
        [("REDACTED_CREDENTIAL", "xoxb-8837120044-5512093388-Zk2mP9qT4vXw7yB1cD3eF5gH")],
    ),
    (
        "en",
        "config",
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: hub-db\ntype: Opaque\ndata:\n  username: dWx0cm9u\n  password: UzNjcjN0UGFzcyE=",
        [("REDACTED_CREDENTIAL", "UzNjcjN0UGFzcyE=")],
    ),
    (
        "en",
        "log",
        "connecting with Server=tcp:sql-prod.database.windows.net,1433;Database=app;User ID=appuser;Password=Q7!vR2#mK9pL;Encrypt=True;",
        [("REDACTED_CREDENTIAL", "Q7!vR2#mK9pL")],
    ),
    (
        "en",
        "code",
        'resp = requests.get(url, auth=("admin", "Adm1n!2024"), timeout=10)',
        [("REDACTED_CREDENTIAL", "Adm1n!2024")],
    ),
    (
        "en",
        "log",
        "callback: https://app.acme.io/auth/callback#id_token=eyJhbGciOiJSUzI1NiIsImtpZCI6IjFlOWdkazcifQ.eyJpc3MiOiJodHRwOi8vc2VydmVyLmV4YW1wbGUuY29tIiwic3ViIjoiMjQ4Mjg5NzYxMDAxIn0.rHQjEmBqn9Jre0OLykYNnspA10Qql2rvx4FsD00jwlB0Sym4NzpgvPKsDjn_wMkHxcp6CilPcoKrWHcipR2iAjzLvDNAReF97zoJqq880ZD1bwY82JDauCXELVR9O6_B0w3K-E7yM2macAAgNCUwtik6SjoSUZRcf-O5lygIyLENx882p6MtmwaL1hd6qn5RZOQ0TLrOYu0532g9Exxcm-ChymrB4xLykpDj3lUivJt63eEGGN6DH5K6o33TcxkIjNrCD4XB1CKKumZvCedgHHF3IAK4dVEDSUoGlH9z4pP_eWYNXvqQOjGs-rDaQzUHl6cQQWNiDpWOl_lxXjQEvQ&state=af0ifjsldkj",
        [
            (
                "JWT",
                "eyJhbGciOiJSUzI1NiIsImtpZCI6IjFlOWdkazcifQ.eyJpc3MiOiJodHRwOi8vc2VydmVyLmV4YW1wbGUuY29tIiwic3ViIjoiMjQ4Mjg5NzYxMDAxIn0.rHQjEmBqn9Jre0OLykYNnspA10Qql2rvx4FsD00jwlB0Sym4NzpgvPKsDjn_wMkHxcp6CilPcoKrWHcipR2iAjzLvDNAReF97zoJqq880ZD1bwY82JDauCXELVR9O6_B0w3K-E7yM2macAAgNCUwtik6SjoSUZRcf-O5lygIyLENx882p6MtmwaL1hd6qn5RZOQ0TLrOYu0532g9Exxcm-ChymrB4xLykpDj3lUivJt63eEGGN6DH5K6o33TcxkIjNrCD4XB1CKKumZvCedgHHF3IAK4dVEDSUoGlH9z4pP_eWYNXvqQOjGs-rDaQzUHl6cQQWNiDpWOl_lxXjQEvQ",
            )
        ],
    ),
    (
        "en",
        "chat",
        "Berlin office: Tel.: +49 30 901820, Fax +49 30 9018 2222",
        [("PHONE_NUMBER", "+49 30 901820"), ("PHONE_NUMBER", "+49 30 9018 2222")],
    ),
    ("zh", "chat", "我的微信同手机号 186 1234 5678，加的时候备注公司名", [("PHONE_NUMBER", "186 1234 5678")]),
    (
        "zh",
        "ticket",
        "申请人身份证 11010519491231109x，已上传正反面照片",
        [("CN_RESIDENT_ID", "11010519491231109x")],
    ),
    (
        "en",
        "http",
        "X-Forwarded-For: 203.0.113.195, 70.41.3.18, 150.172.238.178\nX-Real-IP: 203.0.113.195",
        [("IP_ADDRESS", "203.0.113.195"), ("IP_ADDRESS", "70.41.3.18"), ("IP_ADDRESS", "150.172.238.178")],
    ),
    (
        "en",
        "log",
        "peer 2001:db8:85a3::8a2e:370:7334 closed the stream (h2 GOAWAY, last_stream_id=7)",
        [("IP_ADDRESS", "2001:db8:85a3::8a2e:370:7334")],
    ),
    (
        "en",
        "http",
        '{"payment_method": {"card": {"number": "4242424242424242", "exp_month": 12, "exp_year": 2027, "cvc": "314"}}}',
        [("CREDIT_CARD", "4242424242424242")],
    ),
    (
        "en",
        "stacktrace",
        "Traceback (most recent call last):\n  File \"C:\\Users\\Kevin Zhang\\AppData\\Local\\Temp\\tmp8x2k.py\", line 4, in <module>\n    import torch\nModuleNotFoundError: No module named 'torch'",
        [("USER", "Kevin Zhang")],
    ),
    (
        "en",
        "log",
        "Crashed Thread: 0 Dispatch queue: com.apple.main-thread\n0 libswiftCore.dylib 0x00000001a3b5c4e0 _assertionFailure + 244\nBinary: /Users/sarah.k/Library/Developer/Xcode/DerivedData/Hub-abc/Build/Products/Debug/Hub.app",
        [("USER", "sarah.k")],
    ),
    (
        "zh",
        "chat",
        "私钥我贴在这了，用完删：\n-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIFHzBJBgkqhkiG9w0BBQ0wPDAbBgkqhkiG9w0BBQwwDgQIq3hR5mZs0b0CAggA\nMB0GCWCGSAFlAwQBKgQQ2u9bXn6Tt4u7bT0F0b3ZqgSCBNBq0kYQ0cmE8aXcJ8kR\n-----END ENCRYPTED PRIVATE KEY-----",
        [
            (
                "PRIVATE_KEY",
                "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIFHzBJBgkqhkiG9w0BBQ0wPDAbBgkqhkiG9w0BBQwwDgQIq3hR5mZs0b0CAggA\nMB0GCWCGSAFlAwQBKgQQ2u9bXn6Tt4u7bT0F0b3ZqgSCBNBq0kYQ0cmE8aXcJ8kR\n-----END ENCRYPTED PRIVATE KEY-----",
            )
        ],
    ),
    (
        "en",
        "config",
        'terraform {\n  backend "s3" {}\n}\nprovider "aws" {\n  region     = "eu-west-1"\n  access_key = "AKIAQ3EGRT7XMZ5KQ2WN"\n  secret_key = "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"\n}',
        [
            ("AWS_ACCESS_KEY", "AKIAQ3EGRT7XMZ5KQ2WN"),
            ("AWS_SECRET_KEY", "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"),
        ],
    ),
    (
        "zh",
        "log",
        "2024-06-12 10:15:30 INFO 下单成功 user=15921876543 order=202406121015301234 金额=88.00",
        [("PHONE_NUMBER", "15921876543")],
    ),
    (
        "en",
        "chat",
        "my bitcoin address is bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq if anyone wants to tip",
        [("CRYPTO", "bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq")],
    ),
    (
        "en",
        "chat",
        "New IBAN for the contractor: NL91 ABNA 0417 1643 00, old one is closed.",
        [("IBAN_CODE", "NL91 ABNA 0417 1643 00")],
    ),
    # Added after the first run, for gaps found while documenting: service tokens with no key beside them.
    (
        "en",
        "chat",
        "the bot stopped posting; the token in the old runbook was xoxb-8837120044-5512093388-Zk2mP9qT4vXw7yB1cD3eF5gH, is it revoked?",
        [("REDACTED_CREDENTIAL", "xoxb-8837120044-5512093388-Zk2mP9qT4vXw7yB1cD3eF5gH")],
    ),
    (
        "zh",
        "chat",
        "GitLab 上那个 glpat-Xy3kLm9PqRsT7uVwZa1B 还能用吗？CI 一直 403",
        [("REDACTED_CREDENTIAL", "glpat-Xy3kLm9PqRsT7uVwZa1B")],
    ),
    (
        "en",
        "code",
        'session = requests.Session()\nsession.auth = ("ops", "correcthorse")\nsession.get(f"{base}/health")',
        [("REDACTED_CREDENTIAL", "correcthorse")],
    ),
    # clean
    (
        "en",
        "config",
        "MONGO_URL=mongodb://localhost:27017/?replicaSet=rs0\nREDIS_URL=redis://redis:6379/1\nLOG_FORMAT=json",
        [],
    ),
    (
        "en",
        "chat",
        "Send the `Authorization: Bearer <token>` header; a JWT is header.payload.signature, base64url each.",
        [],
    ),
    (
        "en",
        "stacktrace",
        "Error: ENOENT: no such file or directory, open '/home/runner/work/app/app/config.json'\n    at Object.openSync (node:fs:596:3)\n    at /home/runner/work/app/app/dist/index.js:2:418",
        [],
    ),
    (
        "en",
        "log",
        'Python 3.11.7 (main, Dec  4 2023, 18:10:11) [GCC 11.4.0] on linux\nETag: W/"5e15153d-120f"\nContent-Length: 4623',
        [],
    ),
    ("en", "shell", "$ curl -sS -H 'Authorization: Bearer $TOKEN' https://hub.acme.io/healthz\nok", []),
    ("zh", "chat", "数据库密码别写在代码里，放到 KMS；token 过期时间调成 7200 秒；身份证号只存哈希", []),
    (
        "en",
        "log",
        "GC pause 12.4ms heap 1824MB -> 1102MB; goroutines 4127; uptime 73h12m; pid 48213; ppid 1",
        [],
    ),
    (
        "en",
        "config",
        "[mysqld]\nport = 3306\nbind-address = 127.0.0.1\nmax_connections = 500\n# password is read from ~/.my.cnf",
        [],
    ),
]


# ---------------------------------------------------------------------------------------------------------
# Names, addresses, QQ numbers and command-line passwords (issue 19): what a companion's memories hold
# ---------------------------------------------------------------------------------------------------------

EN_FIRST = (
    "James Mary Robert Patricia Michael Jennifer William Linda David Elizabeth Richard Barbara Joseph Susan "
    "Thomas Jessica Charles Sarah Daniel Karen Matthew Nancy Anthony Lisa Mark Betty Priya Arjun Fatima "
    "Omar Sofia Mateo Yuki Hiroshi Olga Dmitri Ingrid Lars Chiara Giovanni Amara Kwame Lily Ethan Chloe"
).split()
EN_LAST = (
    "Smith Johnson Williams Brown Jones Garcia Miller Davis Rodriguez Martinez Hernandez Lopez Gonzalez "
    "Wilson Anderson Thomas Taylor Moore Jackson Martin Lee Thompson White Harris Clark Lewis Robinson "
    "Walker Patel Sharma Nakamura Tanaka Ivanova Petrov Johansson Lindqvist Rossi Bianchi Okafor Mensah "
    "O'Brien Fitzgerald Kowalski Novak Dubois Schmidt"
).split()
EN_STREETS = (
    "Baker Oak Maple Elm Cedar Pine Washington Lincoln Park Lake Hill Church High Station Victoria King "
    "Queen Mill Bridge Market Garden Willow Harbor Sunset Riverside"
).split()
EN_SUFFIX = "Street St Avenue Ave Road Rd Lane Drive Boulevard Court Place Way Terrace Parkway".split()
ZH_SURNAME = "王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐许韩冯邓曹彭曾肖田董袁潘蒋蔡余杜叶程苏魏吕丁任沈姚卢姜崔钟谭陆"
ZH_GIVEN = (
    "伟芳娜秀英敏静丽强磊军洋勇艳杰娟涛明超秀兰霞平刚桂英华建国志红玉兰欣怡浩然子轩雨涵梓萱思远宇航晨曦佳琪"
)
ZH_CITY = [
    ("北京市", "朝阳区"),
    ("上海市", "浦东新区"),
    ("广州市", "天河区"),
    ("深圳市", "南山区"),
    ("杭州市", "西湖区"),
    ("成都市", "武侯区"),
    ("南京市", "鼓楼区"),
    ("武汉市", "洪山区"),
]
ZH_ROAD = [
    "建国路",
    "世纪大道",
    "天河路",
    "科技园南路",
    "文三路",
    "人民南路",
    "中山路",
    "珞喻路",
    "长安街",
    "淮海中路",
    "解放大道",
    "南京西路",
]


def en_name(r: random.Random) -> str:
    return f"{r.choice(EN_FIRST)} {r.choice(EN_LAST)}"


def zh_name(r: random.Random) -> str:
    given = r.choice(ZH_GIVEN)
    if r.random() < 0.6:
        given += r.choice(ZH_GIVEN)
    return r.choice(ZH_SURNAME) + given


def en_street(r: random.Random) -> str:
    return f"{r.randint(1, 2400)}{r.choice(['', '', '', 'B'])} {r.choice(EN_STREETS)} {r.choice(EN_SUFFIX)}"


def zh_street(r: random.Random) -> str:
    city, district = r.choice(ZH_CITY)
    tail = r.choice(["", f"{r.randint(1, 12)}号楼{r.randint(101, 2405)}室", f"{r.randint(1, 30)}栋"])
    return f"{city}{district}{r.choice(ZH_ROAD)}{r.randint(1, 999)}号{tail}"


def en_people(s: S) -> tuple[str, str, str]:
    r = s.rng
    a, b = en_name(r), en_name(r)
    while b == a:
        b = en_name(r)
    p = s.plant
    variants = [
        lambda: f"{p('PERSON', a)} owns the billing service; ask her before touching the retry policy.",
        lambda: (
            f"Paired with {p('PERSON', a)} on the flaky payments test: the fixture leaked a DB connection."
        ),
        lambda: (
            f"Note for the on-call: {p('PERSON', a)} approved the schema change, {p('PERSON', b)} will run the migration at 02:00 UTC."
        ),
        lambda: (
            f"My daughter {p('PERSON', a.split()[0])} starts school on Monday, so I log off at 3pm that week."
        ),
        lambda: f"Escalate Kubernetes node pressure alerts to {p('PERSON', a)} (SRE lead) after 10 minutes.",
        lambda: f"Customer {p('PERSON', a)} reported that exports time out for workspaces over 2 GB.",
        lambda: (
            f"Meeting notes: {p('PERSON', a)} and {p('PERSON', b)} agreed to move the cron jobs to Airflow."
        ),
        lambda: f'{{"reviewer": "{p("PERSON", a)}", "status": "approved", "pr": {r.randint(100, 9999)}}}',
        lambda: f"Thanks to {p('PERSON', a)} for spotting the off-by-one in the pagination cursor.",
        lambda: f"Remind me to call {p('PERSON', a)} about the contract renewal next Tuesday.",
    ]
    return "en", "prose", s.pick(variants)()


def zh_people(s: S) -> tuple[str, str, str]:
    r = s.rng
    a, b = zh_name(r), zh_name(r)
    while b == a:
        b = zh_name(r)
    p = s.plant
    variants = [
        lambda: f"{p('PERSON', a)}负责这次数据库迁移，周五之前完成。",
        lambda: f"今天和{p('PERSON', a)}一起排查了 Redis 的内存问题，原因是 key 没有设置过期时间。",
        lambda: f"运维同事{p('PERSON', a)}说 staging 集群已经恢复，可以继续压测。",
        lambda: f"请联系{p('PERSON', a)}处理这个工单，她对计费模块最熟。",
        lambda: f"会议纪要：{p('PERSON', a)}和{p('PERSON', b)}决定把定时任务迁到 Airflow。",
        lambda: f"这个 bug 是{p('PERSON', a)}提的，复现步骤在 issue 里。",
        lambda: f"下周一{p('PERSON', a)}请假，代码评审找{p('PERSON', b)}。",
        lambda: f"我女儿叫{p('PERSON', a[1:] if len(a) == 3 else a)}，今年五岁，周末要陪她上钢琴课。",
        lambda: f"客户{p('PERSON', a)}反馈导出报表超时，数据量大约两百万行。",
        lambda: f"感谢{p('PERSON', a)}发现分页游标的边界错误。",
    ]
    return "zh", "prose", s.pick(variants)()


def en_addresses(s: S) -> tuple[str, str, str]:
    r = s.rng
    street = s.plant("STREET_ADDRESS", en_street(r))
    variants = [
        lambda: (
            f"Ship the replacement laptop to {street}, Springfield; the courier needs a phone number too."
        ),
        lambda: f"I moved last month, my new address is {street}, Apt 4, Portland.",
        lambda: f"Invoice address: Acme Ltd, {street}, London W1U 6TY",
        lambda: f"The on-site server room is at {street}, second floor, badge required.",
        lambda: f"delivery failed: recipient not found at {street} (order {cv.order_id(r)})",
    ]
    return "en", "prose", s.pick(variants)()


def zh_addresses(s: S) -> tuple[str, str, str]:
    r = s.rng
    street = s.plant("STREET_ADDRESS", zh_street(r))
    variants = [
        lambda: f"新电脑寄到{street}，收件前先打电话。",
        lambda: f"我住在{street}，周末可以去机房帮忙。",
        lambda: f"发票邮寄地址：{street}",
        lambda: f"线下培训的地点在{street}，下午两点开始。",
        lambda: f"快递退回：地址 {street} 查无此人（订单 {cv.order_id(r)}）",
    ]
    return "zh", "prose", s.pick(variants)()


def qq_numbers(s: S) -> tuple[str, str, str]:
    r = s.rng
    qq = s.plant("QQ_NUMBER", str(r.randint(10000, 3999999999)))
    variants = [
        ("zh", lambda: f"有问题加我QQ号 {qq}，晚上在线"),
        ("zh", lambda: f"联系方式：QQ：{qq}（备注 Ultron）"),
        ("zh", lambda: f"我的扣扣是{qq}，微信同号"),
        ("en", lambda: f"Support handle on QQ: {qq} for the Shenzhen team"),
        ("zh", lambda: f"客户留了 qq号码 {qq}，让我们发安装包过去"),
    ]
    lang, make = s.pick(variants)
    return lang, "chat", make()


def cli_passwords(s: S) -> tuple[str, str, str]:
    r = s.rng
    pw = s.cred()
    host = r.choice(["cache.internal", "redis-master", "127.0.0.1"])
    variants = [
        lambda: f"$ redis-cli -h {host} -p 6379 -a {pw} INFO memory",
        lambda: f"$ redis-cli -a '{pw}' --scan --pattern 'session:*' | wc -l",
        lambda: f"$ mysql -h db.internal -uroot -p{pw} app -e 'SHOW PROCESSLIST'",
        lambda: f"$ pg_dump --password {pw} -h db.internal app > app.sql",
        lambda: f"$ redis-cli --pass {pw} -n 2 FLUSHDB",
    ]
    return "en", "shell", s.pick(variants)()


def clean_names_hard(s: S) -> tuple[str, str, str]:
    r = s.rng
    variants = [
        ("en", lambda: "Bearer authentication is handled by the gateway; the service only reads X-User-Id."),
        (
            "en",
            lambda: (
                f"Upgrade Django to {r.randint(4, 5)}.{r.randint(0, 2)} and run the Celery workers with --pool=threads."
            ),
        ),
        (
            "en",
            lambda: (
                "Login Succeeded, but docker push still fails with denied: requested access to the resource is denied"
            ),
        ),
        ("en", lambda: "Max retries exceeded with url: /v1/embeddings (Caused by ReadTimeoutError)"),
        (
            "en",
            lambda: (
                f"The Main Street benchmark dataset has {r.randint(2, 9)}00 rows; use the Small Config for CI."
            ),
        ),
        (
            "en",
            lambda: "Grafana shows Prometheus scrape errors on the Kafka exporter after the Helm upgrade.",
        ),
        ("en", lambda: "Release Notes: Fixed Memory Leak in Worker Pool; Improved Startup Time."),
        ("zh", lambda: "连接池耗尽导致请求超时，把 max_connections 从 100 调到 200 后恢复。"),
        ("zh", lambda: "鉴权服务返回 401，检查网关的 JWT 公钥是否轮换。"),
        ("zh", lambda: "高可用方案：主从切换由 Patroni 完成，切换时间约 30 秒。"),
        ("zh", lambda: "谢谢大家，灰度发布已完成，明天全量。"),
        ("zh", lambda: f"第 {r.randint(2, 9)} 号节点磁盘满了，清理 /var/log 后恢复。"),
    ]
    lang, make = s.pick(variants)
    return lang, "prose", make()


FAMILIES: list[tuple[Callable[[S], tuple[str, str, str]], int]] = [
    (env_file, 14),
    (yaml_config, 12),
    (json_config, 12),
    (shell_session, 18),
    (python_traceback_with_leak, 16),
    (java_go_trace_with_leak, 12),
    (http_request, 18),
    (code_snippet, 14),
    (private_key_material, 16),
    (jwt_material, 16),
    (aws_material, 12),
    (git_log, 8),
    (support_chat, 22),
    (access_log, 10),
    (user_record, 8),
    (payment_log, 10),
    (finance, 24),
    (auth_headers, 10),
    (zh_identity, 10),
    (zh_chat_pii, 26),
    (zh_ticket, 14),
    (zh_secrets, 24),
    (zh_shell, 6),
    (zh_log_with_pii, 12),
    (clean_python_trace, 14),
    (clean_java_trace, 10),
    (clean_go_trace, 8),
    (clean_node_trace, 8),
    (clean_k8s, 8),
    (clean_docker_git, 8),
    (clean_pip, 3),
    (clean_config, 14),
    (clean_prose, 12),
    (clean_hard_numbers, 24),
    (clean_zh, 26),
    (clean_shell_misc, 10),
    (en_people, 40),
    (zh_people, 40),
    (en_addresses, 25),
    (zh_addresses, 25),
    (qq_numbers, 20),
    (cli_passwords, 15),
    (clean_names_hard, 24),
]


def generate(seed: int = SEED) -> list[dict]:
    rng = random.Random(seed)
    snippets = []
    for family, count in FAMILIES:
        for i in range(count):
            s = S(rng, i)
            lang, kind, text = family(s)
            for entity in s.entities:
                if entity["value"] not in text:
                    raise AssertionError(f"{family.__name__}: planted value missing from text: {entity}")
            snippets.append(
                {
                    "id": f"{family.__name__}-{i:02d}",
                    "lang": lang,
                    "kind": kind,
                    "text": text,
                    "entities": s.entities,
                }
            )
    for i, (lang, kind, text, entities) in enumerate(HANDWRITTEN):
        planted = [{"type": t, "value": v} for t, v in entities]
        for entity in planted:
            if entity["value"] not in text:
                raise AssertionError(f"hand-{i:02d}: planted value missing from text: {entity}")
        snippets.append(
            {"id": f"hand-{i:02d}", "lang": lang, "kind": kind, "text": text, "entities": planted}
        )
    return snippets


MIN_SUPPORT = 20


def check_support(snippets: list[dict]) -> None:
    support: dict[str, int] = {}
    for snippet in snippets:
        for e in snippet["entities"]:
            support[e["type"]] = support.get(e["type"], 0) + 1
    thin = {t: n for t, n in support.items() if n < MIN_SUPPORT}
    if thin:
        raise AssertionError(f"entity types below {MIN_SUPPORT} planted values: {thin}")


def main() -> None:
    snippets = generate()
    check_support(snippets)
    with OUT.open("w", encoding="utf-8") as fh:
        for snippet in snippets:
            fh.write(json.dumps(snippet, ensure_ascii=False) + "\n")
    clean = sum(1 for s in snippets if not s["entities"])
    print(f"wrote {len(snippets)} snippets ({clean} clean) to {OUT}")


if __name__ == "__main__":
    main()
