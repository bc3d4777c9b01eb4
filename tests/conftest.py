"""Shared fixtures: a temporary SQLite store per test, the store on every backend (`backend`:
SQLite always, PostgreSQL when PARLEY_TEST_PG_URL is set), and scripted fake chat models.

Run by pytest-xdist (`-n 2`, which pyproject.toml's addopts asks for), each worker gets a
PostgreSQL database of its own, created beside PARLEY_TEST_PG_URL's and named after the worker,
so that one worker's emptying of the database never meets another's tests.

Markers: `browser` (the tests that drive Chromium) and `slow` (the measured slowest, `SLOW`);
`python -m pytest -q -m "not browser and not slow"` runs the fast lane."""
from __future__ import annotations

import json
import os
from uuid import uuid4

import pytest
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage
from openai_stub import ENDPOINT_SETTINGS, SimulatedOpenAI, loopback_only
from sqlalchemy import create_engine, make_url, text

from engine import Store
from engine.store import Base, MigrationRow

# Fixtures several test modules share, with their helpers, which the tests import from the
# plugin (never from another test module): the browser tests' `page`, `app`, `shared_app`
# and `shots`, and the store full of hostile strings, `hostile`.
pytest_plugins = ["plugins.browser", "plugins.hostile"]


def _worker_database(url: str, worker: str) -> str:
    """`url` with its database replaced by `<database>_<worker>`, created when missing."""
    base = make_url(url)
    name = f"{base.database}_{worker}"
    engine = create_engine(base, isolation_level="AUTOCOMMIT")
    with engine.connect() as connection:
        if connection.execute(text("SELECT 1 FROM pg_database WHERE datname = :name"),
                              {"name": name}).first() is None:
            connection.execute(text(f'CREATE DATABASE "{name}"'))
    engine.dispose()
    return base.set(database=name).render_as_string(hide_password=False)


NEXT_ITEM = pytest.StashKey[object]()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_teardown(item, nextitem):
    """Note the test this process runs next (a pytest-xdist worker runs its own share, in its
    own order), before the fixtures are torn down: the browser session stops when that test
    needs no browser (plugins.browser.page)."""
    item.stash[NEXT_ITEM] = nextitem


# The tests that drive Chromium: every test of a `test_browser*` file, and any other test that
# asks for a browser page or the shared app server (or is marked `browser` by hand).
BROWSER_FIXTURES = frozenset({"page", "shared_app"})


