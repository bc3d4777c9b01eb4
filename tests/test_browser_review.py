"""In a real browser (issue 31): the Review page shows a pair of answers blinded (no seat,
model, label or protocol name of either run on the page), a judgement made with the keyboard
shortcut is recorded with the side each run was shown on, and Insights shows people's win
rates and the kappa table. Saves the screenshots 44-review and 45-kappa to
$PARLEY_SCREENSHOTS (or a temporary folder)."""
from __future__ import annotations

import random
import re

# A server of this module's own: the queue and the kappa table read every stored run.
from plugins.browser import expect, goto, rerun, settle

from engine import Store, run_debate
from engine.models import Seat

QUESTIONS = ("Should the town build the bridge or the ferry?",
             "Is a four-day week worth trying for the clinic?",
             "Should the library open on Sundays?")
HIDDEN = ("alpha-config", "beta-config", "Athena", "Boreas", "Cassius", "Delphi", "Eos",
          "Fabius", "seed=3", "seed=7", "debate", "proponent", "opponent", "judge")


def _debates(store: Store) -> list[tuple[str, str]]:
    """A pair of runs per question, alpha's first except on the second question (beta's judge
    is the surer, so the machine prefers b, b and a: the kappa table has both columns)."""
    pairs = []
    for number, question in enumerate(QUESTIONS):
        runs = []
        for label, names, seed in (("alpha-config", ("Athena", "Boreas", "Cassius"), 3),
                                   ("beta-config", ("Delphi", "Eos", "Fabius"), 7)):
            spec = f"simulated?seed={seed}"
            runs.append(run_debate(question, proponent=Seat(names[0], spec),
                                   opponent=Seat(names[1], spec), judge=Seat(names[2], spec),
                                   max_rounds=1, store=store, label=label).run_id)
        pairs.append((runs[1], runs[0]) if number == 1 else (runs[0], runs[1]))
    return pairs


def test_review_blinded_and_the_kappa_table(app, page, shots):  # noqa: F811
    base, db_url = app
    store = Store(db_url)
    pairs = _debates(store)
    goto(page, base, "/review")
    main = page.locator("[data-testid='stMain']")
    main.get_by_role("heading", name="Pair 1 of 3").wait_for()
    expect(main).to_contain_text("0 of 3 pairs judged")
    text = main.inner_text()
    leaked = [name for name in HIDDEN
              if re.search(rf"(?<!\w){re.escape(name)}(?!\w)", text, re.IGNORECASE)]
    assert leaked == [], leaked
    settle(page)
    main.screenshot(path=str(shots / "44-review.png"))

    # the shortcut listens on the page (focus outside the comment box)
    main.get_by_role("heading", name="Pair 1 of 3").click()
    rerun(page, lambda: page.keyboard.press("a"))
    main.get_by_role("heading", name="Pair 2 of 3").wait_for()
    expect(main).to_contain_text("1 of 3 pairs judged")
    prefs = store.preferences()
    assert len(prefs) == 1
    row = prefs.iloc[0]
    # "A better" (the left answer) is recorded as a win of the run that was shown on the left
    assert row["choice"] == row["shown_left"] and row["shown_left"] in ("a", "b")
    assert {row["run_a"], row["run_b"]} in [set(pair) for pair in pairs]

    draw = random.Random(5)  # more judgements from other people, for the kappa table
    for rater in ("bo", "cy", "di"):
        for a, b in pairs:
            store.add_preference(a, b, rater=rater, choice=draw.choice(["a", "b", "tie"]),
                                 shown_left=draw.choice(["a", "b"]))
    for a, _ in pairs:
        store.add_rating(a, rater="bo", score=draw.randint(1, 5))
    goto(page, base, "/insights")
    heading = main.get_by_role("heading", name="People's judgement")
    heading.wait_for()
    expect(main).to_contain_text("Cohen's kappa")
    expect(main).to_contain_text("Human win rate by configuration")
    expect(main).not_to_contain_text("gave one and the same choice")  # both columns used
    settle(page)
    heading.evaluate("e => e.scrollIntoView({block: 'start'})")
    # two animation frames: the scroll has been drawn before the screenshot
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    page.screenshot(path=str(shots / "45-kappa.png"))
    expect(page.locator("[data-testid='stException']")).to_have_count(0)
    assert page.dialogs == [], page.dialogs
    print(f"review screenshots in {shots}: 44-review, 45-kappa")
