"""What a notification says about an experiment that ended (`engine.llm.notify`): its id,
name, status, why it stopped (its budget, or a person), its counts and spend, and one line;
never a question, a prompt, a reply or an error text (which may quote them)."""
from __future__ import annotations

from typing import Any

from engine.llm.notify import notify
from engine.store import Store
from engine.store.experiments import experiment_spent, get, progress

NOTIFIED = ("completed", "stopped", "incomplete", "failed")  # the end states a notice is for


def experiment_notice(store: Store, experiment_id: str) -> dict[str, Any]:
    """The notice of an experiment as stored now (see the module)."""
    found, state = get(store, experiment_id), progress(store, experiment_id)
    spent = experiment_spent(store, experiment_id)
    error = str(found.get("error") or "")
    reason = ("budget" if error.startswith("budget") else "a person"
              if found["status"] == "stopped" else "")
    summary = (f"experiment {found['name']!r} {found['status']}"
               + (f" ({reason})" if reason else "")
               + f": {state.done}/{state.total} runs done, {state.failed} failed, "
               f"${spent:,.4f} spent")
    return {"event": "experiment", "experiment_id": experiment_id, "name": found["name"],
            "status": found["status"], "stopped_by": reason or None,
            "set_version": found.get("set_version") or "",
            "counts": {"done": state.done, "total": state.total, "failed": state.failed,
                       "interrupted": state.interrupted},
            "spend_usd": round(spent, 6), "summary": summary}


def notify_ended(store: Store, experiment_id: str, url: str | None = None) -> bool:
    """Send the notice of an experiment that ended to `url` (default the environment's
    `PARLEY_NOTIFY_URL`); False when none is set or it was not sent. Never raises."""
    try:
        notice = experiment_notice(store, experiment_id)
    except Exception:  # a notification never fails what it reports on
        return False
    if notice["status"] not in NOTIFIED:
        return False
    return notify(notice, url)
