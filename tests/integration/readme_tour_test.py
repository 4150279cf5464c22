#!/usr/bin/env python3
"""README.md's tour, run as a newcomer runs it, so the README and delayq cannot
drift apart.

The commands are read from README.md itself: every ```sh block of the sections
"A tour", "Many servers on one Redis" and "Security and TLS" (but a block under an HTML comment
saying "not run by the tour test"), in order. Each block is pasted whole, as a
newcomer pastes it: written at once into one bash whose stdin, stdout and
stderr are a terminal (a pty, so `redis-cli` prints as it does on a screen and
raw into a pipe, and `cmd &` and `kill %1 %2` mean what they say), in a scratch
directory, with a `delayq serve` already running there the way `make run`
starts it (the default embedded store in ./data). Nothing is waited for or
filled in between the commands of a block: a block that needs a server to be
up, or a receipt from an earlier reply, must say so itself (`delayq ping
--wait`, `$(jq ...)`). Each command must exit 0, and its output must match the
"# " lines right under it in the README (a blank line or the next command ends
them; a here-document's lines belong to its command): "..." stands for anything (a line of its own: any number of lines), a
run of spaces for any run of spaces. Output with a Redis error (`(error) ...`)
fails a step that does not expect it.

The blocks run exactly as written but for these substitutions, and only these:
  - `build/bin/delayq`           -> the binary under test;
  - a port (after `localhost:`, `127.0.0.1:`, `-p `, `--port `, `--tls-port `, `--http-port `,
    `--resp-port `)              -> a free port, the same one for every
    mention: 7700 and 7701 are the running server's, the others (Redis on
    6390, servers on 7710/7711, ...) free ones the test picks;
  - `/tmp/`                      -> a scratch directory's tmp/.
The CLI's default server, 127.0.0.1:7701, is the running server's RESP port
(DELAYQ_SERVER in bash's environment); no other DELAYQ_* is set. Nothing
sleeps: each reserve long-polls until its job is due.

    /usr/bin/python3 tests/integration/readme_tour_test.py --binary build/bin/delayq \
        [--readme README.md]
"""
import os
import pty
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import unittest

import harness
from harness import Server, closed_port, wait_until

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
README = os.path.join(ROOT, "README.md")
SECTIONS = ("A tour", "Many servers on one Redis", "Security and TLS")
SKIP_MARK = "not run by the tour test"
# The running server's ports as the README names them (`make run`'s defaults).
MAKE_RUN_HTTP, MAKE_RUN_RESP = 7700, 7701

PORT_RE = re.compile(r"(?:(?<=localhost:)|(?<=127\.0\.0\.1:)|(?<=-p )|(?<=--port )|(?<=--tls-port )"
                     r"|(?<=--http-port )|(?<=--resp-port ))(\d{2,5})\b")
LISTEN_RE = re.compile(r"--(?:http-|resp-|tls-)?port (\d{2,5})\b")
# What a person would have to fill in by hand: a block with one cannot be pasted.
PLACEHOLDER_RE = re.compile(r"<[a-z][a-z ]*>")
STEP_TIMEOUT = 30.0
# `<<'EOF'`, `<<EOF`, `<<"EOF"`: the lines after the command, up to EOF, are its input.
HEREDOC_RE = re.compile(r"<<-?\s*['\"]?(\w+)['\"]?")


class Step:
    def __init__(self, command, section):
        self.command = command  # as the README has it
        self.section = section
        self.expected = []      # the "# " lines under it, without the "# "

    def __repr__(self):
        return f"[{self.section}] {self.command}"


def sections(text):
    """{title: body} of the README's "## " sections."""
    out = {}
    parts = re.split(r"^## (.+)$", text, flags=re.M)
    for title, body in zip(parts[1::2], parts[2::2]):
        out[title.strip()] = body
    return out


