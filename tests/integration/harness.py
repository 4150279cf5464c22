"""What the black-box tests share: a `delayq serve` process on free loopback
ports, started per test class and ended by PID, and a deadline-bounded wait.
Nothing here sleeps to wait for time."""
import os
import re
import signal
import subprocess
import threading
import time

BINARY = None  # set by each script's main from --binary


def wait_until(predicate, timeout=5.0, what="condition"):
    """Polls `predicate` until it returns a true value or `timeout` passes."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.005)  # a poll interval, not a wait for time to pass


class Server:
    """`delayq serve` with both protocols on ports the kernel picks."""

    def __init__(self, *extra):
        self.proc = subprocess.Popen(
            [BINARY, "serve", "--http-port", "0", "--resp-port", "0", *extra],
            stderr=subprocess.PIPE, text=True)
        self.http_port = None
        self.port = None  # RESP
        self.log = []
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and (self.http_port is None or self.port is None):
            line = self.proc.stderr.readline()
            if not line:
                break
            self.log.append(line)
            m = re.search(r"serving HTTP on 127\.0\.0\.1:(\d+)", line)
            if m:
                self.http_port = int(m.group(1))
            m = re.search(r"serving RESP on 127\.0\.0\.1:(\d+)", line)
            if m:
                self.port = int(m.group(1))
        if self.http_port is None or self.port is None:
            self.stop()
            raise RuntimeError("server did not start: " + "".join(self.log))
        # The rest of stderr is collected by a thread, so the server never
        # blocks on a full pipe.
        self.reader = threading.Thread(target=self._read_log, daemon=True)
        self.reader.start()

    def _read_log(self):
        for line in self.proc.stderr:
            self.log.append(line)

    @property
    def address(self):
        """host:port of the RESP listener, as the command line takes it."""
        return "127.0.0.1:%d" % self.port

    def signal(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)

    def stop(self):
        """SIGTERM, then the exit code; the rest of stderr goes to self.log."""
        self.signal()
        try:
            code = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        reader = getattr(self, "reader", None)
        if reader is not None:
            reader.join(timeout=10)
        else:
            self.log.append(self.proc.stderr.read())
        self.proc.stderr.close()
        return code