# The slow tests, by measurement: each took this many seconds of its own (setup, call and
# teardown, over all its parameters) in `python -m pytest -m "not browser" --durations` on the
# 2-core machine (a shared one: the figures say which tests to leave out, not how fast they
# are). A file name stands for all its tests. Re-measure before adding or removing one.
SLOW: dict[str, float] = {
    "tests/test_insights_scale.py::test_the_store_adds_up_what_the_frames_added_up": 767,
    "tests/test_real_model.py::test_every_protocol_runs_and_ends_with_a_status": 683,
    "tests/test_hostile_store.py::test_cli_runs_show_export_keep_working_and_delete_removes_the_bad_row":
        250,
    "tests/test_gate.py::test_an_a_a_pair_passes_in_at_least_19_of_20_seed_pairs": 191,
    "tests/test_labels.py::test_fuzzed_imported_labels_are_refused_or_stored_sound": 171,
    "tests/test_budget.py::test_a_budget_holds_across_two_workers": 160,
    "tests/test_experiment_results_sql.py::test_the_sql_path_gives_what_the_pandas_path_gave": 143,
    "tests/test_hostile_store.py::test_fuzzed_imports_are_all_or_nothing_and_whatever_is_accepted_reads_back":
        142,
    "tests/test_real_model.py::test_an_experiment_runs_through_the_registered_endpoint": 132,
    "tests/test_budget.py::test_configurations_of_different_cost_end_within_one_dearest_cell_on_two_workers":
        121,
    "tests/test_experiment_results_sql.py::test_the_report_adds_up_as_a_run_by_run_count_does": 113,
    "tests/test_hostile_third_pass.py::test_a_key_stored_through_an_error_message_is_redacted_everywhere":
        108,
    "tests/test_consensus.py::test_a_symmetric_world_gives_a_flat_accuracy_by_round_curve": 105,
    "tests/test_endpoint_limits.py::test_two_processes_share_an_endpoints_rpm": 101,
    "tests/test_store_status.py::test_ctrl_c_and_sigterm_store_interrupted_not_failed_with_cancelled_error":
        94,
    "tests/test_started_by.py::test_a_worker_gives_the_runs_the_experiments_starter_not_its_own":
        93,
    "tests/test_positions.py::test_the_report_measures_a_declared_position_bias_and_none_without":
        92,
    "tests/test_endpoint_limits.py::test_a_429_slows_every_process_on_the_endpoint": 90,
    "tests/test_fuzz.py::test_import_runs_imports_or_refuses_whole": 86,
    "tests/test_page_head.py::test_every_page_served_names_the_files_and_each_one_is_served_immutable":
        83,
    "tests/test_cli.py::test_plain_run_prints_run_id_and_summary": 80,
    "tests/test_reply_caps.py::test_the_run_page_never_reads_every_reply_whole": 79,
    "tests/test_cli.py::test_export_json_jsonl_csv_to_files": 78,
    "tests/test_replay.py::test_outcome_invariants": 71,
    "tests/test_hostile_store.py::test_one_imported_record_can_no_longer_make_the_whole_store_unreadable":
        68,
    "tests/test_cli.py::test_import_into_a_fresh_database": 64,
    "tests/test_poison_jobs.py::test_a_poisoned_job_is_failed_once_and_never_stalls_housekeeping":
        59,
    "tests/test_consensus.py::test_random_round_tables_never_crash_and_stay_in_range": 59,
    "tests/test_store_status.py::test_a_run_can_be_stopped_from_another_process": 58,
    "tests/test_cli.py::test_bad_input_exit_status_of_the_real_process": 55,
    "tests/test_cli.py::test_run_peer_review_json": 53,
    "tests/test_council.py::test_draw_labels_is_stable_across_processes": 53,
    "tests/test_access_services.py::test_a_stranger_sees_only_the_sign_in": 53,
    "tests/test_experiment_results_sql.py::test_metrics_keys_picked_in_the_database_read_as_python_reads_them":
        50,
    "tests/test_fuzz.py::test_any_reply_degrades_only_its_own_turn": 49,
    "tests/test_search.py::test_fuzzed_queries_never_raise": 49,
    "tests/test_experiments.py::test_resume_after_a_crash": 48,
    "tests/test_experiment_results_sql.py::test_a_configuration_is_sent_once_per_distinct_one": 47,
    "tests/test_cli.py::test_runs_lists_stored_runs": 45,
    "tests/test_consensus.py::test_measured_conformity_in_a_society_agrees_with_the_declared_parameter":
        44,
    "tests/test_hostile_store.py::test_runs_page_names_unreadable_rows_and_deletes_them": 42,
    "tests/test_fuzz.py::test_tally_counts_every_ballot": 40,
    "tests/test_bad_input.py::test_cli_exit_status_from_a_real_process": 38,
    "tests/test_cli.py::test_show_prints_the_run_and_its_turns": 34,
    "tests/test_search.py::test_the_runs_page_search_box_narrows_the_table_and_shows_the_snippet":
        33,
    "tests/test_leaderboard.py::test_runs_that_all_went_one_way_still_give_an_interval_that_narrows_with_n":
        32,
    "tests/test_layout.py::test_the_store_meets_the_protocols_without_importing_them": 32,
    "tests/test_leaderboard.py::test_intervals_hold_the_point_and_narrow_with_more_runs": 32,
    "tests/test_fuzz.py::test_imported_runs_never_enter_an_experiments_accounting": 31,
    "tests/test_cli.py::test_run_debate_json": 31,
    "tests/test_consensus.py::test_measured_persuasion_in_a_panel_agrees_with_the_declared_parameter":
        30,
    "tests/test_fuzz.py::test_yaml_loaders_raise_only_config_or_yaml_errors": 30,
    "tests/test_vega.py::test_any_numbers_make_a_histogram_a_browser_reads": 29,
    "tests/test_endpoint_limits_workers.py::test_two_workers_share_an_endpoints_rpm": 28,
    "tests/test_page_speed.py::test_streamlit_run_finds_the_app_and_warms_it_before_serving": 28,
    "tests/test_reliability.py::test_concurrent_writer_processes_share_one_sqlite_file": 27,
    "tests/test_insights_scale.py::test_past_the_sample_size_a_section_says_it_was_drawn_from_a_sample":
        27,
    "tests/test_insights_scale.py::test_an_import_that_hides_a_simulated_seat_is_still_simulated":
        27,
    "tests/test_replay.py::test_the_uncaught_leader_stays_ahead_under_its_bound": 26,
    "tests/test_replay.py::test_stops_lie_within_the_run_and_thresholds_are_monotone": 25,
    "tests/test_simulated_flag.py::test_insights_report_keeps_kinds_apart": 25,
    "tests/test_unanswered.py::test_experiment_show_prints_the_unanswered_count": 25,
    "tests/test_vega.py::test_any_counts_make_json_a_browser_reads": 24,
    "tests/test_council.py::test_the_cli_runs_a_council": 24,
    "tests/test_replay.py::test_the_insights_what_if_view": 24,
    "tests/test_cli_secrets.py::test_the_project_file_wins_over_the_home_file": 24,
    "tests/test_line_grammar.py::test_the_stance_grammar_ends_in_a_short_stance": 23,
    "tests/test_insights_scale.py::test_the_runs_page_says_how_many_match_beyond_its_page": 23,
    "tests/test_insights_scale.py::test_the_filters_offer_what_the_runs_hold_without_reading_them":
        22,
    "tests/test_line_grammar.py::test_the_judge_grammar_allows_only_replies_read_in_full": 22,
    "tests/test_insights_scale.py::test_the_summary_counts_every_run_once_and_a_dead_running_run_as_interrupted":
        22,
    "tests/test_hostile_store.py::test_a_database_from_a_newer_parley_is_refused_at_open_with_one_line":
        22,
    "tests/test_access_services.py::test_a_viewers_run_page_disables_start_and_save_and_says_why":
        22,
    "tests/test_keys_stay_home.py::test_key_never_goes_to_a_base_url_typed_in_the_app": 22,
    "tests/test_access_services.py::test_an_analyst_may_start_but_not_save_and_an_admin_both": 21,
    "tests/test_access_services.py::test_only_an_admin_sees_delete_on_a_run": 21,
    "tests/test_replay.py::test_an_experiments_what_if_tab": 21,
    "tests/test_vega.py::test_any_rates_make_json_a_browser_reads": 21,
    "tests/test_openai_http.py::test_debate_through_the_cli": 21,
}