def tour_blocks(text):
    """The tour's blocks, in README order: each a list of steps."""
    blocks = []
    by_title = sections(text)
    for title in SECTIONS:
        if title not in by_title:
            raise AssertionError(f"README.md has no section '## {title}'")
        body = by_title[title]
        for m in re.finditer(r"^```sh\n(.*?)^```$", body, re.S | re.M):
            before = body[:m.start()].rstrip("\n").rsplit("\n", 1)[-1]
            if SKIP_MARK in before:
                continue
            blocks.append(block_steps(m.group(1), title))
    return blocks


def tour_steps(text):
    """The steps of the tour, in README order."""
    return [step for block in tour_blocks(text) for step in block]


def block_steps(block, section):
    steps = []
    current = None
    lines = block.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line.strip():
            current = None  # a blank line ends a command's expected output
        elif line.lstrip().startswith("#"):
            if current is not None:
                current.expected.append(line[2:] if line.startswith("# ") else line[1:])
            # else: prose above a command
        else:
            command = line
            while command.endswith("\\") and i < len(lines):
                command = command[:-1] + lines[i].strip()
                i += 1
            # A here-document is part of its command, up to its terminator.
            heredoc = HEREDOC_RE.search(command)
            if heredoc:
                while i < len(lines):
                    command += "\n" + lines[i]
                    i += 1
                    if lines[i - 1] == heredoc.group(1):
                        break
            current = Step(command, section)
            steps.append(current)
    return steps


def line_pattern(expected):
    """One expected line as a regex for one output line."""
    parts = [re.sub(r"(\\ )+", r"\\s+", re.escape(p)) for p in expected.split("...")]
    return re.compile(".*".join(parts))


def output_matches(expected, output):
    """Does `output` (lines) match `expected` (lines; "..." alone: any lines)?"""
    memo = {}

    def match(e, o):
        if (e, o) in memo:
            return memo[(e, o)]
        if e == len(expected):
            ok = o == len(output)
        elif expected[e].strip() == "...":
            ok = any(match(e + 1, k) for k in range(o, len(output) + 1))
        else:
            ok = (o < len(output) and line_pattern(expected[e]).fullmatch(output[o].rstrip())
                  is not None and match(e + 1, o + 1))
        memo[(e, o)] = ok
        return ok

    return match(0, 0)


class Shell:
    """One bash on a terminal: its stdin, stdout and stderr are a pty, as in a
    terminal window, and it reads its commands from a pipe on fd 3, so a block
    written there at once is a paste. After each command the test appends a
    marker line (`printf`) carrying the command's exit status, which splits the
    terminal's output by command. Its own session, so what it leaves running
    is ended with it."""

    def __init__(self, cwd, env):
        self._marker = "tour-step-done-%d" % os.getpid()
        read_end, self._write_end = os.pipe()
        self._master, slave = pty.openpty()
        self.proc = subprocess.Popen(
            ["bash", "--noprofile", "--norc", "/dev/fd/%d" % read_end],
            stdin=slave, stdout=slave, stderr=slave, cwd=cwd, env=env,
            pass_fds=(read_end,), start_new_session=True)
        os.close(read_end)
        os.close(slave)
        self._out = b""
        self._eof = False
        self._cond = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        while True:
            try:
                chunk = os.read(self._master, 65536)
            except OSError:  # EIO: every process holding the terminal has gone
                chunk = b""
            with self._cond:
                if not chunk:
                    self._eof = True
                else:
                    self._out += chunk.replace(b"\r\n", b"\n")
                self._cond.notify_all()
            if not chunk:
                return

    def paste(self, commands):
        """Writes the commands at once, each followed by its marker."""
        script = "".join(f"{c}\nprintf '\\n%s %d %d\\n' {self._marker} {i} $?\n"
                         for i, c in enumerate(commands))
        os.write(self._write_end, script.encode())

    def result(self, index, command, timeout=STEP_TIMEOUT):
        """(exit status, output) of the index-th command of the latest paste."""
        pattern = re.compile(rb"\n" + self._marker.encode() + rb" %d (\d+)\n" % index)
        with self._cond:
            found = self._cond.wait_for(lambda: self._eof or pattern.search(self._out),
                                        timeout=timeout)
            m = pattern.search(self._out)
            if not found or m is None:
                raise AssertionError(f"`{command}` did not finish within {timeout}s; "
                                     f"output so far: {self._out!r}")
            output, self._out = self._out[:m.start()], self._out[m.end():]
        return int(m.group(1)), output.decode(errors="replace")

    def close(self):
        os.close(self._write_end)  # bash reads the end of its script and exits
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # what it left running: its session
        except ProcessLookupError:
            pass
        self.proc.wait()
        self._reader.join(timeout=10)
        os.close(self._master)


