"""The serve's downtime as a user sees it, for scripts/bench-upgrade.sh.

  poll.py run URL PROMPT KEY_FILE
      Asks llama-server's /completion for one greedy token every 50 ms (each
      on a new connection, the key from KEY_FILE in the Authorization
      header), until killed. One line per poll on stdout, flushed:
      `SENT ANSWERED ok` or `SENT ENDED fail WHY` (Unix seconds). A poll that
      gets no answer within 30 s fails.
  poll.py down LOG FROM
      The outages in LOG from FROM (Unix seconds) on: each a run of failed
      polls, from the first failed poll's send to the next answer. Prints
      `TOTAL N FIRST LAST` (seconds down in all, how many outages, when the
      first began and the last ended) and each outage on stderr; exits 1 when
      no poll failed after FROM (the serve never went down) or the last
      outage has no answer after it.
  poll.py stamp T0
      Copies stdin to stdout, each line prefixed with the seconds since T0.
"""

import json
import sys
import time
import urllib.error
import urllib.request

INTERVAL = 0.05
TIMEOUT = 30


def run(url, prompt, key_file):
    with open(key_file) as f:
        key = f.read().strip()
    body = json.dumps({
        "prompt": prompt,
        "n_predict": 1,
        "temperature": 0,
        "top_k": 1,
        "cache_prompt": False,
    }).encode()
    headers = {"Content-Type": "application/json", "Authorization": "Bearer " + key}
    while True:
        sent = time.time()
        try:
            req = urllib.request.Request(url.rstrip("/") + "/completion", data=body, headers=headers)
            with urllib.request.urlopen(req, timeout=TIMEOUT) as r:
                answer = json.load(r)
            if "content" not in answer:
                raise ValueError("no content in the answer")
            line = f"{sent:.3f} {time.time():.3f} ok"
        except (OSError, ValueError, urllib.error.URLError) as e:
            why = " ".join(str(e).split())[:120] or type(e).__name__
            line = f"{sent:.3f} {time.time():.3f} fail {why}"
        print(line, flush=True)
        time.sleep(max(0.0, sent + INTERVAL - time.time()))


def down(log, since):
    polls = []
    for raw in open(log):
        f = raw.split(maxsplit=3)
        if len(f) >= 3 and float(f[0]) >= since:
            polls.append((float(f[0]), float(f[1]), f[2] == "ok", f[3].strip() if len(f) > 3 else ""))
    outages, start, why = [], None, ""
    for sent, ended, ok, what in polls:
        if not ok and start is None:
            start, why = sent, what
        elif ok and start is not None:
            outages.append((start, ended, why))
            start = None
    if start is not None:
        print(f"no answer after the outage that began at {start:.3f} ({why})", file=sys.stderr)
        sys.exit(1)
    if not outages:
        print("no poll failed: the serve never went down", file=sys.stderr)
        sys.exit(1)
    for a, b, w in outages:
        print(f"  down {b - a:.2f} s: from {a - since:.2f} s to {b - since:.2f} s after the start ({w})", file=sys.stderr)
    total = sum(b - a for a, b, _ in outages)
    print(f"{total:.2f} {len(outages)} {outages[0][0]:.3f} {outages[-1][1]:.3f}")


def stamp(t0):
    for line in sys.stdin:
        print(f"+{time.time() - t0:7.2f} {line}", end="", flush=True)


def main():
    what, args = sys.argv[1], sys.argv[2:]
    if what == "run":
        run(*args)
    elif what == "down":
        down(args[0], float(args[1]))
    elif what == "stamp":
        stamp(float(args[0]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
