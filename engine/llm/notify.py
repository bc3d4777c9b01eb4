"""Notifications: one JSON POST to the operator's `PARLEY_NOTIFY_URL` (or `notify_url` under
`[parley]` in secrets) when an experiment ends (completed, stopped by its budget or a person,
incomplete, failed) and when a gate fails.

What is sent: the event, the experiment's id and name, its status, counts, spend and a
one-line summary; never a key, a prompt, a question or a reply. The address obeys the
endpoints' network rules (`engine.llm.urls.check_url`: http or https, no credentials in it;
never a link-local or cloud metadata address, checked again on what the name resolves to when
connecting, `engine.llm.transport`), and a redirect is not followed. A POST that fails is
retried a bounded number of times with backoff, then logged; a notification never fails what
it reports on.
"""
from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Mapping
from typing import Any

from engine.llm.secretsfile import setting
from engine.llm.transport import guard_connections
from engine.llm.urls import check_url, risky_host
from engine.models import ConfigError

NOTIFY_ENV = "PARLEY_NOTIFY_URL"
ATTEMPTS = 3  # one POST and two retries
TIMEOUT = 5.0  # seconds per attempt
BACKOFF = 0.5  # seconds before the first retry, doubled before each next one
log = logging.getLogger(__name__)


def notify_url(environ: Mapping[str, str] | None = None,
               secrets: Mapping[str, Any] | None = None) -> str | None:
    """The notification address: `PARLEY_NOTIFY_URL` in `environ` (default the process's),
    else `notify_url` under `[parley]` in `secrets`; None when neither is set. `ConfigError`
    when it breaks the network rules (see the module)."""
    env = os.environ if environ is None else environ
    raw: Any = env.get(NOTIFY_ENV) or None
    if raw is None:
        section = setting(secrets, "parley")
        raw = section.get("notify_url") if isinstance(section, Mapping) else None
    if raw is None or raw == "":
        return None
    url = check_url(raw, NOTIFY_ENV)
    reason = risky_host(url)
    if reason:
        raise ConfigError(f"{NOTIFY_ENV}: {reason}; a notification is never sent there",
                          "input")
    return url


def send(url: str, payload: Mapping[str, Any], *, attempts: int = ATTEMPTS,
         timeout: float = TIMEOUT, backoff: float = BACKOFF) -> bool:
    """POST `payload` as JSON to `url` (checked by `notify_url`), retrying a connection error
    or a 5xx/429 answer up to `attempts` times in all; True when a 2xx answered. Never
    raises: a notification that cannot be sent is logged."""
    import httpx
    body = json.dumps(payload, ensure_ascii=False, default=str).encode("utf-8")
    try:
        client = httpx.Client(timeout=timeout, follow_redirects=False)
        guard_connections(client, asynchronous=False)
    except Exception as exc:  # an httpx without the backend the guard wraps: send nothing
        log.warning("notification not sent: %s", exc)
        return False
    wait, problem = backoff, ""
    with client:
        for attempt in range(max(1, attempts)):
            if attempt:
                time.sleep(wait)
                wait *= 2
            try:
                answer = client.post(url, content=body,
                                     headers={"Content-Type": "application/json"})
            except Exception as exc:  # refused address, no route, time-out: retried
                problem = f"{type(exc).__name__}: {exc}"
                continue
            if answer.is_success:
                return True
            problem = f"HTTP {answer.status_code}"
            if answer.status_code != 429 and answer.status_code < 500:
                break  # the receiver refuses it: sending again would not help
    log.warning("notification to %s not sent: %s", url.split("?")[0], problem)
    return False


def notify(payload: Mapping[str, Any], url: str | None = None,
           environ: Mapping[str, str] | None = None, **kw: Any) -> bool:
    """Send `payload` to `url` (default: `notify_url(environ)`); False when no address is
    set, it breaks the rules (logged) or the POST failed (logged). Never raises."""
    try:
        target = notify_url({NOTIFY_ENV: url}) if url else notify_url(environ)
    except ConfigError as exc:
        log.warning("notification not sent: %s", exc)
        return False
    return send(target, payload, **kw) if target else False