def accepts(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


class ReadmeTourTest(unittest.TestCase):
    readme = README

    def setUp(self):
        with open(self.readme, encoding="utf-8") as f:
            self.blocks = tour_blocks(f.read())
        self.scratch = tempfile.mkdtemp(prefix="delayq-tour-")
        self.addCleanup(shutil.rmtree, self.scratch, ignore_errors=True)
        self.cwd = os.path.join(self.scratch, "clone")
        os.mkdir(self.cwd)
        os.mkdir(os.path.join(self.scratch, "tmp"))
        # `make run`: `delayq serve` with its defaults in the working directory.
        self.server = Server(data_dir=None, cwd=self.cwd)
        self.addCleanup(self.server.stop)
        self.ports = {MAKE_RUN_HTTP: self.server.http_port, MAKE_RUN_RESP: self.server.port}
        self.redis_ports = []

    def port(self, readme_port):
        if readme_port not in self.ports:
            self.ports[readme_port] = closed_port()
        return self.ports[readme_port]

    def substitute(self, command):
        # The README's own text is rewritten first, the paths put in last: a
        # checkout under /tmp/ (or with a port-like number in its path) must
        # not have its binary's path rewritten too.
        c = command.replace("build/bin/delayq", "\0BINARY\0").replace("/tmp/", "\0TMP\0")
        c = PORT_RE.sub(lambda m: str(self.port(int(m.group(1)))), c)
        c = c.replace("\0TMP\0", os.path.join(self.scratch, "tmp") + "/")
        c = c.replace("\0BINARY\0", harness.BINARY)
        return c

    def stop_leftover_redis(self):
        """A daemonized redis-server the tour started and did not shut down
        (it failed before): ended by its PID, which it reports itself."""
        for port in self.redis_ports:
            r = subprocess.run(["redis-cli", "-p", str(port), "INFO", "server"],
                               capture_output=True, text=True, timeout=10)
            m = re.search(r"^process_id:(\d+)", r.stdout, re.M)
            if m:
                os.kill(int(m.group(1)), signal.SIGKILL)

    def test_the_tour_runs_pasted_whole(self):
        self.assertGreater(sum(len(b) for b in self.blocks), 10, self.blocks)
        env = harness.server_env({"DELAYQ_SERVER": "127.0.0.1:%d" % self.server.port})
        shell = Shell(self.cwd, env)
        self.addCleanup(self.stop_leftover_redis)
        self.addCleanup(shell.close)
        for block in self.blocks:
            commands = [self.substitute(step.command) for step in block]
            for step in block:
                if step.command.lstrip().startswith("redis-server"):
                    self.redis_ports += [self.port(int(p))
                                         for p in LISTEN_RE.findall(step.command)]
            shell.paste(commands)
            for i, (step, command) in enumerate(zip(block, commands)):
                status, output = shell.result(i, command)
                lines = output.rstrip("\n").split("\n") if output.strip() else []
                where = (f"\nstep: {step}\nran: {command}\nexit status: {status}\noutput:\n"
                         f"{output}\nexpected:\n" + "\n".join(step.expected))
                self.assertEqual(status, 0, where + self.logs())
                if not any(e.startswith("(error)") for e in step.expected):
                    self.assertNotIn("(error)", output, where)
                if step.expected:
                    self.assertTrue(output_matches(step.expected, lines), where + self.logs())
        # The README's own stop commands stopped what the tour started.
        for readme_port, port in self.ports.items():
            if readme_port not in (MAKE_RUN_HTTP, MAKE_RUN_RESP):
                wait_until(lambda: not accepts(port), timeout=10,
                           what=f"README port {readme_port} ({port}) to close")
        # Nothing but ./data is left in the clone (the rest went to tmp/).
        self.assertEqual(os.listdir(self.cwd), ["data"])
        self.assertEqual(self.server.proc.poll(), None, self.server.text)

    def logs(self):
        """The ends of the logs the tour's servers wrote into tmp/."""
        out = ""
        tmp = os.path.join(self.scratch, "tmp")
        for name in sorted(os.listdir(tmp)):
            path = os.path.join(tmp, name)
            if name.endswith(".log") and os.path.isfile(path):
                with open(path, errors="replace") as f:
                    out += f"\n{name}:\n" + f.read()[-2000:]
        return out


class TourParsingTest(unittest.TestCase):
    """The reading of the README that the tour relies on."""

    def test_expected_lines_follow_their_command_and_prose_is_skipped(self):
        block = ("# prose\ncurl a\n# {\"ok\":true}\n\n# more prose\nredis-cli b   # note\n"
                 "# 1) 1) \"x\"\n# ...\ncmd c \\\n    --flag\n")
        steps = block_steps(block, "s")
        self.assertEqual([s.command for s in steps],
                         ["curl a", "redis-cli b   # note", "cmd c --flag"])
        self.assertEqual([s.expected for s in steps],
                         [['{"ok":true}'], ['1) 1) "x"', "..."], []])

    def test_dots_match_anything_and_spaces_any_spaces(self):
        self.assertTrue(output_matches(['{"id":"a","run_at_ms":...}'],
                                       ['{"id":"a","run_at_ms":123}']))
        self.assertFalse(output_matches(['{"ok":true}'], ['{"ok":false}']))
        self.assertTrue(output_matches(["jobs: 0", "..."], ["jobs:      0", "a: 1", "b: 2"]))
        self.assertTrue(output_matches(["x", "..."], ["x"]))
        self.assertFalse(output_matches(["jobs: 0"], ["jobs: 0", "more"]))

    def test_the_readme_tour_has_the_steps_it_promises(self):
        with open(README, encoding="utf-8") as f:
            text = f.read()
        steps = tour_steps(text)
        commands = "\n".join(s.command for s in steps)
        for needle in ("/v1/jobs", "/v1/reserve", "/finish", "redis-cli -p 7701 ADD",
                       "build/bin/delayq reserve", "/healthz", "/metrics", "redis-server",
                       "delayq ping", "--wait", "redis-cli -p 6390 shutdown", "kill %1 %2"):
            self.assertIn(needle, commands)
        # Every block can be pasted as it is: nothing for a person to fill in.
        for s in steps:
            self.assertIsNone(PLACEHOLDER_RE.search(s.command), s)
        # Redis beside `make run`: other ports, loopback only, its files out of the tree.
        redis = [s.command for s in steps if s.command.startswith("redis-server")]
        self.assertEqual(len(redis), 2)
        for command in redis:
            self.assertIn("--bind 127.0.0.1", command)
            self.assertIn("--dir /tmp/", command)
        for s in steps:
            if s.section in ("Many servers on one Redis", "Security and TLS"):
                for p in PORT_RE.findall(s.command):
                    self.assertNotIn(int(p), (MAKE_RUN_HTTP, MAKE_RUN_RESP), s)
        # Every step but those that start or stop something, or write a file, says what it
        # prints.
        for s in steps:
            quiet = (s.command.endswith("&") or " & " in s.command or "shutdown" in s.command
                     or s.command.startswith(("kill ", "mkdir ", "redis-server", "receipt=",
                                              "cat > ", "openssl "))
                     or " finish " in s.command)
            if not quiet:
                self.assertTrue(s.expected, f"{s}: no expected output under it")


if __name__ == "__main__":
    harness.main(
        arguments=lambda p: p.add_argument("--readme", default=README,
                                           help="another copy of README.md to walk"),
        setup=lambda args: setattr(ReadmeTourTest, "readme", os.path.abspath(args.readme)))
