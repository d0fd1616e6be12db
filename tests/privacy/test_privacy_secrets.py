"""Secrets: each type is replaced by its placeholder, in English and Chinese text; look-alikes are not."""

from __future__ import annotations

import pytest

OPENAI = "sk-Qm3vT9xLr2Pz8NcW5yHb4KdJT3BlbkFJa7Fs1Ge6Uo0Ri2Wq"
PROJECT = "sk-proj-Xr7bQ2mN9pLk4TzW8yVd3Hc6Fj1Sa5Ge0Ru_tYi2Op9Kl-Mn4Bv7Cx3Zq8Wa"
DASHSCOPE = "sk-3f9a1c7e5b2d4f608a1b3c5d7e9f0a2b"
ANTHROPIC = "sk-ant-api03-" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z" * 3 + "AA"
GHP = "ghp_R8mK2pQ9vX4tL7nB3cW6yH1jF5dS0aZ8eU2i"
PAT = (
    "github_pat_11ABCDEFG0123456789abc_" + "Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe9Dc8Ba7Zy6Xw5Vu4Ts3Rq2Po1Nm0Lk9Ji"
)
AKIA = "AKIAQ3EGRT7XMZ5KQ2WN"
AWS_SECRET = "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"
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwiaWF0IjoxNzE3MTcxNzE3fQ."
    "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
)
PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\n"
    "VTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK\n-----END RSA PRIVATE KEY-----"
)


@pytest.mark.parametrize(
    ("text", "secret", "placeholder"),
    [
        (f"export OPENAI_API_KEY={OPENAI}", OPENAI, "<LLM_API_KEY>"),
        (f'client = OpenAI(api_key="{PROJECT}")', PROJECT, "<LLM_API_KEY>"),
        (f"通义千问的 key 先用我的：{DASHSCOPE}，用完记得换掉", DASHSCOPE, "<LLM_API_KEY>"),
        (f"ANTHROPIC_API_KEY={ANTHROPIC}", ANTHROPIC, "<LLM_API_KEY>"),
        (f"git push https://x-access-token:{GHP}@github.com/acme/hub.git", GHP, "<GITHUB_TOKEN>"),
        (f"把 GitHub token 改成 {PAT} 就能推了", PAT, "<GITHUB_TOKEN>"),
        (f"aws_access_key_id = {AKIA}", AKIA, "<AWS_ACCESS_KEY>"),
        (f"aws_secret_access_key = {AWS_SECRET}", AWS_SECRET, "<AWS_SECRET_KEY>"),
        (f"AWS 账号：AccessKey {AKIA}，SecretKey {AWS_SECRET}", AWS_SECRET, "<AWS_SECRET_KEY>"),
        (f"ci-uploader,,{AKIA},{AWS_SECRET}", AWS_SECRET, "<AWS_SECRET_KEY>"),
        (
            "Authorization: Bearer 7f9c2ba4e88f827d616045507605853e",
            "7f9c2ba4e88f827d6160",
            "<REDACTED_TOKEN>",
        ),
        ("> Authorization: Basic YWRtaW46UzNjcjN0UGFzcyE=", "YWRtaW46UzNjcjN0UGFzcyE=", "<REDACTED_TOKEN>"),
        (
            "调接口一直 401，我用的是 Bearer ya29.a0AfH6SMBx9kQ2，帮忙看下",
            "ya29.a0AfH6SMBx9kQ2",
            "<REDACTED_TOKEN>",
        ),
        (f"Set-Cookie: session={JWT}; HttpOnly", JWT, "<JWT>"),
        (f"登录拿到的 token：{JWT}，你解一下", JWT, "<JWT>"),
        (f"$ cat ~/.ssh/id_rsa\n{PEM}\n$ ", PEM, "<PRIVATE_KEY>"),
        ("私钥：\n" + PEM, "MIIEowIBAAKCAQEAu1SU1", "<PRIVATE_KEY>"),
        ('{"private_key": "' + PEM.replace("\n", "\\n") + '"}', "MIIEowIBAAKCAQEAu1SU1", "<PRIVATE_KEY>"),
        (
            "truncated: -----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ",
            "b3BlbnNzaC1rZXkt",
            "<PRIVATE_KEY>",
        ),
    ],
)
def test_format_specific_secrets_are_replaced(redact, text, secret, placeholder):
    out = redact(text)
    assert secret not in out
    assert placeholder in out


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("password=hunter2 and retry", "password=<REDACTED_CREDENTIAL> and retry"),
        ('{"api_key": "a8f5f167f44f4964e6c998dee827110c"}', '{"api_key": "<REDACTED_CREDENTIAL>"}'),
        ("DB_PASSWORD=Tr0ub4dor&3\nPORT=8080", "DB_PASSWORD=<REDACTED_CREDENTIAL>\nPORT=8080"),
        ("database:\n  password: letmein", "database:\n  password: <REDACTED_CREDENTIAL>"),
        (
            "docker login -u ci --password Zx9kLm2qR registry",
            "docker login -u ci --password <REDACTED_CREDENTIAL> registry",
        ),
        ("mysql -u root -p'S3cret!' -h db", "mysql -u root -p'<REDACTED_CREDENTIAL>' -h db"),
        ("curl -u bob:Zx@12345 https://ci", "curl -u bob:<REDACTED_CREDENTIAL> https://ci"),
        (
            "GET /v1/search?q=x&api_key=9f8e7d6c5b4a&limit=5",
            "GET /v1/search?q=x&api_key=<REDACTED_CREDENTIAL>&limit=5",
        ),
        (
            "Server=db;User ID=app;Password=Q7!vR2#mK9pL;Encrypt=True",
            "Server=db;User ID=app;Password=<REDACTED_CREDENTIAL>;Encrypt=True",
        ),
        ("<password>S3cr3tPass</password>", "<password><REDACTED_CREDENTIAL></password>"),
        ("CREATE USER r WITH PASSWORD 'Rep0rt!ng';", "CREATE USER r WITH PASSWORD '<REDACTED_CREDENTIAL>';"),
        ("my password is hunter2.", "my password is <REDACTED_CREDENTIAL>."),
        (
            "服务器账号 root，密码：Abc@12345，登录后先改",
            "服务器账号 root，密码：<REDACTED_CREDENTIAL>，登录后先改",
        ),
        ("测试环境 Redis 密码是 foobared ，别外传", "测试环境 Redis 密码是 <REDACTED_CREDENTIAL> ，别外传"),
        ("machine api.heroku.com login a@b.io password Hx9!kP2mQz", "password <REDACTED_CREDENTIAL>"),
        ('requests.get(url, auth=("admin", "Adm1n!2024"))', 'auth=("admin", "<REDACTED_CREDENTIAL>")'),
    ],
)
def test_credentials_keep_their_key(redact, text, expected):
    assert expected in redact(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "postgresql://ultron:S3cr3t!x@db.internal:5432/ultron",
            "postgresql://ultron:<DB_URL_PASSWORD>@db.internal:5432/ultron",
        ),
        (
            "mongodb+srv://admin:pw-9XkQ2@cluster0.ab1cd.mongodb.net/x",
            "mongodb+srv://admin:<DB_URL_PASSWORD>@cluster0",
        ),
        ("redis://:foob4red@redis-master:6379/0", "redis://:<DB_URL_PASSWORD>@redis-master:6379/0"),
        (
            "数据库 mysql+pymysql://root:p@ss%40w0rd@10.0.0.12:3306/app",
            "mysql+pymysql://root:<DB_URL_PASSWORD>@",
        ),
        (
            "https://oauth2:glpat-Xy3kLm9PqRsT7uVw@gitlab.acme.io/ai/hub.git",
            "https://oauth2:<REDACTED_CREDENTIAL>@gitlab",
        ),
    ],
)
def test_url_passwords_keep_the_url(redact, text, expected):
    assert expected in redact(text)


