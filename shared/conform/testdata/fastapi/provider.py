"""A provider of the A2AWire invocation protocol written with FastAPI as the
protocol's published text describes one, and nothing more: POST / with
{"task", "input"}, one capability, 200 {"output", "metadata"} or an error
{"error", "message"}, and FastAPI's own answers where the published text lets
the framework answer (405, 422). The conform package's tests run `awn
conform`'s checklist against it (fastapi_test.go).

Two query parameters select what is served, so that one process serves every
variant the tests need:

  mode=stateful   honour X-A2AWire-Task-Id: the answer of a task id is
                  recorded and a repeat gets it back instead of a new run.
  break=<name>    a deliberate bug, each against one line of the checklist
                  (BREAKS below); the tests check that conform fails it.

GET /executions?<the same parameters> counts the runs of the capability so
far, the tests' effect count. State is per process and per variant.
"""

import time
from typing import Any, Dict, Optional
from urllib.parse import parse_qs

from fastapi import FastAPI, Header, Request
from fastapi.exception_handlers import request_validation_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, StrictStr

AGENT = "fastapi-provider"
CAPABILITY = "word-count"

BREAKS = {
    "unknown-task-500": "an unknown task is answered 500, not a 4xx",
    "no-agent": "metadata carries no agent",
    "error-in-200": "a text that is not a string is answered 200 with the error inside output",
    "bad-input-500": "bad input is answered 500, not 400",
    "ignore-content-type": "a body is read as JSON whatever its Content-Type",
    "get-200": "GET is answered 200, not 405",
    "input-required": "an absent input is refused with 422, not read as {}",
    "malformed-400": "a body that is not JSON is answered 400, not 422",
    "rerun": "stateful, but a repeated task id runs again",
    "replay-not-identical": "stateful, but a repeat gets the stored answer altered",
}


class Invocation(BaseModel):
    # StrictStr: pydantic 1 (Debian's) would turn a task 5 into "5";
    # pydantic 2's str refuses it, as the published request shape does.
    task: StrictStr
    input: Dict[str, Any] = {}


def variant(query: str) -> str:
    q = parse_qs(query)
    return q.get("mode", [""])[0] + "/" + q.get("break", [""])[0]


class Breaks:
    """The bugs that sit in front of FastAPI's own handling."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            brk = parse_qs(scope["query_string"].decode()).get("break", [""])[0]
            if brk not in ("", *BREAKS):
                await JSONResponse(status_code=500, content={"error": "internal_error", "message": "unknown break " + brk})(scope, receive, send)
                return
            if brk == "ignore-content-type":
                headers = [(k, v) for k, v in scope["headers"] if k != b"content-type"]
                scope = dict(scope, headers=headers + [(b"content-type", b"application/json")])
            if brk == "get-200" and scope["method"] == "GET" and scope["path"] == "/":
                await JSONResponse({"output": {}, "metadata": {"agent": AGENT, "capability": "", "duration_ms": 0}})(scope, receive, send)
                return
        await self.app(scope, receive, send)


app = FastAPI()
app.add_middleware(Breaks)

# (variant, task id) → (status, body) of a completed task; variant → runs.
records: Dict[Any, Any] = {}
executions: Dict[str, int] = {}


@app.exception_handler(RequestValidationError)
async def validation_error(request: Request, exc: RequestValidationError):
    if request.query_params.get("break") == "malformed-400" and any(e.get("type") == "value_error.jsondecode" for e in exc.errors()):
        return JSONResponse(status_code=400, content={"error": "bad_json", "message": "the body is not JSON"})
    return await request_validation_exception_handler(request, exc)


@app.get("/executions")
async def count(request: Request):
    return {"executions": executions.get(variant(request.url.query), 0)}


@app.post("/")
async def invoke(inv: Invocation, request: Request, x_a2awire_task_id: Optional[str] = Header(None)):
    v = variant(request.url.query)
    brk = request.query_params.get("break", "")
    stateful = request.query_params.get("mode") == "stateful"
    if brk == "input-required" and "input" not in inv.__fields_set__:
        return JSONResponse(status_code=422, content={"detail": [{"loc": ["body", "input"], "msg": "field required", "type": "value_error.missing"}]})
    # Nothing is awaited between the look-up and the record: on the one
    # event loop, concurrent repeats of a task id cannot both run.
    key = (v, x_a2awire_task_id)
    if stateful and x_a2awire_task_id is not None and brk != "rerun" and key in records:
        status, body = records[key]
        if brk == "replay-not-identical":
            body = {**body, "output": {**body.get("output", {}), "replayed": True}}
        return JSONResponse(status_code=status, content=body)
    status, body = run(inv, v, brk, stateful)
    if stateful and x_a2awire_task_id is not None and status < 500:
        records[key] = (status, body)
    return JSONResponse(status_code=status, content=body)


def run(inv: Invocation, v: str, brk: str, stateful: bool):
    start = time.monotonic()
    if inv.task != CAPABILITY:
        if brk == "unknown-task-500":
            return 500, {"error": "internal_error", "message": "no handler for " + inv.task}
        return 400, {"error": "unsupported_capability", "message": f"{AGENT} does not offer {inv.task!r}; it offers {CAPABILITY}"}
    metadata = {"agent": AGENT, "capability": CAPABILITY}
    text = inv.input.get("text")
    if not isinstance(text, str):
        message = "input.text must be a string"
        if brk == "bad-input-500":
            return 500, {"error": "internal_error", "message": message}
        if brk == "error-in-200" and "text" in inv.input:
            return 200, {"output": {"error": "invalid_input", "message": message}, "metadata": {**metadata, "duration_ms": 0}}
        return 400, {"error": "invalid_input", "message": message}
    executions[v] = executions.get(v, 0) + 1
    output = {"words": len(text.split())}
    if stateful:
        # The side effect a repeat must not repeat: the run's number.
        output["execution"] = executions[v]
    metadata["duration_ms"] = int((time.monotonic() - start) * 1000)
    if brk == "no-agent":
        del metadata["agent"]
    return 200, {"output": output, "metadata": metadata}