def _slow(item) -> bool:
    test = item.nodeid.split("[", 1)[0]
    return test in SLOW or test.split("::", 1)[0] in SLOW


def pytest_collection_modifyitems(config, items):
    """Mark the browser tests `browser` and the measured slow ones `slow`, so that
    `-m "not browser and not slow"` runs the fast lane."""
    for item in items:
        if item.path.name.startswith("test_browser") or BROWSER_FIXTURES & set(
                getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.browser)
        if _slow(item):
            item.add_marker(pytest.mark.slow)


def pytest_configure(config):
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    url = os.environ.get("PARLEY_TEST_PG_URL")
    if worker and url and url.startswith("postgresql"):
        os.environ["PARLEY_TEST_PG_URL"] = _worker_database(url, worker)


@pytest.fixture
def store(tmp_path):
    """A fresh SQLite store in a temporary file."""
    return Store(f"sqlite:///{tmp_path / 'parley.db'}")


class RecordingModel(FakeMessagesListChatModel):
    """A fake chat model that answers from a list (or a function) and keeps what it received.

    `replies` items may be strings, or exceptions to raise for that call.
    `received` holds each call's messages as [(role, content), ...].
    """

    received: list = []
    script: list = []
    fn: object = None

    def __init__(self, replies=(), fn=None, **kw):
        super().__init__(responses=[AIMessage(content="unused")], **kw)
        object.__setattr__(self, "received", [])
        object.__setattr__(self, "script", list(replies))
        object.__setattr__(self, "fn", fn)

    def _answer(self, messages):
        convo = [(m.type, m.content) for m in messages]
        self.received.append(convo)
        if self.fn is not None:
            value = self.fn(convo)
        else:
            value = self.script[min(len(self.received), len(self.script)) - 1] \
                if self.script else ""
        if isinstance(value, BaseException):
            raise value
        return value

    def _generate(self, messages, stop=None, run_manager=None, **kw):
        from langchain_core.outputs import ChatGeneration, ChatResult
        return ChatResult(generations=[ChatGeneration(message=AIMessage(
            content=self._answer(messages)))])

    async def _agenerate(self, messages, stop=None, run_manager=None, **kw):
        return self._generate(messages, stop, run_manager, **kw)


