"""Offline extraction keeps the knowledge (issue 32): whole error lines, the task without the harness's
boilerplate, the fix (diff and verifying command), and an outcome read from evidence, not from words."""

from __future__ import annotations

import json
import random
import re

import pytest

from ultron.clusters.signature import signatures
from ultron.trajectory.evidence import (
    boilerplate,
    command_of,
    edit_of,
    error_lines,
    strip_boilerplate,
    verification,
)
from ultron.trajectory.extraction import heuristic_experience
from ultron.trajectory.messages import Message, _blocks, own_words
from ultron.trajectory.metrics import heuristic_metrics, is_tool_error
from ultron.trajectory.segmentation import heuristic_spans


def _call(cid: str, name: str, **args: str) -> list[dict]:  # type: ignore[type-arg]
    return [{"id": cid, "name": name, "arguments": json.dumps(args)}]


def _run(*steps: tuple[str, str, bool], closing: str = "Fixed, all tests pass.") -> list[Message]:
    """A session: the task, then (command, output, is an edit) steps, then the closing answer."""
    out = [Message("user", "The config loader crashes on start, please fix it")]
    for n, (command, output, edit) in enumerate(steps):
        if edit:
            calls = _call(
                f"c{n}", "str_replace_editor", path="app/config.py", old_str=command, new_str=output
            )
            out += [
                Message("assistant", "", tool_calls=calls),
                Message("tool", "edited", tool_call_id=f"c{n}"),
            ]
        else:
            calls = _call(f"c{n}", "execute_bash", command=command)
            out += [Message("assistant", "", tool_calls=calls), Message("tool", output, tool_call_id=f"c{n}")]
    return [*out, Message("assistant", closing)]


TRACEBACK = (
    'Traceback (most recent call last):\n  File "app/config.py", line 12, in load\n'
    "    port = int(raw)\nValueError: invalid literal for int() with base 10: '80a'"
)


def test_an_error_line_is_kept_whole_not_its_first_character():
    messages = _run(
        ("python -m app", TRACEBACK, False), ("port = int(raw)", "port = int(raw.strip('a'))", True)
    )
    (item,) = heuristic_experience(messages, "config", 0.9)
    assert "Errors met:\nValueError: invalid literal for int() with base 10: '80a'" in item["content"]
    assert "Errors met: V" not in item["content"]


def test_the_harness_boilerplate_is_stripped_and_the_task_kept():
    template = "You are a careful agent.\nAlways run the tests.\n<issue>\n{}\n</issue>\nMake minimal changes."
    tasks = ["nginx -t fails on proxy_pass", "make fails to link sqrt", "cargo build borrow error", "other"]
    learned = boilerplate(template.format(t) for t in tasks)
    assert strip_boilerplate(template.format("a brand new task"), learned) == "a brand new task"
    messages = _run(
        ("pytest", "1 failed\nE   KeyError: 'port'\nexit code 1", False),
        ("a", "b", True),
        ("pytest", "3 passed", False),
    )
    messages[0] = Message("user", template.format("The loader raises KeyError on a missing port"))
    (item,) = heuristic_experience(messages, "config", 0.9, learned)
    assert item["content"].startswith("The loader raises KeyError on a missing port")
    assert "Always run the tests" not in item["content"] and "careful agent" not in item["content"]


def test_the_resolution_is_the_fix_and_its_check_not_the_sign_off():
    messages = _run(
        ("python -m pytest tests/test_config.py", f"{TRACEBACK}\nexit code 1", False),
        ("port = int(raw)", "port = int(raw.rstrip('a'))", True),  # a first try that still fails
        (
            "python -m pytest tests/test_config.py",
            "FAILED tests/test_config.py::test_port\nexit code 1",
            False,
        ),
        ("port = int(raw.rstrip('a'))", "port = int(re.sub(r'\\D', '', raw))", True),
        ("python -m pytest tests/test_config.py", "4 passed in 0.1s\nexit code 0", False),
        closing="I'm ready to submit.",
    )
    (item,) = heuristic_experience(messages, "config", 0.9)
    assert "+port = int(re.sub(r'\\D', '', raw))" in item["resolution"]
    assert "rstrip('a'))\n+" in item["resolution"]  # the edit that worked, not the first try
    assert "+port = int(raw.rstrip('a'))" not in item["resolution"]
    assert item["resolution"].endswith("Verified with: `python -m pytest tests/test_config.py`")
    assert "ready to submit" not in item["resolution"]
    assert "FAILED tests/test_config.py::test_port" in item["content"]


