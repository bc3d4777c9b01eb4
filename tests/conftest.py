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
from sqlalchemy import create_engine, inspect, make_url, select, text

from engine import Store
from engine.store.schema import Base, MigrationRow

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
    "tests/test_hostile_store.py::test_cli_runs_show_export_keep_working_and_delete_removes_the_bad_row":
        250,
    "tests/test_gate.py::test_an_a_a_pair_passes_in_at_least_19_of_20_seed_pairs": 191,
    "tests/test_labels.py::test_fuzzed_imported_labels_are_refused_or_stored_sound": 171,
    "tests/test_budget.py::test_a_budget_holds_across_two_workers": 160,
    "tests/test_experiment_results_sql.py::test_the_sql_path_gives_what_the_pandas_path_gave": 143,
    "tests/test_hostile_store.py::test_fuzzed_imports_are_all_or_nothing_and_whatever_is_accepted_reads_back":
        142,
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
    # Measured on 2026-12-07: the fast lane in four chunks of files, `-n 0 --durations=0`,
    # load average 5 to 17 on the shared 2-core machine; every test of 5 s or more of its
    # own there (153 tests, 1784 s of the lane's 2798 s in tests of 1 s or more).
    "tests/test_workers.py::test_three_workers_one_killed_every_cell_exactly_once": 67,
    "tests/test_words.py::test_every_chart_title_is_printed_once": 67,
    "tests/test_workers.py::test_workers_reconnect_after_losing_the_database": 49,
    "tests/test_cli_secrets.py::test_an_endpoint_and_key_in_secrets_toml_reach_the_server_and_go_nowhere_else":
        49,
    "tests/test_words.py::test_no_identifier_and_nothing_raw_in_any_state": 39,
    "tests/test_insights_answers.py::test_hostile_metrics_give_typed_values_or_none": 31,
    "tests/test_hostile_config.py::test_the_run_page_shows_a_malformed_saved_configuration_instead_of_crashing":
        29,
    "tests/test_labels.py::test_a_forged_label_refuses_the_whole_import": 27,
    "tests/test_reply_caps.py::test_a_vote_against_an_endpoint_of_huge_answers": 27,
    "tests/test_presets.py::test_every_preset_runs_end_to_end_on_the_simulated_model": 25,
    "tests/test_presets.py::test_every_preset_runs_end_to_end_on_an_openai_compatible_server": 24,
    "tests/test_crash_safety.py::test_sigkill_mid_experiment_then_resume": 24,
    "tests/test_workers.py::test_stop_cancels_queued_cells_and_stops_running_ones": 23,
    "tests/test_cli_status.py::test_a_run_where_every_call_failed_exits_1_and_says_why": 23,
    "tests/test_insights_scale.py::test_a_section_reads_its_runs_results_once_and_past_a_bound_a_sample":
        21,
    "tests/test_fuzz_jobs.py::test_the_stores_sql_reads_a_payload_as_read_job_does": 21,
    "tests/test_labels.py::test_a_bad_preference_is_refused": 21,
    "tests/test_secrets.py::test_key_is_used_but_never_stored_exported_or_logged": 20,
    "tests/test_gate.py::test_a_candidate_that_always_agrees_with_the_majority_fails_on_majority_adoption":
        20,
    "tests/test_poison_jobs.py::test_an_experiment_with_only_poison_jobs_left_is_settled_not_kept_running":
        19,
    "tests/test_hostile_store.py::test_malformed_turns_are_refused_with_their_record": 19,
    "tests/test_insights_scale.py::test_a_sample_is_every_kth_run_in_time_order": 19,
    "tests/test_cli_status.py::test_a_completed_run_with_some_failed_calls_exits_0": 19,
    "tests/test_calibration_drill.py::test_the_runs_tab_lists_a_bins_runs_and_shows_all_again": 18,
    "tests/test_placebo.py::test_every_protocol_carries_the_donors_messages_where_it_carried_its_own":
        18,
    "tests/test_experiment_results_sql.py::test_a_label_that_ran_two_configurations_reads_each_run_with_its_own":
        18,
    "tests/test_calibration_drill.py::test_every_point_of_the_diagram_opens_exactly_the_runs_counted_in_its_bin":
        17,
    "tests/test_council.py::test_fuzz_a_ranking_written_with_noise_reads_back": 17,
    "tests/test_layout.py::test_no_protocol_is_named_outside_its_package": 16,
    "tests/test_placebo.py::test_the_experiments_page_shows_the_placebo": 15,
    "tests/test_bench.py::test_a_small_fixture_has_its_runs_turns_on_the_first_only_and_real_and_simulated":
        15,
    "tests/test_hostile_store.py::test_every_page_on_a_read_only_database_shows_the_banner": 14,
    "tests/test_judgement.py::test_a_turn_that_disagrees_with_its_seat_is_refused": 14,
    "tests/test_page_speed.py::test_a_store_the_warm_up_cannot_open_is_left_to_the_pages": 14,
    "tests/test_hostile_store.py::test_cli_refuses_an_import_file_over_the_size_cap_before_reading_it":
        14,
    "tests/test_judgement.py::test_labels_of_the_runs_a_file_adds_are_written_once_each_and_marked":
        14,
    "tests/test_keys_stay_home.py::test_free_base_urls_in_the_app_are_called_without_the_key": 14,
    "tests/test_governance.py::test_the_shared_html_and_experiment_show_carry_the_published_figures":
        13,
    "tests/test_governance.py::test_the_preset_runs_on_the_simulated_model_and_the_chart_overlays_theirs":
        13,
    "tests/test_reliability.py::test_fault_soak_every_protocol_completes_honestly": 12,
    "tests/test_line_grammar.py::test_the_draft_grammar_ends_in_a_short_answer": 12,
    "tests/test_placebo.py::test_the_cost_of_consensus_preset_sets_debate_against_its_placebo_and_their_figures":
        12,
    "tests/test_line_grammar.py::test_the_final_line_grammar_ends_in_a_short_line": 12,
    "tests/test_judgement.py::test_a_simulated_seats_turn_costs_nothing_whatever_the_file_says": 12,
    "tests/test_budget.py::test_configurations_of_different_cost_end_within_one_dearest_cell": 12,
    "tests/test_judgement.py::test_six_saves_give_one_rating_per_run_and_per_turn": 11,
    "tests/test_hostile_usage.py::test_hostile_usage_never_makes_a_paid_run_free_or_failed": 11,
    "tests/test_judgement.py::test_many_tabs_at_once_leave_one_preference": 11,
    "tests/test_gate.py::test_a_candidate_missing_one_question_fails_naming_it": 11,
    "tests/test_rejudge.py::test_the_cli_rejudges_and_experiment_show_and_the_html_report_say_so":
        11,
    "tests/test_fuzz.py::test_question_files_raise_only_config_errors": 11,
    "tests/test_hostile_replies.py::test_tolerant_json_extraction_is_linear_and_bounded": 11,
    "tests/test_labels.py::test_a_bad_rating_is_refused": 11,
    "tests/test_influence.py::test_every_credit_is_an_opportunity": 10,
    "tests/test_hostile_third_pass.py::test_one_long_reply_never_fails_a_run_on_postgresql": 10,
    "tests/test_access_pages.py::test_sign_in_settings_without_auth_are_refused_on_every_page": 10,
    "tests/test_judgement.py::test_an_older_database_keeps_the_latest_of_its_duplicates": 10,
    "tests/test_fuzz_jobs.py::test_load_payload_never_raises": 10,
    "tests/test_gate.py::test_the_cli_gates_against_the_approved_baseline_and_writes_markdown": 10,
    "tests/test_positions.py::test_the_results_page_shows_positions_and_says_when_there_are_no_pairs":
        10,
    "tests/test_reply_caps.py::test_a_200_mb_compressed_body_is_never_inflated_past_the_cap": 10,
    "tests/test_call_policy_app.py::test_experiment_form_writes_the_call_policy_into_the_spec": 10,
    "tests/test_secrets.py::test_key_appears_on_no_page": 9,
    "tests/test_fuzz.py::test_load_mapping_raises_only_config_errors": 9,
    "tests/test_hostile_store.py::test_malformed_records_are_refused_with_their_line_and_nothing_is_written":
        9,
    "tests/test_rough_edges.py::test_home_demo_count_is_fresh_after_storing_and_the_demo_is_idempotent":
        9,
    "tests/test_judgement.py::test_the_database_refuses_a_second_label_written_around_the_store": 9,
    "tests/test_experiment_edges.py::test_starting_a_second_experiment_shows_it_says_so_and_clears_the_form":
        9,
    "tests/test_judgement.py::test_two_tabs_give_one_preference_the_latest": 9,
    "tests/test_dynamics.py::test_influence_covers_every_flip_to_a_held_answer": 9,
    "tests/test_search.py::test_hostile_queries_never_raise": 9,
    "tests/test_workers.py::test_the_cell_guard_lets_one_taker_run_a_cell_once": 9,
    "tests/test_labels.py::test_labels_travel_with_their_runs": 9,
    "tests/test_hostile_usage.py::test_timeouts_bill_the_estimated_input_of_every_attempt": 9,
    "tests/test_layout.py::test_the_engine_never_imports_streamlit_and_pages_use_a_handful_of_packages":
        9,
    "tests/test_council_integration.py::test_the_run_page_runs_a_council_and_shows_its_borda_count":
        9,
    "tests/test_layout.py::test_no_module_imports_another_packages_private_names": 9,
    "tests/test_placebo.py::test_on_the_simulated_model_the_placebo_tokens_per_run_are_within_15_percent":
        9,
    "tests/test_council_fence.py::test_fuzz_nothing_inside_a_fence_reads_as_a_header_a_ranking_or_a_fence":
        8,
    "tests/test_bad_input.py::test_missing_api_key_names_the_variable": 8,
    "tests/test_hostile_replies.py::test_one_reply_fails_a_whole_run_no_more_each_protocol_completes":
        8,
    "tests/test_call_policy_app.py::test_run_page_starts_the_fields_at_a_loaded_configurations_policy":
        8,
    "tests/test_hostile_rendering.py::test_home_page_shows_a_hostile_database_path_as_text": 8,
    "tests/test_judgement.py::test_an_imported_run_keeps_who_imported_it_apart_from_who_it_claims":
        8,
    "tests/test_otel.py::test_with_the_variable_unset_no_exporter_is_imported": 8,
    "tests/test_labels.py::test_comments_are_kept_as_text": 8,
    "tests/test_labels.py::test_deleting_a_run_deletes_its_labels": 8,
    "tests/test_contract_coverage.py::test_every_registered_protocol_keeps_the_contract_in_its_own_test_file":
        7,
    "tests/test_experiment_edges.py::test_the_new_experiment_form_is_drawn_only_open_and_keeps_what_was_typed":
        7,
    "tests/test_rejudge.py::test_the_experiments_page_shows_the_judge_without_the_transcript": 7,
    "tests/test_hostile_rendering.py::test_run_page_shows_a_hostile_run_and_configuration_as_text":
        7,
    "tests/test_hostile_usage.py::test_run_totals_are_clamped_as_turn_rows_are": 7,
    "tests/test_leaderboard.py::test_the_page_rates_text_only_and_drills_down": 7,
    "tests/test_endpoint_limits.py::test_in_process_an_endpoints_rpm_spaces_the_calls": 7,
    "tests/test_fuzz_jobs.py::test_brief_is_one_short_line_whatever_it_is_given": 7,
    "tests/test_failure_accounting.py::test_degraded_and_lost_travel_with_an_export": 7,
    "tests/test_review.py::test_a_run_and_a_turn_are_rated_from_its_detail": 7,
    "tests/test_gate.py::test_markdown_links_back_to_the_runs_whose_accuracy_fell": 7,
    "tests/test_hostile_store.py::test_import_size_caps": 7,
    "tests/test_poison_jobs.py::test_a_real_job_is_still_waited_on_beside_poison": 7,
    "tests/test_equal_tokens.py::test_cli_flag_plans_it_and_the_summary_states_the_ratio_achieved":
        7,
    "tests/test_app_runs.py::test_filters_narrow_the_history": 7,
    "tests/test_labels.py::test_a_label_for_a_run_not_in_the_import_is_refused": 6,
    "tests/test_hostile_rendering.py::test_experiments_page_shows_hostile_configuration_labels_as_text":
        6,
    "tests/test_fuzz.py::test_answer_extraction_never_raises_and_answers_with_text_or_abstains": 6,
    "tests/test_fuzz.py::test_parse_sections_never_raises": 6,
    "tests/test_labels.py::test_the_database_cascades_too": 6,
    "tests/test_dynamics.py::test_properties": 6,
    "tests/test_unanswered.py::test_a_huge_reply_is_read_in_linear_time": 6,
    "tests/test_hostile_rendering.py::test_insights_page_charts_hold_escaped_labels": 6,
    "tests/test_endpoint_support.py::test_a_new_process_reads_the_detected_mode_from_the_store": 6,
    "tests/test_keys_stay_home.py::test_a_key_inside_a_spec_is_refused_with_where_keys_go": 6,
    "tests/test_rough_edges.py::test_duel_first_converge_and_reply_are_selects_checked_before_start":
        6,
    "tests/test_experiment_answer.py::test_the_views_are_four_groups_and_an_old_link_to_a_view_opens_it":
        6,
    "tests/test_hostile_config.py::test_a_prompt_override_without_a_required_placeholder_is_refused":
        6,
    "tests/test_drill.py::test_the_runs_page_follows_a_link_once_and_names_an_unknown_value": 6,
    "tests/test_failure_accounting.py::test_an_older_database_gains_the_columns_and_its_runs_are_assessed":
        6,
    "tests/test_suite_shape.py::test_no_test_module_imports_another": 6,
    "tests/test_labels.py::test_a_rating_needs_its_run_and_turn": 6,
    "tests/test_simulated_traits.py::test_a_stubborn_persona_changes_its_mind_less_beyond_its_interval":
        6,
    "tests/test_permalinks.py::test_an_insights_view_keeps_its_filters_and_sections_in_the_address":
        6,
    "tests/test_hostile_store.py::test_runs_page_on_a_read_only_database_shows_a_banner": 6,
    "tests/test_fork.py::test_the_run_detail_forks_and_opens_compare": 6,
    "tests/test_experiment_answer.py::test_the_page_opens_on_the_sentence_and_table_experiment_show_prints":
        6,
    "tests/test_search.py::test_imported_runs_are_indexed": 6,
    "tests/test_line_grammar.py::test_a_server_that_refuses_the_field_still_completes_every_protocol":
        6,
    "tests/test_hostile_rendering.py::test_runs_page_shows_a_hostile_run_id_label_and_seats_as_text":
        6,
    "tests/test_migrations_frozen.py::test_a_store_built_from_0001_up_has_todays_schema": 6,
    "tests/test_rough_edges.py::test_live_chat_bubbles_show_the_parsed_answer_and_keep_the_transcript_open":
        6,
    "tests/test_fuzz_jobs.py::test_read_job_refuses_with_one_bounded_line_and_nothing_else": 6,
    "tests/test_debate.py::TestDebateContract::test_a_failing_seat_is_recorded_on_its_turns": 6,
    "tests/test_share.py::test_the_pages_offer_the_html_download": 6,
    "tests/test_contract_coverage.py::test_no_contract_names_a_protocol_the_registry_lacks": 5,
    "tests/test_rough_edges.py::test_deleted_builtin_personas_can_be_restored": 5,
    "tests/test_dynamics.py::test_the_run_detail_shows_the_dynamics_strip": 5,
    "tests/test_page_speed.py::test_insights_figures_are_made_once_per_change_of_the_runs": 5,
    "tests/test_insights_answers.py::test_the_migration_fills_the_columns_of_older_runs": 5,
    "tests/test_judgement.py::test_a_label_dated_in_the_future_refuses_the_file": 5,
    "tests/test_app_personas.py::test_yaml_export_and_import_with_a_clear_error": 5,
    "tests/test_insights_answers.py::test_the_store_adds_up_what_each_runs_metrics_say": 5,
    "tests/test_judgement.py::test_a_file_reusing_stored_ids_writes_no_label_onto_them": 5,
    "tests/test_layout.py::test_all_sql_lives_in_the_store": 5,
    "tests/test_failure_accounting.py::test_the_run_page_shows_a_degraded_run_amber_and_a_failed_one_red":
        5,
    "tests/test_workers_page.py::test_start_form_runs_a_new_experiment_on_workers": 5,
    "tests/test_layout.py::test_the_engine_keeps_no_module_level_state_set_at_run_time": 5,
    "tests/test_page_speed.py::test_experiment_results_are_built_once_per_change_of_the_runs": 5,
    "tests/test_hostile_store.py::test_import_refusal_writes_nothing_on_both_backends": 5,
    "tests/test_equal_compute.py::test_cli_flag_and_spec_key_add_the_baselines": 5,
    "tests/test_hostile_usage.py::test_minus_10_30_does_not_turn_the_limit_off": 5,
    "tests/test_review.py::test_the_side_shown_is_the_side_recorded": 5,
    "tests/test_equal_compute.py::test_the_baseline_makes_as_many_calls_as_its_configuration": 5,
    "tests/test_judgement.py::test_a_file_repeating_a_run_is_refused": 5,
    "tests/test_app_insights.py::test_insights_opens_with_a_few_sections_so_thousands_of_runs_draw_quickly":
        5,
}


# A test that asks for a real model is slow by nature: `real_model_url` serves a llama.cpp
# model, and tests/test_real_model.py's module fixture runs every protocol on it (683 s for
# the first test reading it, 132 s for an experiment through its endpoint), whichever of its
# tests comes first.
SLOW_FIXTURES = frozenset({"real_model_url"})


def _slow(item) -> bool:
    test = item.nodeid.split("[", 1)[0]
    return test in SLOW or test.split("::", 1)[0] in SLOW or bool(
        SLOW_FIXTURES & set(getattr(item, "fixturenames", ())))


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


def applied_migrations(store) -> list[str]:
    """The names of the migrations `store`'s database has had, in order."""
    with store.engine.connect() as connection:
        return list(connection.execute(select(MigrationRow.name)
                                       .order_by(MigrationRow.name)).scalars())


def table_columns(store, table: str) -> list[str]:
    """The column names of `table` as `store`'s database has them."""
    return [c["name"] for c in inspect(store.engine).get_columns(table)]


def integrity(store) -> str:
    """SQLite's `PRAGMA integrity_check` of `store`'s database ("ok" when sound)."""
    with store.engine.connect() as connection:
        return str(connection.execute(text("PRAGMA integrity_check")).scalar())


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
