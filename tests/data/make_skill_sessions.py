# ruff: noqa: E501 -- the harness templates are quoted as harnesses write them, long lines and all
"""Writes tests/data/skill_sessions/: 42 coding-agent sessions, written for the skills tests (issue 32).

Three problems (an nginx config that fails `nginx -t`, a C build that fails to link under `make`, a Rust
crate that fails the borrow checker) x seven variants x two harnesses:

- `swe/`: an SWE-style harness in the OpenAI messages format: a long system prompt with tool instructions
  and a task template around the issue text, in every session; tools `execute_bash` and
  `str_replace_editor`; tool results end with "[Command finished with exit code N]".
- `cc/`: a Claude Code log: every session opens with the same <system-reminder> block of user
  instructions; tools Bash, Read, Edit; failed commands come back with is_error.

Some runs fail (the last check still fails, yet the agent signs off as if it had succeeded); some try a
wrong fix before the right one. Deterministic: run `python tests/data/make_skill_sessions.py` to rewrite.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

OUT = Path(__file__).parent / "skill_sessions"
T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)

# (variant key, task text, file, error output, bad line, good line, wrong line)
NGINX_OK = (
    "nginx: the configuration file /etc/nginx/nginx.conf syntax is ok\n"
    "nginx: configuration file /etc/nginx/nginx.conf test is successful"
)
NGINX = [
    (
        "Requests to /api/v2/ return 502 after the reverse proxy change; `nginx -t` rejects the config.",
        "/etc/nginx/conf.d/app.conf",
        'nginx: [emerg] "proxy_pass" cannot have URI part in location given by regular expression, or inside '
        'named location, or inside "if" statement, or inside "limit_except" block in /etc/nginx/conf.d/app.conf:14',
        "        proxy_pass http://backend/api/;",
        "        proxy_pass http://backend;",
    ),
    (
        "nginx refuses to reload after adding the X-Request-Id header to the proxied requests.",
        "/etc/nginx/conf.d/site.conf",
        'nginx: [emerg] unknown directive "proxy_set_headr" in /etc/nginx/conf.d/site.conf:9',
        "    proxy_set_headr X-Request-Id $request_id;",
        "    proxy_set_header X-Request-Id $request_id;",
    ),
    (
        "After enabling the shop vhost, nginx will not start: two server blocks claim the default server.",
        "/etc/nginx/sites-enabled/shop",
        "nginx: [emerg] a duplicate default server for 0.0.0.0:80 in /etc/nginx/sites-enabled/shop:2",
        "    listen 80 default_server;",
        "    listen 80;",
    ),
    (
        "The api vhost config fails the nginx config test since the last edit of server_name.",
        "/etc/nginx/conf.d/api.conf",
        'nginx: [emerg] invalid number of arguments in "server_name" directive in /etc/nginx/conf.d/api.conf:3',
        "    server_name",
        "    server_name api.example.com;",
    ),
    (
        "In docker compose the nginx container exits at start: the upstream app host cannot be resolved.",
        "/etc/nginx/conf.d/default.conf",
        'nginx: [emerg] host not found in upstream "app:8000" in /etc/nginx/conf.d/default.conf:5',
        "    server app:8000;",
        "    server web:8000;",
    ),
    (
        "nginx fails its config test after the TLS certificate was renewed into a new folder.",
        "/etc/nginx/conf.d/tls.conf",
        'nginx: [emerg] cannot load certificate "/etc/ssl/certs/site.crt": BIO_new_file() failed '
        "(SSL: error:80000002:system library::No such file or directory)",
        "    ssl_certificate /etc/ssl/certs/site.crt;",
        "    ssl_certificate /etc/letsencrypt/live/site/fullchain.pem;",
    ),
    (
        "Adding a long server name for the partner portal makes nginx -t fail on the server names hash.",
        "/etc/nginx/nginx.conf",
        "nginx: [emerg] could not build server_names_hash, you should increase server_names_hash_bucket_size: 64",
        "    server_names_hash_bucket_size 64;",
        "    server_names_hash_bucket_size 128;",
    ),
]
MAKE = [
    (
        "The stats tool no longer links: make fails with an undefined reference to sqrt from the linker.",
        "Makefile",
        "cc -o stats build/main.o build/mean.o\n/usr/bin/ld: build/mean.o: in function `stddev':\n"
        "mean.c:(.text+0x8d): undefined reference to `sqrt'\ncollect2: error: ld returned 1 exit status\n"
        "make: *** [Makefile:12: stats] Error 1",
        "LDLIBS =",
        "LDLIBS = -lm",
    ),
    (
        "make of the worker pool fails at link time with undefined pthread_create since the threads landed.",
        "Makefile",
        "cc -o pool build/pool.o build/main.o\n/usr/bin/ld: build/pool.o: in function `pool_start':\n"
        "pool.c:(.text+0x4f): undefined reference to `pthread_create'\ncollect2: error: ld returned 1 exit status\n"
        "make: *** [Makefile:9: pool] Error 1",
        "LDFLAGS =",
        "LDFLAGS = -pthread",
    ),
    (
        "make stops at once on the new Makefile with a missing separator error.",
        "Makefile",
        "Makefile:14: *** missing separator.  Stop.",
        "        $(CC) $(CFLAGS) -c $< -o $@",
        "\t$(CC) $(CFLAGS) -c $< -o $@",
    ),
    (
        "The C build fails: the compiler cannot find config.h when make builds src/main.o.",
        "Makefile",
        "cc -Wall -O2 -c src/main.c -o build/main.o\nsrc/main.c:3:10: fatal error: config.h: No such file or "
        "directory\ncompilation terminated.\nmake: *** [Makefile:20: build/main.o] Error 1",
        "CFLAGS = -Wall -O2",
        "CFLAGS = -Wall -O2 -Iinclude",
    ),
    (
        "Linking the parser with make fails with multiple definition of the global counter.",
        "src/counter.h",
        "cc -o parser build/lex.o build/parse.o\n/usr/bin/ld: build/parse.o:(.bss+0x0): multiple definition of "
        "`counter'; build/lex.o:(.bss+0x0): first defined here\ncollect2: error: ld returned 1 exit status\n"
        "make: *** [Makefile:11: parser] Error 1",
        "int counter;",
        "extern int counter;",
    ),
    (
        "make fails after util.c moved to lib/: no rule to make the target for build/util.o.",
        "Makefile",
        "make: *** No rule to make target 'src/util.c', needed by 'build/util.o'.  Stop.",
        "build/util.o: src/util.c",
        "build/util.o: lib/util.c",
    ),
    (
        "The fetcher build breaks in make at link time with undefined reference to curl_easy_init.",
        "Makefile",
        "cc -o fetch build/fetch.o\n/usr/bin/ld: build/fetch.o: in function `fetch_url':\n"
        "fetch.c:(.text+0x21): undefined reference to `curl_easy_init'\ncollect2: error: ld returned 1 exit "
        "status\nmake: *** [Makefile:8: fetch] Error 1",
        "LDLIBS = -lm",
        "LDLIBS = -lm -lcurl",
    ),
]
CARGO_OK = "   Compiling ledger v0.3.1 (/workspace/ledger)\n    Finished dev [unoptimized + debuginfo] target(s) in 2.41s"
RUST = [
    (
        "cargo build fails in the ledger crate: the borrow checker rejects pushing to the entries vector.",
        "src/ledger.rs",
        "error[E0502]: cannot borrow `self.entries` as mutable because it is also borrowed as immutable\n"
        "  --> src/ledger.rs:42:13\nerror: could not compile `ledger` due to previous error",
        "        let last = self.entries.last().unwrap();",
        "        let last = self.entries.last().unwrap().clone();",
    ),
    (
        "Rust borrow checker error in the cache: cannot borrow self as mutable more than once.",
        "src/cache.rs",
        "error[E0499]: cannot borrow `*self` as mutable more than once at a time\n  --> src/cache.rs:57:9\n"
        "error: could not compile `ledger` due to previous error",
        "        let slot = self.slot_mut(key);",
        "        let index = self.slot_index(key);",
    ),
    (
        "cargo build error after the config refactor: borrow of moved value config in main.",
        "src/main.rs",
        "error[E0382]: borrow of moved value: `config`\n  --> src/main.rs:18:20\n"
        "error: could not compile `ledger` due to previous error",
        "    let server = Server::new(config);",
        "    let server = Server::new(config.clone());",
    ),
    (
        "The Rust borrow checker refuses the balance update: cannot assign to total because it is borrowed.",
        "src/balance.rs",
        "error[E0506]: cannot assign to `total` because it is borrowed\n  --> src/balance.rs:23:9\n"
        "error: could not compile `ledger` due to previous error",
        "    let view = &total;",
        "    let view = total;",
    ),
    (
        "cargo build fails in the CSV reader: the borrowed line does not live long enough.",
        "src/csv.rs",
        "error[E0597]: `line` does not live long enough\n  --> src/csv.rs:31:24\n"
        "error: could not compile `ledger` due to previous error",
        "        fields.push(line.as_str());",
        "        fields.push(line.clone());",
    ),
    (
        "Borrow checker error in the buffer flush: cannot move out of buf because it is borrowed.",
        "src/flush.rs",
        "error[E0505]: cannot move out of `buf` because it is borrowed\n  --> src/flush.rs:12:14\n"
        "error: could not compile `ledger` due to previous error",
        "    let head = &buf[..4];",
        "    let head = buf[..4].to_vec();",
    ),
    (
        "cargo build breaks in the report module: temporary value dropped while borrowed.",
        "src/report.rs",
        "error[E0716]: temporary value dropped while borrowed\n  --> src/report.rs:9:17\n"
        "error: could not compile `ledger` due to previous error",
        '    let name = format!("{}-{}", year, month).as_str();',
        '    let name = format!("{}-{}", year, month);',
    ),
]
TOPICS = {
    "nginx": (NGINX, "nginx -t", NGINX_OK, "infra"),
    "make": (MAKE, "make", "cc -Wall -O2 -c src/main.c -o build/main.o\ncc -o app build/main.o", "cutils"),
    "rust": (RUST, "cargo build", CARGO_OK, "ledger"),
}
# (harness, variant) runs whose last check still fails
FAILING = {("swe", 6), ("cc", 5), ("cc", 6)}
# variants whose first edit is wrong and is followed by a failed check
RETRIED = {1, 4}

SWE_SYSTEM = "\n".join(
    [
        "You are a helpful assistant that can interact with a computer to solve tasks.",
        "<ROLE>",
        "Your primary role is to assist users by executing commands, modifying code, and solving technical "
        "problems effectively. You should be thorough, methodical, and prioritize quality over speed.",
        '* If the user asks a question, like "why is X happening", don\'t try to fix the problem. Just give '
        "an answer to the question.",
        "</ROLE>",
        "<EFFICIENCY>",
        "* Each action you take is somewhat expensive. Wherever possible, combine multiple actions into a "
        "single action, e.g. combine multiple bash commands into one, using sed and grep to edit/view "
        "multiple files at once.",
        "* When exploring the codebase, use efficient tools like find, grep, and git commands with "
        "appropriate filters to minimize unnecessary operations.",
        "</EFFICIENCY>",
        "<FILE_SYSTEM_GUIDELINES>",
        "* When a user provides a file path, do NOT assume it's relative to the current working directory. "
        "First explore the file system to locate the file before working on it.",
        "* If asked to edit a file, edit the file directly, rather than creating a new file with a different "
        "filename.",
        "</FILE_SYSTEM_GUIDELINES>",
        "<TOOLS>",
        "execute_bash: Execute a bash command in the terminal. Long running commands should be run in the "
        "background. Set is_input to true to send input to a running process. Consider the description of "
        "each parameter carefully.",
        "str_replace_editor: Custom editing tool for viewing, creating and editing files. The `old_str` "
        "parameter should match EXACTLY one or more consecutive lines from the original file. Be mindful of "
        "whitespaces! The `new_str` parameter should contain the edited lines that should replace the "
        "`old_str`.",
        "finish: Signals the completion of the current task or conversation.",
        "</TOOLS>",
        "<TROUBLESHOOTING>",
        "* If you've made repeated attempts to solve a problem but tests still fail, step back and reflect "
        "on 5-7 different possible sources of the problem; assess the likelihood of each; address the most "
        "likely one; document your reasoning.",
        "</TROUBLESHOOTING>",
    ]
)
SWE_TEMPLATE = """<uploaded_files>
/workspace/{repo}
</uploaded_files>
I've uploaded a code repository in the directory /workspace/{repo}. Consider the following issue description:

<issue_description>
{task}
</issue_description>

Can you help me implement the necessary changes to the repository so that the requirements specified in the <issue_description> are met?
I've already taken care of all changes to any of the test files described in the <issue_description>. This means you DON'T have to modify the testing logic or any of the tests in any way!
Your task is to make the minimal changes to non-test files in the /workspace directory to ensure the <issue_description> is satisfied.
Follow these steps to resolve the issue:
1. As a first step, it might be a good idea to explore the repo to familiarize yourself with its structure.
2. Create a script to reproduce the error and execute it with `python <filename.py>` using the bash tool, to confirm the error.
3. Edit the source code of the repo to resolve the issue.
4. Rerun your reproduce script and confirm that the error is fixed!
5. Think about edgecases, add comprehensive tests for them in your reproduce script, and run them to make sure your fix handles them as well.
Your thinking should be thorough and so it's fine if it's very long."""
CC_REMINDER = """<system-reminder>
As you answer the user's questions, you can use the following context:
# claudeMd
Codebase and user instructions are shown below. Be sure to adhere to these instructions. IMPORTANT: These instructions OVERRIDE any default behavior and you MUST follow them exactly as written.

Contents of /home/dev/.claude/CLAUDE.md (user's private global instructions for all projects):

- Always run the build or the tests before saying a change is done.
- Prefer the smallest diff that fixes the problem; never reformat code you did not change.
- Never commit or push; leave the working tree for me to review.
- Explain the root cause in one or two sentences before editing anything.
- Use the project's own tooling (make, cargo, nginx -t) rather than ad-hoc scripts.
- Do not install system packages without asking first.
- Keep secrets out of the logs: never print environment variables.
# important-instruction-reminders
Do what has been asked; nothing more, nothing less.
NEVER create files unless they're absolutely necessary for achieving your goal.
ALWAYS prefer editing an existing file to creating a new one.

IMPORTANT: this context may or may not be relevant to your tasks. You should not respond to this context unless it is highly relevant to your task.
</system-reminder>
{task}"""


class Clock:
    def __init__(self, start: datetime):
        self.t = start

    def __call__(self) -> str:
        self.t += timedelta(seconds=17)
        return self.t.isoformat().replace("+00:00", "Z")


def _steps(topic: str, index: int, harness: str) -> list[tuple[str, Any]]:
    """The run as abstract steps: ("say", text), ("run", (command, output, ok)), ("edit", (path, old, new))."""
    variants, check, ok_output, _ = TOPICS[topic]
    task, path, error, bad, good = variants[index]
    wrong = (
        bad.rstrip(";")
        + "  # "
        + ("retry" if harness == "swe" else "tmp")
        + (";" if bad.endswith(";") else "")
    )
    fails = (harness, index) in FAILING
    steps: list[tuple[str, Any]] = [
        ("say", "Let me reproduce the problem first."),
        ("run", (check, error, False)),
        ("say", f"The error points at {path}. Let me look at it."),
        ("run", (f"grep -n '' {path} | head -40", f"12:{bad}\n13:}}", True)),
    ]
    if index in RETRIED or fails:
        steps += [
            ("say", "Trying a small change to that line."),
            ("edit", (path, bad, wrong)),
            ("run", (check, error, False)),
        ]
        bad = wrong
    if fails:
        steps += [("say", "The check still fails, but the remaining error looks unrelated to the issue.")]
    else:
        steps += [
            ("say", f"The root cause is the line in {path}; fixing it."),
            ("edit", (path, bad, good)),
            ("run", (check, ok_output, True)),
        ]
    closing = (
        "I've made the necessary changes and verified the fix. I'm ready to submit."
        if harness == "swe"
        else "Done: the fix is in place and the problem is resolved."
    )
    return [*steps, ("say", closing)]


def _swe_session(topic: str, index: int) -> list[dict[str, Any]]:
    variants, _, _, repo = TOPICS[topic]
    clock = Clock(T0 + timedelta(hours=index, minutes=hash_of(topic)))
    rows: list[dict[str, Any]] = [
        {"_type": "metadata", "model": "gpt-4.1", "agent": "swe-runner"},
        {"role": "system", "content": SWE_SYSTEM},
        {
            "role": "user",
            "content": SWE_TEMPLATE.format(repo=repo, task=variants[index][0]),
            "timestamp": clock(),
        },
    ]
    pending = ""
    for n, (kind, value) in enumerate(_steps(topic, index, "swe")):
        if kind == "say":
            pending = value
            if n == len(_steps(topic, index, "swe")) - 1:
                rows.append({"role": "assistant", "content": value, "timestamp": clock()})
            continue
        call_id = f"call_{topic}_{index}_{n}"
        if kind == "run":
            command, output, ok = value
            name, args = "execute_bash", {"command": f"cd /workspace/{repo} && {command}"}
            result = f"{output}\n[Command finished with exit code {0 if ok else 1}]"
        else:
            path, old, new = value
            name = "str_replace_editor"
            args = {
                "command": "str_replace",
                "path": f"/workspace/{repo}/{path.lstrip('/')}",
                "old_str": old,
                "new_str": new,
            }
            result = f"The file /workspace/{repo}/{path.lstrip('/')} has been edited."
        rows.append(
            {
                "role": "assistant",
                "content": pending,
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": name, "arguments": json.dumps(args)},
                    }
                ],
                "timestamp": clock(),
            }
        )
        rows.append({"role": "tool", "tool_call_id": call_id, "content": result, "timestamp": clock()})
        pending = ""
    return rows


def _cc_session(topic: str, index: int) -> list[dict[str, Any]]:
    variants, _, _, repo = TOPICS[topic]
    clock = Clock(T0 + timedelta(days=1, hours=index, minutes=hash_of(topic)))
    session = f"5b7c9e1e-{hash_of(topic):04x}-4c2d-9e8f-{index:012d}"
    base = {
        "isSidechain": False,
        "userType": "external",
        "cwd": f"/home/dev/{repo}",
        "sessionId": session,
        "version": "1.0.51",
    }
    rows: list[dict[str, Any]] = []
    parent = None

    def add(kind: str, message: dict[str, Any], extra: dict[str, Any] | None = None) -> None:
        nonlocal parent
        uid = f"{kind[0]}{len(rows)}"
        rows.append(
            {
                **base,
                "parentUuid": parent,
                "type": kind,
                "message": message,
                "uuid": uid,
                "timestamp": clock(),
                **(extra or {}),
            }
        )
        parent = uid

    add("user", {"role": "user", "content": CC_REMINDER.format(task=variants[index][0])})
    for n, (kind, value) in enumerate(_steps(topic, index, "cc")):
        if kind == "say":
            add(
                "assistant",
                {
                    "role": "assistant",
                    "model": "claude-sonnet-4",
                    "content": [{"type": "text", "text": value}],
                },
            )
            continue
        tool_id = f"toolu_{topic}_{index}_{n}"
        if kind == "run":
            command, output, ok = value
            block = {
                "type": "tool_use",
                "id": tool_id,
                "name": "Bash",
                "input": {"command": command, "description": "Run the check"},
            }
            result = {
                "type": "tool_result",
                "tool_use_id": tool_id,
                "content": output if ok else f"Exit code 1\n{output}",
                "is_error": not ok,
            }
        else:
            path, old, new = value
            block = {
                "type": "tool_use",
                "id": tool_id,
                "name": "Edit",
                "input": {
                    "file_path": f"/home/dev/{repo}/{path.lstrip('/')}",
                    "old_string": old,
                    "new_string": new,
                },
            }
            result = {
                "type": "tool_result",
                "tool_use_id": tool_id,
                "content": f"The file /home/dev/{repo}/{path.lstrip('/')} has been updated.",
            }
        add(
            "assistant",
            {"role": "assistant", "model": "claude-sonnet-4", "content": [block], "stop_reason": "tool_use"},
        )
        add("user", {"role": "user", "content": [result]})
    return rows


def hash_of(text: str) -> int:
    return sum(ord(c) for c in text) % 60


def expected() -> dict[str, dict[str, Any]]:
    """Per file (relative name): its topic, whether its run passed, and its error line and fix line."""
    out = {}
    for topic, (variants, *_rest) in TOPICS.items():
        for harness in ("swe", "cc"):
            for index, (_, _, error, _, good) in enumerate(variants):
                name = f"{harness}/{topic}-{index}.jsonl"
                line = next(
                    x for x in error.splitlines() if "error" in x.lower() or "emerg" in x or "***" in x
                )
                out[name] = {
                    "topic": topic,
                    "passed": (harness, index) not in FAILING,
                    "error": " ".join(line.split()),
                    "errors": [" ".join(x.split()) for x in error.splitlines()],
                    "fix": good.strip(),
                }
    return out


def main() -> None:
    for harness, build in (("swe", _swe_session), ("cc", _cc_session)):
        (OUT / harness).mkdir(parents=True, exist_ok=True)
        for topic, (variants, *_rest) in TOPICS.items():
            for index in range(len(variants)):
                rows = build(topic, index)
                text = "\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n"
                (OUT / harness / f"{topic}-{index}.jsonl").write_text(text)


if __name__ == "__main__":
    main()
