"""One greedy completion from llama-server's own /completion endpoint, as
JSON on stdout: the text, the token ids, how many, and the seconds it took
(the same fields as complete.py, for llama.cpp).

usage: python3 complete-llama.py URL PROMPT N_PREDICT [API_KEY_FILE]
"""

import json
import sys
import time
import urllib.request


def main():
    url, prompt, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    headers = {"Content-Type": "application/json"}
    if len(sys.argv) > 4:
        with open(sys.argv[4]) as f:
            headers["Authorization"] = "Bearer " + f.read().strip()
    body = {
        "prompt": prompt,
        "n_predict": n,
        "temperature": 0,
        "top_k": 1,
        "ignore_eos": True,
        "cache_prompt": False,
        "return_tokens": True,
    }
    req = urllib.request.Request(url.rstrip("/") + "/completion", data=json.dumps(body).encode(), headers=headers)
    t0 = time.monotonic()
    with urllib.request.urlopen(req, timeout=600) as r:
        answer = json.load(r)
    secs = time.monotonic() - t0
    tokens = answer.get("tokens") or []
    print(json.dumps({
        "text": answer.get("content", ""),
        "tokens": tokens,
        "completion_tokens": answer.get("tokens_predicted", len(tokens)),
        "secs": round(secs, 3),
    }))


if __name__ == "__main__":
    main()
