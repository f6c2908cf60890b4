"""Decode speed of a serving engine, measured steadily enough to judge 5%:
a 4-token warm-up, then REQUESTS greedy requests of MAX_TOKENS tokens each,
one after another. For each request it times the client's view (tokens
over the request's seconds) and reads the engine's own witness:

- vLLM: the deltas of `vllm:generation_tokens_total` and
  `vllm:request_decode_time_seconds_sum` on its /metrics (decode time
  excludes the first token, so the rate is (tokens - 1) over it);
- llama.cpp: `timings.predicted_per_second` of /completion's answer.

Prints one JSON object: `client` and `engine` each with `median`, `min`,
`max` (tokens per second) and `spread` ((max - min) / median), and the
per-request figures.

usage: python3 decode.py URL ENGINE MODEL PROMPT MAX_TOKENS REQUESTS [API_KEY_FILE]
  ENGINE: vllm or llama.cpp (MODEL is ignored for llama.cpp)
"""

import json
import statistics
import sys
import time
import urllib.request


def post(url, body, headers):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers)
    t0 = time.monotonic()
    with urllib.request.urlopen(req, timeout=600) as r:
        answer = json.load(r)
    return answer, time.monotonic() - t0


def vllm_counters(base, headers):
    """generation tokens and decode seconds so far, from vLLM's /metrics."""
    req = urllib.request.Request(base + "/metrics", headers=headers)
    with urllib.request.urlopen(req, timeout=30) as r:
        text = r.read().decode()
    tokens = decode = 0.0
    for line in text.splitlines():
        if line.startswith("vllm:generation_tokens_total"):
            tokens += float(line.rsplit(" ", 1)[1])
        elif line.startswith("vllm:request_decode_time_seconds_sum"):
            decode += float(line.rsplit(" ", 1)[1])
    return tokens, decode


def one_vllm(base, model, prompt, n, headers):
    before = vllm_counters(base, headers)
    body = {"model": model, "prompt": prompt, "max_tokens": n, "temperature": 0, "ignore_eos": True}
    answer, secs = post(base + "/v1/completions", body, headers)
    after = vllm_counters(base, headers)
    got = answer.get("usage", {}).get("completion_tokens", n)
    tokens, decode = after[0] - before[0], after[1] - before[1]
    engine = (tokens - 1) / decode if decode > 0 and tokens > 1 else None
    return got / secs, engine


def one_llama(base, prompt, n, headers):
    body = {"prompt": prompt, "n_predict": n, "temperature": 0, "top_k": 1, "ignore_eos": True, "cache_prompt": False}
    answer, secs = post(base + "/completion", body, headers)
    got = answer.get("tokens_predicted", n)
    return got / secs, (answer.get("timings") or {}).get("predicted_per_second")


def summary(xs):
    xs = [x for x in xs if x]
    if not xs:
        return None
    med = statistics.median(xs)
    return {"median": round(med, 2), "min": round(min(xs), 2), "max": round(max(xs), 2),
            "spread": round((max(xs) - min(xs)) / med, 3)}


def main():
    if len(sys.argv) < 7:
        sys.exit(__doc__)
    base, engine, model, prompt = sys.argv[1].rstrip("/"), sys.argv[2], sys.argv[3], sys.argv[4]
    n, requests = int(sys.argv[5]), int(sys.argv[6])
    headers = {"Content-Type": "application/json"}
    if len(sys.argv) > 7:
        with open(sys.argv[7]) as f:
            headers["Authorization"] = "Bearer " + f.read().strip()
    if engine == "vllm":
        run = lambda k: one_vllm(base, model, prompt, k, headers)  # noqa: E731
    elif engine == "llama.cpp":
        run = lambda k: one_llama(base, prompt, k, headers)  # noqa: E731
    else:
        sys.exit(f"engine {engine!r}: vllm or llama.cpp")
    run(4)
    client, own = [], []
    for _ in range(requests):
        c, e = run(n)
        client.append(round(c, 2))
        own.append(round(e, 2) if e else None)
    print(json.dumps({"client": summary(client), "engine": summary(own),
                      "requests": [{"client": c, "engine": e} for c, e in zip(client, own)]}))


if __name__ == "__main__":
    main()