def test_success_comes_from_the_last_check_not_from_the_assistants_words():
    failing = _run(
        ("make", "undefined reference to `sqrt'\nmake: *** [Makefile:12: stats] Error 1", False),
        ("LDLIBS =", "LDLIBS = -lmath", True),
        ("make", "undefined reference to `sqrt'\nmake: *** [Makefile:12: stats] Error 1", False),
        closing="Done: the build is fixed and all tests pass.",
    )
    check = verification(failing)
    assert check is not None and not check.passed and "`make` failed" in check.detail
    completion = heuristic_metrics(failing)["completion"]
    assert completion.value == 0.0 and "evidence" in completion.detail
    assert heuristic_experience(failing, "build", 0.9) == []  # never a fix that worked
    passing = [*failing[:-2], *_run(("make", "cc -o stats main.o -lm", False))[1:]]
    assert heuristic_metrics(passing)["completion"].value == 1.0


def test_tool_errors_in_the_shapes_build_tools_print_them():
    outputs = {
        'nginx: [emerg] unknown directive "proxy_set_headr" in /etc/nginx/conf.d/site.conf:9': "[emerg]",
        "cc -o app main.o\nmake: *** [Makefile:5: app] Error 2": "make: ***",
        "error[E0502]: cannot borrow `v` as mutable because it is also borrowed as immutable": "E0502",
        "make: *** No rule to make target 'src/util.c', needed by 'build/util.o'.  Stop.": "No rule",
    }
    for text, marker in outputs.items():
        m = Message("tool", text, tool_call_id="x")
        assert is_tool_error(m), text
        (line,) = error_lines([m])
        assert marker in line and line.split() == text.splitlines()[-1].split(), line
    ok = Message(
        "tool", "nginx: configuration file /etc/nginx/nginx.conf test is successful", tool_call_id="y"
    )
    assert not is_tool_error(ok) and error_lines([ok]) == []


CODEX_INSTRUCTIONS = (
    "<user_instructions>\n\n# AGENTS.md\n\n- Use pnpm, never npm.\n- Run `pnpm test` before you finish.\n\n"
    "</user_instructions>"
)
CODEX_ENVIRONMENT = (
    "<environment_context>\n  <cwd>/home/dev/shop</cwd>\n  <shell>zsh</shell>\n</environment_context>"
)
CLAUDE_COMMAND = (
    "<command-name>/clear</command-name>\n<command-message>clear</command-message>\n"
    "<command-args></command-args>"
)
CLAUDE_CAVEAT = (
    "Caveat: The messages below were generated by the user while running local commands. DO NOT respond to "
    "these messages or otherwise consider them in your response unless the user explicitly asks you to."
)
CLAUDE_REMINDER = "<system-reminder>\nThe TodoWrite tool hasn't been used recently.\n</system-reminder>\n"


@pytest.mark.parametrize(
    "harness",
    [
        pytest.param([CODEX_INSTRUCTIONS, CODEX_ENVIRONMENT], id="codex-agents-md"),
        pytest.param([CLAUDE_COMMAND, CLAUDE_CAVEAT], id="claude-code-command"),
    ],
)
def test_what_a_harness_writes_into_user_turns_is_neither_the_task_nor_its_topic(harness):
    task = "The config loader crashes on start, please fix it"
    steps = _run(("python -m app", TRACEBACK, False), ("port = int(raw)", "port = int(raw.strip('a'))", True))
    # the harness's turns first, then the task (with a reminder block glued before it)
    messages = (
        [Message("user", text) for text in harness] + [Message("user", CLAUDE_REMINDER + task)] + steps[1:]
    )
    (item,) = heuristic_experience(messages, "config", 0.9)
    assert item["content"].startswith(task)
    assert "AGENTS.md" not in item["content"] and "<" not in item["content"].split("Errors met")[0]
    (span,) = heuristic_spans(messages)
    assert span.topic == task


