"""Schemathesis hooks for .ci/schemathesis.

Three adjustments, and nothing else.

A long poll (`POST /v1/leases` with `wait_ms`) may legitimately wait up to a minute when no
work fits; generated values that large would spend the run's time budget waiting. Keep them
under 200 ms. Only integer values are changed: invalid ones (strings, negatives) still reach
the server as generated.

`PUT /v1/policy` takes TOML text (`application/toml`), which schemathesis has no serializer for:
the generated string is sent as UTF-8.

An empty path parameter is sent as `-` (see `before_call`).
"""

import schemathesis


@schemathesis.hook
def map_body(context, body):
    if isinstance(body, dict):
        wait = body.get("wait_ms")
        if isinstance(wait, int) and not isinstance(wait, bool) and wait > 200:
            body["wait_ms"] = wait % 200
    return body


@schemathesis.serializer("application/toml")
def toml_serializer(context, value):
    """`PUT /v1/policy` takes TOML text: send what was generated as UTF-8 text."""
    if isinstance(value, bytes):
        return {"data": value}
    if not isinstance(value, str):
        value = str(value)
    return {"data": value.encode("utf-8", "surrogatepass")}


@schemathesis.hook
def before_call(context, case, kwargs):
    """An empty path parameter (a job id taken from a generated body, in stateful tests) makes
    `/v1/jobs//cancel`, which the HTTP client sends as `/v1/jobs/cancel`: another route, which
    rightly answers 405. Send `-` instead, an id no job has."""
    params = case.path_parameters
    if params:
        for name, value in list(params.items()):
            if value == "":
                params[name] = "-"