@pytest.fixture
def recording_model():
    """Factory: recording_model(["reply 1", "reply 2", ValueError("boom")]) or fn=callable."""
    return RecordingModel


@pytest.fixture
def db_url(tmp_path, monkeypatch):
    """A temporary SQLite URL set as PARLEY_DB_URL for the pages (their store is cached per
    URL, so tests never share one)."""
    url = f"sqlite:///{tmp_path / 'parley.db'}"
    monkeypatch.setenv("PARLEY_DB_URL", url)
    return url


def _fresh_pg(url: str) -> None:
    engine = create_engine(url)
    with engine.begin() as connection:
        Base.metadata.drop_all(connection)
        MigrationRow.__table__.drop(connection, checkfirst=True)
        for table in ("experiment_cells", "experiments"):
            connection.execute(text(f"DROP TABLE IF EXISTS {table} CASCADE"))
    engine.dispose()


def fresh_pg_url() -> str:
    """The PostgreSQL test database (PARLEY_TEST_PG_URL), emptied: the test is skipped
    without one, and fails instead when PARLEY_REQUIRE_PG=1 (CI)."""
    url = os.environ.get("PARLEY_TEST_PG_URL")
    if not url:
        if os.environ.get("PARLEY_REQUIRE_PG") == "1":
            pytest.fail("PARLEY_REQUIRE_PG=1 but PARLEY_TEST_PG_URL is not set")
        pytest.skip("no PostgreSQL server (set PARLEY_TEST_PG_URL; .ci/run starts one)")
    _fresh_pg(url)
    return url


@pytest.fixture(params=["sqlite", "postgresql"])
def backend_url(request, tmp_path):
    """A new SQLite file, or the emptied PostgreSQL test database (skipped without one)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'parley.db'}"
    return fresh_pg_url()


@pytest.fixture
def backend(backend_url):
    return Store(backend_url)


@pytest.fixture
def pg_url():
    """A fresh database on the test server, dropped after the test."""
    url = os.environ.get("PARLEY_TEST_PG_URL")
    if not url:
        if os.environ.get("PARLEY_REQUIRE_PG") == "1":
            pytest.fail("PARLEY_REQUIRE_PG=1 but PARLEY_TEST_PG_URL is not set")
        pytest.skip("no PostgreSQL server (set PARLEY_TEST_PG_URL; .ci/run starts one)")
    name = f"parley_pool_{uuid4().hex[:10]}"
    admin = create_engine(make_url(url).set(database="postgres"), isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f"CREATE DATABASE {name}"))
    yield make_url(url).set(database=name).render_as_string(hide_password=False)
    with admin.connect() as connection:
        connection.execute(text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                                "WHERE datname = :name"), {"name": name})
        connection.execute(text(f"DROP DATABASE IF EXISTS {name}"))
    admin.dispose()


@pytest.fixture
def stub_endpoint(monkeypatch):
    """The loopback OpenAI-compatible stub (`openai_stub.SimulatedOpenAI`), registered as the
    endpoint `stub` (`openai:MODEL?endpoint=stub`), with no endpoint setting, key or price
    of the environment in the way."""
    loopback_only(monkeypatch, *ENDPOINT_SETTINGS, "PARLEY_PRICES")
    with SimulatedOpenAI() as stub:
        monkeypatch.setenv("PARLEY_ENDPOINTS", json.dumps({"stub": {"base_url": stub.base_url}}))
        yield stub