def test_a_shell_wrapped_command_array_is_its_script():
    call = {"name": "shell", "arguments": json.dumps({"command": ["bash", "-lc", "pnpm test -- cart"]})}
    assert command_of(call) == "pnpm test -- cart"
    # a command array that is the program itself is kept whole
    call = {"name": "shell", "arguments": json.dumps({"command": ["pytest", "-x", "tests"]})}
    assert command_of(call) == "pytest -x tests"


JEST_FAILURE = (
    "FAIL src/cart/total.test.ts\n  ● cart total › formats prices above 999\n\n"
    '    expect(received).toBe(expected)\n\n    Expected: "1.234,50 €"\n    Received: "NaN €"\n\n'
    "Tests: 1 failed, 23 passed, 24 total"
)


def test_a_jest_failure_gives_its_file_and_its_test_not_the_tally():
    lines = error_lines([Message("tool", JEST_FAILURE, tool_call_id="c1", is_error=True)])
    assert lines == ["● cart total › formats prices above 999", "FAIL src/cart/total.test.ts"]
    # "FAIL" alone is every jest run's: no signature of it pulls unrelated runs together
    assert signatures(lines) == ["cart total › formats prices above"]


OPENHANDS_TASK = (
    "<uploaded_files>\n/workspace/requests__requests__2.31\n</uploaded_files>\nI've uploaded a python code "
    "repository in the directory requests__requests__2.31. Consider the following issue description:\n\n"
    "<issue_description>\nThe config loader crashes on start when the port has a stray letter\n"
    "</issue_description>\n\nCan you help me implement the necessary changes to the repository so that the "
    "requirements specified in the <issue_description> are met?"
)


def test_a_task_block_is_the_task_and_the_template_around_it_the_harnesss():
    messages = [Message("user", OPENHANDS_TASK), *_run(("python -m app", TRACEBACK, False))[1:]]
    (item,) = heuristic_experience(messages, "config", 0.9)
    task = "The config loader crashes on start when the port has a stray letter"
    assert item["content"].startswith(task + "\nErrors met:")
    assert heuristic_spans(messages)[0].topic == task
    cursor = "<user_info>\nOS: linux 6.8\n</user_info>\n<user_query>\nwhy does the docker build fail?\n"
    cursor += "</user_query>"
    assert own_words(cursor) == "why does the docker build fail?"


def test_the_directory_a_command_ran_in_is_not_part_of_the_command():
    def cmd(command: str) -> str:
        return command_of({"name": "execute_bash", "arguments": json.dumps({"command": command})})

    assert (
        cmd("cd /workspace/requests__requests__2.31 && python -m pytest tests -q")
        == "python -m pytest tests -q"
    )
    assert cmd("cd 'my project' && make") == "make"
    assert cmd("cd /srv/app") == "cd /srv/app"


def test_a_jest_suite_that_failed_to_run_gives_the_error_first():
    output = (
        "FAIL src/mocks/server.test.ts\n  ● Test suite failed to run\n\n"
        "    Cannot find module 'msw' from 'src/mocks/server.ts'\n\nTests: 0 total"
    )
    assert error_lines([Message("tool", output, tool_call_id="c1", is_error=True)]) == [
        "Cannot find module 'msw' from 'src/mocks/server.ts'",
        "● Test suite failed to run",
        "FAIL src/mocks/server.test.ts",
    ]


