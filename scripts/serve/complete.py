"""One greedy completion from an OpenAI-compatible server, as JSON on stdout:
the text, the tokens (from logprobs), how many, and the seconds it took.

usage: python3 complete.py URL MODEL PROMPT MAX_TOKENS [API_KEY_FILE]
"""

import json
import sys
import time
import urllib.request


def main():
    url, model, prompt, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    headers = {"Content-Type": "application/json"}
    if len(sys.argv) > 5:
        with open(sys.argv[5]) as f:
            headers["Authorization"] = "Bearer " + f.read().strip()
    body = {
        "model": model,
        "prompt": prompt,
        "max_tokens": n,
        "temperature": 0,
        "logprobs": 1,
        "ignore_eos": True,
    }
    req = urllib.request.Request(
        url.rstrip("/") + "/v1/completions", data=json.dumps(body).encode(), headers=headers
    )
    t0 = time.monotonic()
    with urllib.request.urlopen(req, timeout=600) as r:
        answer = json.load(r)
    secs = time.monotonic() - t0
    choice = answer["choices"][0]
    tokens = (choice.get("logprobs") or {}).get("tokens") or []
    print(json.dumps({
        "text": choice["text"],
        "tokens": tokens,
        "completion_tokens": answer.get("usage", {}).get("completion_tokens", len(tokens)),
        "secs": round(secs, 3),
    }))


if __name__ == "__main__":
    main()
