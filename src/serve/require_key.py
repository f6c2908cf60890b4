"""halobox: vLLM's API key on every route (vLLM's own --api-key guards only
/v1, /v2, /inference and /cohere; /invocations, /metrics, /ping, /load and
the rest answer anyone). A pure ASGI middleware, added with
`--middleware halobox_require_key.RequireKey`: every HTTP request and
WebSocket needs `Authorization: Bearer $VLLM_API_KEY` (compared in constant
time), except `GET`/`HEAD /health`, which only says whether the server is up.
The key is read from the environment, never from argv."""

import hashlib
import hmac
import os

OPEN = {("GET", "/health"), ("HEAD", "/health")}


class RequireKey:
    def __init__(self, app):
        self.app = app
        key = os.environ.get("VLLM_API_KEY", "")
        if not key:
            raise RuntimeError("halobox_require_key: VLLM_API_KEY is empty")
        self.digest = hashlib.sha256(key.encode("utf-8")).digest()

    def allowed(self, scope):
        for name, value in scope.get("headers") or ():
            if name.lower() != b"authorization":
                continue
            scheme, _, token = value.decode("latin-1").partition(" ")
            if scheme.lower() != "bearer":
                return False
            given = hashlib.sha256(token.encode("latin-1")).digest()
            return hmac.compare_digest(given, self.digest)
        return False

    async def __call__(self, scope, receive, send):
        kind = scope["type"]
        if kind not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        path = scope.get("path", "")
        root = scope.get("root_path", "")
        if root and path.startswith(root):
            path = path[len(root) :]
        if (kind == "http" and (scope.get("method"), path) in OPEN) or self.allowed(scope):
            return await self.app(scope, receive, send)
        if kind == "websocket":
            return await send({"type": "websocket.close", "code": 1008})
        body = b'{"error":"Unauthorized: send Authorization: Bearer KEY"}'
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"www-authenticate", b"Bearer"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