GO_FAILURE = (
    '--- FAIL: TestParseDuration (0.00s)\n    parse_test.go:41: ParseDuration("90m") = 1h0m0s, want 1h30m0s\n'
    "FAIL\nFAIL\tgithub.com/acme/timeutil\t0.012s\nFAIL"
)


def test_go_and_tsc_failures_give_the_assertion_and_the_compiler_error():
    lines = error_lines([Message("tool", GO_FAILURE, tool_call_id="g", is_error=True)])
    # the assertion first, then the test and the package; "FAIL" alone was read across two lines before
    assert lines == [
        'parse_test.go:41: ParseDuration("90m") = 1h0m0s, want 1h30m0s',
        "--- FAIL: TestParseDuration (0.00s)",
        "FAIL github.com/acme/timeutil 0.012s",
    ]
    assert signatures(lines) == ["ParseDuration =, want", "FAIL: TestParseDuration"]
    tsc = "src/cart/total.ts(12,5): error TS2322: Type 'string' is not assignable to type 'number'.\n"
    tsc += "Found 1 error in src/cart/total.ts:12"
    assert error_lines([Message("tool", tsc, tool_call_id="t", is_error=True)]) == [
        "src/cart/total.ts(12,5): error TS2322: Type 'string' is not assignable to type 'number'."
    ]


def test_harness_blocks_are_found_in_one_pass_as_the_lazy_regex_finds_them():
    # `<(tag)>.*?</\1>` read to the end of the text for every opening tag never closed (16 s for 300 kB of
    # them in one user turn); `_blocks` finds the same blocks in one pass
    lazy = re.compile(r"<(system-reminder|issue|user_instructions)(?:\s[^<>]{0,200})?>.*?</\1>", re.I | re.S)
    opening = re.compile(r"<(system-reminder|issue|user_instructions)(?:\s[^<>]{0,200})?>", re.I)
    pieces = ["<system-reminder>", "</system-reminder>", "<ISSUE>", "</issue>", "<user_instructions a=1>"]
    pieces += ["</user_instructions>", "text ", "\n", "<b>", "</b>"]
    rng = random.Random(29)
    for _ in range(20000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))
        expected = [(m.start(), m.end()) for m in lazy.finditer(text)]
        assert [(start, end) for start, _, _, end in _blocks(text, opening)] == expected, text


def test_a_package_installed_to_make_the_check_pass_is_the_fix():
    def shell(cid: str, command: str) -> Message:
        return Message(
            "assistant", "", tool_calls=[{"id": cid, "name": "shell", "arguments": {"command": command}}]
        )

    messages = [
        Message("user", "the api tests fail on a fresh clone with Cannot find module 'msw', please fix"),
        shell("a", "pnpm test"),
        Message(
            "tool", "Cannot find module 'msw' from 'src/mocks/server.ts'", tool_call_id="a", is_error=True
        ),
        shell("b", "pnpm add -D msw"),
        Message("tool", "+ msw 2.1.0", tool_call_id="b", is_error=False),
        shell("c", "pnpm test"),
        Message("tool", "Tests: 24 passed, 24 total", tool_call_id="c", is_error=False),
        Message("assistant", "Done."),
    ]
    (item,) = heuristic_experience(messages, "tests", 0.9)
    # the closing "Done." was the resolution: the install that fixed it was nowhere
    assert item["resolution"] == "pnpm add -D msw\nVerified with: `pnpm test`"


def test_an_install_chained_to_its_check_is_the_install():
    call = {
        "name": "shell",
        "arguments": {"command": "sudo apt-get install -y libssl-dev pkg-config && cargo test"},
    }
    # the resolution read the whole line, then "Verified with:" the same line again
    assert edit_of(call) == "sudo apt-get install -y libssl-dev pkg-config"
    assert edit_of(
        {"name": "shell", "arguments": {"command": "sed -i 's/a/b/' x.py && sed -i 's/c/d/' y.py"}}
    ) == ("sed -i 's/a/b/' x.py && sed -i 's/c/d/' y.py")
