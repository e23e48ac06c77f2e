"""Prove that every row of docs/reliability.md and docs/security.md is backed by a test that
fails when its control is removed.

For each control below: edit the source to remove it (an exact text replacement, so a stale
entry fails loudly instead of mutating something else), run the tests the docs name for that
row, expect at least one of them to FAIL, and restore the file. The tree must be clean (the
script refuses otherwise) and is restored even on Ctrl-C.

    .venv/bin/python scripts/check_controls.py            # every control
    .venv/bin/python scripts/check_controls.py R6 S5      # some of them
    .venv/bin/python scripts/check_controls.py --list

Prints one line per control and a markdown table (`--markdown FILE`) for the docs. Takes
about 15 minutes (some rows run real processes and containers). The Docker rows need the
engine that `make docker-engine` starts.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Control:
    row: str  # R<n> (docs/reliability.md) or S<n> (docs/security.md)
    what: str
    edits: tuple[tuple[str, str, str], ...]  # (file, text, replacement)
    tests: tuple[str, ...]


def edit(file: str, text: str, replacement: str) -> tuple[str, str, str]:
    return (file, text, replacement)


CONTROLS = [
    Control(
        "R1",
        "a dead worker's case is recorded as a crash",
        (edit("collector/pool.py", "            if w.task is not None:\n                task, w_dead", "            if False:\n                task, w_dead"),),
        ("tests/test_faults.py::test_segfault_hang_cuda_fatal_and_exception_each_recorded_once",),
    ),
    Control(
        "R2",
        "a CUDA-fatal error retires the worker",
        (edit("collector/failures.py", "    return classification == CUDA_FATAL", "    return False"),),
        ("tests/test_fault_matrix.py::test_a_cuda_fatal_error_retires_the_worker_and_a_fresh_one_continues",),
    ),
    Control(
        "R3",
        "the watchdog kills a hung case",
        (edit("collector/pool.py", "        if w.task is not None and time.monotonic() - w.started > self.case_timeout_s:", "        if False:"),),
        ("tests/test_faults.py::test_segfault_hang_cuda_fatal_and_exception_each_recorded_once",),
    ),
    Control(
        "R4a",
        "a SIGKILLed worker's failure names the signal",
        (edit("collector/pool.py", "            signal=sig,", "            signal=None,"),),
        ("tests/test_fault_matrix.py::test_a_worker_killed_by_sigkill_is_a_crash_of_its_case_and_the_run_goes_on",),
    ),
    Control(
        "R4b",
        "an allocation refused is classified oom",
        (edit("collector/failures.py", '    "can\'t allocate memory",\n    "cannot allocate memory",\n', ""),),
        ("tests/test_fault_matrix.py::test_an_allocation_refused_by_a_memory_limit_is_an_oom_failure",),
    ),
    Control(
        "R4c",
        "an OOM-killed container is reported as such",
        (edit("bot/images/container.py", "    elif outcome.oom_killed:\n", "    elif False:\n"),),
        ("tests/test_images_docker.py::test_a_container_killed_for_memory_leaves_a_failed_record_saying_so",),
    ),
    Control(
        "R5a",
        "--resume continues from the checkpoint",
        (edit("collector/engine.py", "CheckpointState.load(self.out / CHECKPOINT) if cfg.resume else CheckpointState()", "CheckpointState()"),),
        ("tests/test_fault_matrix.py::test_a_runner_killed_mid_run_leaves_a_record_that_resume_finishes",),
    ),
    Control(
        "R5b",
        "a torn checkpoint line is cut before appending",
        (edit("collector/record/checkpoint.py", "            _cut_torn_tail(path)\n", ""),),
        ("tests/test_record.py::test_a_torn_last_line_is_cut_before_new_entries_are_appended",),
    ),
    Control(
        "R5c",
        "the pool is closed when the set-up is interrupted",
        (edit("collector/engine.py", "        except BaseException:\n            self.close()\n            if hasattr", "        except BaseException:\n            if hasattr"),),
        ("tests/test_fault_matrix.py::test_sigterm_while_the_workers_start_ends_promptly_in_one_line",),
    ),
    Control(
        "R6",
        "a failed record write leaves the previous record and ends in one line",
        (edit("collector/record/writer.py", "    except OSError as exc:\n        for tmp, _ in staged:\n            tmp.unlink(missing_ok=True)\n        raise RecordWriteError(", "    except ZeroDivisionError as exc:\n        raise RecordWriteError("),),
        ("tests/test_disk_full.py",),
    ),
    Control(
        "R7",
        "no Docker engine is one line",
        (edit("bot/images/engine.py", "    except (docker.errors.DockerException, OSError) as exc:", "    except ZeroDivisionError as exc:"),),
        ("tests/test_fault_matrix.py::test_no_docker_engine_is_one_line_for_collect_and_image",),
    ),
    Control(
        "R8",
        "a failed image build names the step and the engine's reason",
        (edit("bot/images/build.py", '                if "error" in event or "errorDetail" in event:', "                if False:"),),
        ("tests/test_images_docker.py::test_an_image_build_failure_is_one_line_and_leaves_no_image",),
    ),
    Control(
        "R9",
        "5xx answers are retried",
        (edit("bot/github/client.py", "        status_forcelist=[429, *range(500, 600)],", "        status_forcelist=[429],"),),
        ("tests/test_github_publish.py::test_transient_502s_and_a_secondary_rate_limit_are_retried",),
    ),
    Control(
        "R10",
        "a refused write names the permission to grant",
        (edit("bot/github/publish.py", "{_hint(status, 'pull-requests')}", ""),),
        ("tests/test_github_publish.py::test_a_403_on_the_comment_endpoint_fails_with_one_clear_line",),
    ),
    Control(
        "R11",
        "writes are retried after a secondary rate limit",
        (edit("bot/github/client.py", '        allowed_methods=Retry.DEFAULT_ALLOWED_METHODS | {"GET", "POST", "PATCH"},', "        allowed_methods=Retry.DEFAULT_ALLOWED_METHODS,"),),
        ("tests/test_github_publish.py::test_transient_502s_and_a_secondary_rate_limit_are_retried",
         "tests/test_github_publish.py::test_a_secondary_rate_limit_without_retry_after_waits_and_succeeds"),
    ),
    Control(
        "R12",
        "timeouts are retried",
        (edit("bot/github/client.py", "        read=cfg.retries,", "        read=0,"),),
        ("tests/test_github_publish.py::test_a_timeout_is_retried_and_a_duplicate_create_is_cleaned_up",),
    ),
    Control(
        "R13",
        "an unreadable table is a one-line error",
        (edit("collector/record/reader.py", "    except (OSError, pa.ArrowException, UnicodeDecodeError, ValueError) as exc:\n        raise RunRecordError(f\"{path}: not a readable parquet file", "    except ZeroDivisionError as exc:\n        raise RunRecordError(f\"{path}: not a readable parquet file"),),
        ("tests/test_fault_matrix.py::test_a_corrupted_or_truncated_baseline_is_one_line",),
    ),
    Control(
        "R14",
        "checksums are verified",
        (edit("collector/record/reader.py", "            actual == digest,", "            True,"),),
        ("tests/test_record.py::test_checksum_mismatch_is_a_one_line_error_naming_the_file",),
    ),
    Control(
        "R15",
        "malformed YAML is one line",
        (edit("collector/caseplan.py", "    except yaml.YAMLError as exc:", "    except ZeroDivisionError as exc:"),),
        ("tests/test_caseplan.py::test_malformed_case_files_name_the_file_and_the_problem",),
    ),
    Control(
        "R16",
        "an unknown backend in a label is refused",
        (edit("bot/github/labels.py", "    if backend not in known_backends:", "    if False:"),),
        ("tests/test_github_plan.py::test_label_grammar_errors",
         "tests/test_props_payload.py::test_any_label_is_a_trigger_a_clear_refusal_or_not_ours"),
    ),
    Control(
        "R17",
        "a missing payload field is one line",
        (edit("bot/github/events.py", '                raise UserError(f"{self.source}: missing field {dotted!r}")', "                return None"),),
        ("tests/test_props_payload.py::test_any_damaged_pull_request_payload_parses_or_is_one_line",),
    ),
    Control(
        "R18",
        "an unmerged shard is red coverage",
        (edit("bot/compare/coverage.py", "    shard = _shard(cand)", "    shard = None"),),
        ("tests/test_fault_matrix.py::test_a_lost_shard_is_red_coverage_not_a_quiet_pass",),
    ),
    Control(
        "R18b",
        "a merge with a missing shard is partial",
        (edit("bot/merge.py", '    if missing or any(s != "complete" for s in statuses):', '    if any(s != "complete" for s in statuses):'),),
        ("tests/test_merge.py::test_a_missing_shard_is_partial_and_its_cases_count_against_coverage",),
    ),
    Control(
        "R19",
        "racing publishers converge on one comment",
        (edit("bot/github/sticky.py", "        slot = [o for o in ours(api.comments(number), bot_login) if in_slot(o.marker, marker)]\n        if all(", "        slot = []\n        if all("),),
        ("tests/test_github_publish.py::test_two_concurrent_publishes_leave_one_comment",
         "tests/test_load.py"),
    ),
    Control(
        "R20",
        "a case's runs stay on its device, across a crash and a resume",
        (edit("collector/pool.py", "            queues.setdefault(slot, deque()).append(t)", "            queues.setdefault(None, deque()).append(t)"),),
        ("tests/test_fleet_assignment.py::test_every_run_of_a_case_is_on_its_device_across_a_worker_crash",
         "tests/test_fleet_assignment.py::test_a_resumed_collection_keeps_each_case_on_its_device"),
    ),
    Control(
        "R21",
        "cases crossing GPUs without panels are never judged",
        (edit("bot/compare/latency.py", "    cols[\"verdict\"][cols[\"gpu_match\"] == cross_gpu.UNCALIBRATED] = stats.INCONCLUSIVE\n", ""),),
        ("tests/test_compare.py::test_runs_from_two_gpus_without_panels_are_never_judged_and_say_so",
         "tests/test_cross_gpu.py::test_simulated_fleet_calibrated_verdicts_hold"),
    ),
    Control(
        "R22",
        "the panels' GPU offset is divided out of cross-GPU ratios",
        (edit("bot/compare/cross_gpu.py", "        mean, sd = fit.predict(cols[\"base_ms\"][rows])\n", "        mean, sd = fit.predict(cols[\"base_ms\"][rows])\n        mean = 0 * mean\n"),),
        ("tests/test_cross_gpu.py::test_simulated_fleet_calibrated_verdicts_hold",),
    ),
    Control(
        "R23",
        "a campaign starts no round past its deadline (after 2 a side)",
        (edit("bot/campaign/runner.py", "        if self.cfg.deadline is None or done_rounds < 2 or time.monotonic() < self.cfg.deadline:", "        if True:"),),
        ("tests/test_paired_session.py::test_a_campaign_past_its_deadline_keeps_two_rounds_a_side_and_says_so",),
    ),
    Control(
        "R30",
        "a failure group does not depend on the worker",
        (edit("bot/compare/failure_groups.py", "        groups[identity_key(f)].append(f)", "        groups[f.group_key].append(f)"),
         edit("collector/failures.py", '    text = _WORKER.sub("<worker>", text)', "    text = text")),
        ("tests/test_failure_identity.py::test_identity_is_recomputed_from_the_fields_not_the_stored_key",
         "tests/test_failure_identity.py::test_the_same_crash_with_1_2_and_4_workers_is_one_persisting_group"),
    ),
    Control(
        "R31",
        "a case with impossible samples is excluded and named",
        (edit("collector/record/reader.py", "        perf[op], samples[op], excluded = check_samples(perf[op], samples[op])\n        anomalies += [Anomaly(EXCLUDED_CASE, samples_file(op), line) for line in excluded]\n", ""),),
        ("tests/test_evidence.py::test_a_bad_sample_excludes_its_case_with_one_line_naming_file_and_case",),
    ),
    Control(
        "R32",
        "a run without a baseline never posts success",
        (edit("bot/github/publish.py", '    no_verdict = meta.kind == "run" and meta.level != "red"', "    no_verdict = False"),),
        ("tests/test_first_run.py",),
    ),
    Control(
        "R33",
        "a bad config value is one line naming the key",
        (edit("bot/ci_config.py", "            if errors:\n", "            if False:\n"),),
        ("tests/test_ci_config.py::test_a_bad_value_is_one_line_naming_the_key",),
    ),
    Control(
        "R50",
        "a side that drifts with run order is marked and its verdict must clear the drift",
        (edit("bot/compare/drift.py", "    demote(cols)\n", "    pass\n"),),
        ("tests/test_drift.py::test_a_drifting_side_is_marked_and_not_called_improved",),
    ),
    Control(
        "S1",
        "a label approves only with write permission",
        (edit("bot/github/plan.py", "    if permission_rank(facts.labeler_permission) < permission_rank(REQUIRED_PERMISSION):", "    if False:"),),
        ("tests/test_github_plan.py::test_a_labeler_without_write_access_is_refused",
         "tests/test_props_payload.py::test_a_collection_is_approved_only_when_every_control_holds"),
    ),
    Control(
        "S2",
        "a label approves only the labelled head",
        (edit("bot/github/plan.py", "    if facts.current_head_sha != event.head_sha:", "    if False:"),),
        ("tests/test_github_plan.py::test_a_head_that_moved_since_labelling_is_refused",
         "tests/test_props_payload.py::test_a_collection_is_approved_only_when_every_control_holds"),
    ),
    Control(
        "S3",
        "new commits drop the trigger label",
        (edit("bot/github/plan.py", "            remove_labels=labels,", "            remove_labels=[],"),),
        ("tests/test_github_plan.py::test_synchronize_after_labelling_drops_the_label_and_says_why",),
    ),
    Control(
        "S4",
        "a label removed before the plan ran approves nothing",
        (edit("bot/github/plan.py", "    if trigger.name.lower() not in {name.lower() for name in facts.current_labels}:", "    if False:"),),
        ("tests/test_github_plan.py::test_a_label_removed_before_the_plan_ran",),
    ),
    Control(
        "S5",
        "measured code gets an allow-listed environment",
        (edit("collector/environment.py", "        if allowed(name) and not looks_secret(name, value)", "        if True"),),
        ("tests/test_secrets_env.py",),
    ),
    Control(
        "S5b",
        "the forkserver workers fork from starts with the allow-listed environment",
        (edit("collector/worker_start.py", "        with environment_for_children(env):\n            forkserver.ensure_running()", "        if True:\n            forkserver.ensure_running()"),),
        ("tests/test_secrets_env.py::test_a_worker_process_receives_no_secret",),
    ),
    Control(
        "S6",
        "the container gets no host environment",
        (edit("bot/images/container.py", "    env = {**JIT_CACHE_ENV, **passthrough_env(opts.env_names, os.environ)}", "    env = {**JIT_CACHE_ENV, **os.environ}"),
         edit("bot/images/sandbox.py", "            if looks_secret(key, value):", "            if False:")),
        ("tests/test_images_docker.py::test_no_secret_reaches_the_collector_container_or_its_workers",),
    ),
    Control(
        "S7",
        "untrusted text cannot ping",
        (edit("bot/render/sanitize.py", '    return _ISSUE_REF.sub("#" + ZWSP, _MENTION.sub("@" + ZWSP, s))', "    return s"),),
        ("tests/test_render.py::test_sanitisers_neutralise_hostile_text",
         "tests/test_props_sanitize.py"),
    ),
    Control(
        "S8",
        "untrusted text cannot forge the marker",
        (edit("bot/render/sanitize.py", '    s = s.replace("<!--", "<" + ZWSP + "!--").replace("-->", "--" + ZWSP + ">")', "    pass"),),
        ("tests/test_props_sanitize.py",),
    ),
    Control(
        "S9",
        "only the bot's own comments count",
        (edit("bot/github/sticky.py", '    return comment.author_type == "Bot"', "    return True"),),
        ("tests/test_github_publish.py::test_comments_are_found_across_pages_and_forgeries_are_ignored",),
    ),
    Control(
        "S10",
        "workflow commands from measured code are fenced off",
        (edit("bot/joblog.py", '    if os.environ.get("GITHUB_ACTIONS") != "true":', "    if True:"),),
        ("tests/test_secrets_env.py::test_workflow_commands_printed_by_measured_code_are_fenced_off",),
    ),
    Control(
        "S11",
        "a record cannot name files outside itself",
        (edit("collector/record/reader.py", '            "/" not in name and "\\0" not in name and name not in ("", ".", ".."),', '            "\\0" not in name and name not in ("", ".", ".."),'),),
        ("tests/test_security.py::test_a_record_cannot_name_files_outside_itself",),
    ),
    Control(
        "S12",
        "the PR is found from the run's head branch and SHA only",
        (edit("bot/commands/publish.py", "            target = the_pull_of_run(api, run_event)", "            target = api.pull(run_event.pull_requests[0]) if run_event.pull_requests else the_pull_of_run(api, run_event)"),),
        ("tests/test_security.py::test_a_pr_number_in_the_event_is_never_used",),
    ),
    Control(
        "S30",
        "a pull request's job gets the store read-only",
        (edit("bot/store.py", "        if self.read_only:", "        if False:"),),
        ("tests/test_store.py::test_a_pull_requests_job_cannot_store_a_baseline",),
    ),
    Control(
        "S31a",
        "the publisher re-derives approval before posting",
        (edit("bot/github/deliver.py", '    approval = check_approval(api, pull, event, bundle.plan.get("label")) if pull else None', '    approval = __import__("bot.github.approval").github.approval.Approval(event.actor, "write", bundle.plan.get("label")) if pull else None'),),
        ("tests/test_result_publish.py::test_a_bundle_claiming_approval_is_checked_against_github",),
    ),
    Control(
        "S31b",
        "the approving actor must have write permission",
        (edit("bot/github/approval.py", "    if permission_rank(permission) < permission_rank(REQUIRED_PERMISSION):", "    if False:"),),
        ("tests/test_result_publish.py::test_a_bundle_claiming_approval_is_checked_against_github",),
    ),
    Control(
        "S31c",
        "the label must have started the run (applied just before it was created)",
        (edit("bot/github/approval.py", "        if run_created - LABEL_TO_RUN <= at <= run_created + CLOCK_SKEW:", "        if True:"),),
        ("tests/test_result_publish.py::test_a_bundle_claiming_approval_is_checked_against_github",),
    ),
    Control(
        "S31d",
        "the label must be the run's actor's",
        (edit("bot/github/approval.py", "        if event.actor.lower() != actor.lower():", "        if False:"),),
        ("tests/test_result_publish.py::test_a_bundle_claiming_approval_is_checked_against_github",),
    ),
    Control(
        "S31e",
        "publishing a rendered comment for a workflow run re-derives approval too",
        (edit("bot/commands/publish.py", "            check_approval(api, target, run_event, labels[0] if labels else None)", "            pass"),),
        ("tests/test_github_publish.py::test_workflow_run_resolves_the_pr_from_the_head_sha",),
    ),
    Control(
        "S32",
        "the PR is resolved from the run's head repository and branch",
        (edit("bot/github/deliver.py", "        for p in api.open_pulls_for_branch(event.head_repo, event.head_branch)", "        for p in api.pulls_for_commit(event.head_sha)"),),
        ("tests/test_result_publish.py::test_a_second_pull_request_on_the_same_commit_neither_blocks_nor_receives",),
    ),
    Control(
        "S65",
        "a PR's runs are kept under the number GitHub resolved, one namespace per PR",
        (edit("bot/github/pull_history.py", "slug(name), str(int(number))])", "slug(name)])"),),
        ("tests/test_pull_history.py::test_another_pulls_run_is_kept_under_its_own_number_and_never_taken_as_this_ones",),
    ),
    Control(
        "S66",
        "the tracking issue is the bot's own (marker and author)",
        (edit("bot/github/tracking.py", "if marker_key(i.body) == key and is_ours(i, bot_login)", "if marker_key(i.body) == key"),),
        ("tests/test_tracking.py::test_a_red_baseline_opens_one_issue_the_next_updates_it_and_a_clean_one_closes_it",),
    ),
    Control(
        "S13",
        "the comment must be for the measured commit",
        (edit("bot/github/publish.py", "    if expected and marked and marked != expected:", "    if False:"),),
        ("tests/test_security.py::test_a_comment_rendered_for_another_commit_is_refused",),
    ),
    Control(
        "S14",
        "a start in the future cannot pin the comment",
        (edit("bot/render/comment.py", "    if when > now + FUTURE_SLACK:", "    if False:"),),
        ("tests/test_security.py::test_a_start_time_in_the_future_cannot_pin_the_comment",),
    ),
    Control(
        "S15",
        "an older run never overwrites a newer one",
        (edit("bot/github/sticky.py", "    return recency(new, current_head) >= recency(old, current_head)", "    return True"),),
        ("tests/test_github_publish.py::test_a_stale_run_does_not_overwrite_a_newer_one",),
    ),
    Control(
        "S16",
        "baselines come from the trusted ref only",
        (edit("bot/store.py", '            if ref is not None and manifest.get("ref") != ref:', "            if False:"),),
        ("tests/test_security.py::test_the_baseline_comes_only_from_the_trusted_ref",),
    ),
    Control(
        "S17",
        "images are pinned by digest",
        (edit("bot/images/pinning.py", "    if not parsed.pinned:", "    if False:"),),
        ("tests/test_images_manifest.py::test_dockerfile_scan", "tests/test_images_manifest.py::test_workflow_scan"),
    ),
    Control(
        "S42",
        "a trusted job never runs an image another job could have built or tagged",
        (edit("bot/images/build.py", "    if reuse and not force_build and not trusted:", "    if reuse and not force_build:"),
         edit("bot/images/build.py", "            nocache=trusted,", "            nocache=False,")),
        ("tests/test_attacks_docker.py::test_a_retagged_image_is_never_run_by_a_trusted_job",),
    ),
    Control(
        "S42b",
        "a trusted collection runs an image by id or digest only",
        (edit("bot/images/container.py", "        require_content_ref(opts.image)", "        pass"),),
        ("tests/test_attacks_docker.py::test_a_retagged_image_is_never_run_by_a_trusted_job",),
    ),
    Control(
        "S43",
        "an untrusted container gets a private copy of the JIT cache",
        (edit("bot/images/container.py", '    if trust == "trusted":\n        for sub in JIT_CACHE_DIRS:', "    if True:\n        for sub in JIT_CACHE_DIRS:"),),
        ("tests/test_attacks_docker.py::test_a_pr_container_cannot_replace_a_file_in_the_trusted_jit_cache",),
    ),
    Control(
        "S44",
        "the container's output is taken back as regular files only",
        (edit("bot/images/container.py", "    dropped = take_output(cfg.out)", "    dropped: list[str] = []"),),
        ("tests/test_attacks_docker.py::test_links_and_special_files_the_container_plants_are_never_followed",),
    ),
    Control(
        "S44b",
        "readers of untrusted JSON follow no symbolic link",
        (edit("collector/jsonfile.py", "        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)", "        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)"),),
        ("tests/test_attacks.py::test_readers_never_follow_a_symbolic_link",),
    ),
    Control(
        "S44c",
        "a record's listed files are never read through a symbolic link",
        (edit("collector/record/reader.py", '        _require(not target.is_symlink(), f"{target}: is a symbolic link; refusing to follow it")', "        pass"),),
        ("tests/test_attacks.py::test_readers_never_follow_a_symbolic_link",),
    ),
    Control(
        "S47",
        "untrusted text cannot autolink",
        (edit("bot/render/sanitize.py", "    s = _AUTOLINK.sub(lambda m: m.group() + ZWSP, s)", "    pass"),),
        ("tests/test_attacks.py::test_links_in_untrusted_text_are_not_live_in_the_comment",
         "tests/test_props_sanitize.py"),
    ),
    Control(
        "S48",
        "recursion bombs in untrusted JSON are one line",
        (edit("collector/jsonfile.py", "    except RecursionError:", "    except ZeroDivisionError:"),
         edit("collector/jsonfile.py", "    if depth(data) > max_depth:", "    if False:")),
        ("tests/test_attacks.py::test_json_bombs_in_plans_bundles_records_and_comparisons_are_one_line",),
    ),
    Control(
        "S48b",
        "containers get a memory limit and a bounded memlock",
        (edit("bot/images/sandbox.py", '        out["mem_limit"] = self.limits.memory\n        out["memswap_limit"] = self.limits.memory\n', ""),
         edit("bot/images/sandbox.py", "            out[\"ulimits\"] = [Ulimit(name=\"memlock\", soft=locked, hard=locked)]", "            out[\"ulimits\"] = [Ulimit(name=\"memlock\", soft=-1, hard=-1)]")),
        ("tests/test_images_units.py::test_every_container_gets_a_memory_limit_and_a_bounded_memlock",
         "tests/test_attacks_docker.py::test_the_default_memory_limit_holds_in_the_container"),
    ),
    Control(
        "S18",
        "the installed framework must equal the pin",
        (edit("collector/pins.py", '    return installed is not None and installed in (pinned, f"{pinned}+{cuda}")', "    return True"),),
        ("tests/test_images_manifest.py::test_version_gate_is_exact",),
    ),
    Control(
        "S19",
        "containers run without a network",
        (edit("bot/images/sandbox.py", '            "network_mode": "none",', '            "network_mode": "bridge",'),),
        ("tests/test_images_units.py::test_sandbox_is_locked_down",),
    ),
    Control(
        "S20",
        "step outputs are one line each",
        (edit("bot/commands/plan.py", '    return value.replace("\\r", " ").replace("\\n", " ")', "    return value"),),
        ("tests/test_security.py::test_label_text_cannot_forge_step_outputs",),
    ),
    Control(
        "S21",
        "the image tag hashes every file that goes in",
        (edit("bot/images/context.py", '        digest.update(f"file {name} {hashlib.sha256(files[name]).hexdigest()}\\n".encode())', "        pass"),),
        ("tests/test_images_units.py::test_content_hash_covers_exactly_what_goes_in",),
    ),
    Control(
        "S61",
        "a campaign round must name its side's image",
        (edit("bot/campaign/runner.py", "        if side.image is not None and image.get(\"ref\") != side.image:", "        if False:"),),
        ("tests/test_campaign_images.py::test_a_round_whose_record_names_another_image_is_refused",),
    ),
    Control(
        "S60",
        "thresholds come from the base branch's config",
        (edit("bot/conclude.py", '    carried = plan.get("ci_config")', "    carried = None"),),
        ("tests/test_ci_config.py::test_the_plan_carries_the_base_branchs_config_to_conclude",),
    ),
    Control(
        "R40",
        "a damaged stored run is skipped with a warning",
        (edit("bot/history/source.py", '                warn(f"skipped stored run {run.name}: {exc}")', "                pass"),),
        ("tests/test_history.py::test_a_damaged_run_is_skipped_with_a_warning",),
    ),
    Control(
        "R41",
        "a damaged stored run is left out of a comparison's history",
        (edit("bot/compare/store_baseline.py", '                skipped.append(f"skipped stored run {entry.name}: {exc}"[:500])', "                pass"),),
        ("tests/test_history_verdict.py::test_a_damaged_stored_run_is_left_out_of_the_history",),
    ),
    Control(
        "S50a",
        "the site's templates autoescape",
        (edit("bot/render/html.py", "    return template_environment(package, autoescape=True)", "    return template_environment(package, autoescape=False)"),),
        ("tests/test_site.py::test_hostile_text_is_escaped",),
    ),
    Control(
        "S50b",
        "the site's SVG labels are escaped",
        (edit("bot/site/svg.py", '        tip = f"<title>{escape(p.label)}</title>"', '        tip = f"<title>{p.label}</title>"'),),
        ("tests/test_site.py::test_trend_svg_places_points_intervals_and_failures",),
    ),
    Control(
        "R60",
        "a named attention backend is part of the case key",
        (edit("collector/caseplan.py", "            if value != opt.default:  # the default stays out of the key", "            if False:"),),
        ("tests/test_attn_backend.py::test_fa3_and_flashinfer_runs_are_never_paired",),
    ),
    Control(
        "R61",
        "the bundle check names a needed package the bundle lacks",
        (edit("bot/bundle.py", "    return [n for n in names if canonicalize_name(n) not in pinned | set(spec.base)]", "    return []"),),
        ("tests/test_vllm_selection.py::test_the_check_fails_when_the_bundle_drops_a_needed_package",),
    ),
    Control(
        "R62",
        "only the vllm backend may be asked for an attention backend",
        (edit("collector/engine.py", "    if backend in HONOURED_BY:", "    if True:"),),
        ("tests/test_attn_backend.py::test_only_the_vllm_backend_may_be_asked_for_one",),
    ),
    Control(
        "R63",
        "the backend vLLM built must be the one the case named",
        (edit("collector/backends/vllm_support.py", "    if requested != AUTO and selected != requested:", "    if False:"),),
        ("tests/test_attn_backend.py::test_the_backend_reaches_vllms_engine_arguments",),
    ),
    Control(
        "S70",
        "the report's JSON block cannot be closed by a case or kernel name",
        (edit("bot/render/html.py", '    text = text.replace("<", "\\\\u003c").replace(">", "\\\\u003e").replace("&", "\\\\u0026")', "    text = text"),),
        ("tests/test_report_scale.py::test_a_report_of_6000_cases_is_under_1_mb_and_holds_every_case",),
    ),
    Control(
        "S71",
        "the report's script makes rows from the JSON as text, not markup",
        (edit("bot/render/templates/report.html.j2", "        inner.textContent = t;", "        inner.innerHTML = t;"),),
        ("tests/test_report_scale.py::test_the_browser_makes_every_row_as_python_formats_it",),
    ),
]  # fmt: skip


def _dirty() -> bool:
    out = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return bool(out.stdout.strip())


def check(control: Control, timeout: int) -> tuple[str, float, str]:
    originals: dict[Path, str] = {}
    try:
        for file, text, replacement in control.edits:
            path = ROOT / file
            source = originals.setdefault(path, path.read_text())
            current = path.read_text()
            if current.count(text) != 1:
                return "STALE", 0.0, f"{file}: the control's text is not found exactly once"
            path.write_text(current.replace(text, replacement))
            assert source  # keep the original for the restore
        t0 = time.monotonic()
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
             f"--timeout={timeout}", *control.tests],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )  # fmt: skip
        seconds = time.monotonic() - t0
        tail = (proc.stdout.strip().splitlines() or [""])[-1]
        return ("FAILS" if proc.returncode != 0 else "PASSES"), seconds, tail
    finally:
        for path, source in originals.items():
            path.write_text(source)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("rows", nargs="*", help="rows to check (default: all)")
    parser.add_argument("--list", action="store_true", help="list the controls and exit")
    parser.add_argument("--timeout", type=int, default=120, help="seconds per test")
    parser.add_argument("--markdown", type=Path, help="also write the results as a table")
    args = parser.parse_args(argv)
    chosen = [c for c in CONTROLS if not args.rows or c.row in args.rows]
    if args.list:
        for c in chosen:
            print(f"{c.row}\t{c.what}\t{' '.join(c.tests)}")
        return 0
    if _dirty():
        print("error: the working tree has changes; commit or stash them first", file=sys.stderr)
        return 2
    rows = []
    bad = 0
    for control in chosen:
        verdict, seconds, tail = check(control, args.timeout)
        ok = verdict == "FAILS"
        bad += not ok
        print(f"{control.row:5} {verdict:7} {seconds:6.1f}s  {control.what}  [{tail}]", flush=True)
        rows.append((control, verdict, seconds))
    assert not _dirty(), "the tree was not restored"
    if args.markdown:
        lines = ["| row | control removed | tests | result |", "| --- | --- | --- | --- |"]
        for control, verdict, _ in rows:
            tests = "<br>".join(f"`{t}`" for t in control.tests)
            result = "tests fail" if verdict == "FAILS" else f"**{verdict}**"
            lines.append(f"| {control.row} | {control.what} | {tests} | {result} |")
        args.markdown.write_text("\n".join(lines) + "\n")
    print(f"{len(rows) - bad} of {len(rows)} controls are guarded by a failing test")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