@pytest.mark.parametrize(
    "text",
    [
        "pip install scikit-learn; the old sk-learn alias is deprecated, sk-learn-compatible-pipeline too",
        "Incorrect API key provided: sk-abc12***************************wxyz",
        "The password field is required; the token expires after one hour.",
        "Bearer authentication is required; Basic auth was removed in v2.",
        "MAX_TOKENS=4096\nTOKENIZER=cl100k_base\nTOKEN_TTL_SECONDS=3600\nPASSWORD_MIN_LENGTH=12",
        "password: ${DB_PASSWORD}\napi_key: <your-api-key>\ntoken: '****'\nsecret: null",
        "OPENAI_API_KEY=your_openai_key_here\nexport OPENAI_API_KEY=${OPENAI_API_KEY:?missing}",
        "connect(user=user, password=password, host=self.host)\npassword = os.environ['DB_PASSWORD']",
        'password_file: /run/secrets/pg\nsecretName: hub-db\nprimary_key: memory_id\neos_token: "</s>"',
        "docker login registry.acme.io -u ci --password-stdin < /run/secrets/registry",
        "curl -H 'Authorization: Bearer $TOKEN' https://hub.acme.io/healthz",
        "headers = {'Authorization': f'Bearer {token}'}",
        "postgresql://localhost:5432/ultron and redis://localhost:6379/0",
        "Access denied for user 'app'@'localhost' (using password: YES)",
        "密码错误次数过多，账号已锁定；token 过期了，请重新登录；请输入密码（至少 12 位）",
        "API key 不要写进代码里，用环境变量 DASHSCOPE_API_KEY；密钥轮换周期 90 天",
        "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==",
        "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 "
        "and commit 3f2a1b4c5d6e7f8091a2b3c4d5e6f708192a3b4c",
    ],
)
def test_look_alikes_are_left_alone(redact, text):
    assert redact(text) == text


def test_json_escaped_credentials_in_a_tool_call(redact):
    text = '{"arguments": "{\\"user\\": \\"app\\", \\"password\\": \\"S3cret!x\\"}"}'
    assert (
        redact(text)
        == '{"arguments": "{\\"user\\": \\"app\\", \\"password\\": \\"<REDACTED_CREDENTIAL>\\"}"}'
    )
