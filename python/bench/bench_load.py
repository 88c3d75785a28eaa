"""The benchmarks' competing load: a spinning process started and stopped by the benchmark."""
import contextlib
import subprocess
import sys


@contextlib.contextmanager
def load(kind):
    """Runs the body quiet ("quiet") or beside one busy-looping process ("busy")."""
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if kind == "busy" else None
    try:
        yield
    finally:
        if busy:
            busy.kill()
            busy.wait()
