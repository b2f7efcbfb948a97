package grafana

import "fmt"

// All returns Sundial's dashboards, keyed by the file name they are written
// to under dashboards/.
func All() map[string]*Dashboard {
	return map[string]*Dashboard{
		"overview.json":   Overview(),
		"dispatcher.json": Dispatcher(),
		"runner.json":     Runner(),
		"dag.json":        DAG(),
		"backends.json":   Backends(),
	}
}

// quantiles charts p50, p95 and p99 of a classic histogram, summed over every
// label but le and the extra grouping labels.
func quantiles(metric, selector, by string) []Target {
	group := "le"
	legend := "p%s"
	if by != "" {
		group = "le, " + by
		legend = "p%s {{" + by + "}}"
	}
	var out []Target
	for _, qn := range []string{"0.5", "0.95", "0.99"} {
		out = append(out, q(fmt.Sprintf(`histogram_quantile(%s, sum by (%s) (rate(%s_bucket%s[$__rate_interval])))`, qn, group, metric, selector),
			fmt.Sprintf(legend, qn[2:])))
	}
	return out
}

// Overview is the SRE's first screen: the 1 s trigger-latency objective and
// its error budget, latency, throughput, and lost and duplicate indicators.
func Overview() *Dashboard {
	b := newDashboard("sundial-overview", "Sundial / Overview",
		"The trigger-latency objective (99 % of due runs start within 1 s, over 30 days), latency, throughput, and the indicators of lost and duplicate runs.")

	b.row("Objective: 99 % of due runs start within 1 s")
	b.add(5, 5, stat("Started within 1 s (last hour)", "percentunit",
		"Runs that started within 1 s of their due time, among the runs due (the larger of runs started and runs dispatched, so runs that never start count). Recording rules: deploy/prometheus/rules/sundial-slo.yml.",
		objective, q(`sundial:runs_started_within_objective:rate1h / (sundial:runs_due:rate1h > 0)`, "")))
	b.add(5, 5, stat("Error budget left (30 days)", "percentunit",
		"Share of the month's error budget (1 % of due runs) not yet spent.",
		[]Step{{Color: "red"}, {Color: "orange", Value: f(0.25)}, {Color: "green", Value: f(0.5)}},
		q(`1 - (1 - sum_over_time(sundial:runs_started_within_objective:rate5m[30d]) / sum_over_time(sundial:runs_due:rate5m[30d])) / 0.01`, "")))
	b.add(5, 5, stat("Burn rate (1 h)", "x",
		"How many times faster than sustainable the budget burns over the last hour; 14.4 with the 5-minute rate above 14.4 pages.",
		[]Step{{Color: "green"}, {Color: "orange", Value: f(1)}, {Color: "red", Value: f(6)}},
		q(`sundial:trigger_slo_errors:ratio_rate1h / 0.01`, "")))
	b.add(5, 5, stat("Burn rate (5 min)", "x", "The same over the last 5 minutes.",
		[]Step{{Color: "green"}, {Color: "orange", Value: f(1)}, {Color: "red", Value: f(14.4)}},
		q(`sundial:trigger_slo_errors:ratio_rate5m / 0.01`, "")))
	b.add(4, 5, stat("Firing alerts", "none", "Sundial alerts firing now (see deploy/prometheus/RUNBOOK.md).", greenAtZero,
		q(`count(ALERTS{alertstate="firing", alertname=~"Sundial.*"}) or vector(0)`, "")))
	b.add(24, 7, ts("Share of due runs not started within 1 s", "percentunit",
		"The error ratio over 5 minutes and 1 hour against the 1 % the objective allows.",
		q(`sundial:trigger_slo_errors:ratio_rate5m`, "5 min"),
		q(`sundial:trigger_slo_errors:ratio_rate1h`, "1 h"),
		q(`vector(0.01)`, "objective (1 %)")))

	b.teamVariable()
	b.row("Objective per team ($team)")
	b.add(12, 7, ts("Share of due runs not started within 1 s, by team (1 h)", "percentunit",
		"The objective per owning team: recording rules sundial:team_* in deploy/prometheus/rules/sundial-slo.yml, alerts SundialTeamTriggerLatencyBudgetBurn(Slow).",
		q(`sundial:team_trigger_slo_errors:ratio_rate1h{team=~"$team"}`, "{{team}}"),
		q(`vector(0.01)`, "objective (1 %)")))
	b.add(12, 7, latency("Trigger latency p99 by team",
		"With exemplars: a point on a slow line names a run (run_id) of the job behind it; `sundial runs get RUN` says why it waited.",
		withExemplars(q(`histogram_quantile(0.99, sum by (le, team) (rate(sundial_runner_team_trigger_latency_seconds_bucket{team=~"$team"}[$__rate_interval])))`, "{{team}}"))))
	b.add(24, 6, ts("Error budget left by team (30 days)", "percentunit",
		"Share of each team's month of error budget (1 % of its due runs) not yet spent.",
		q(`1 - (1 - sum_over_time(sundial:team_runs_started_within_objective:rate5m{team=~"$team"}[30d]) / sum_over_time(sundial:team_runs_due:rate5m{team=~"$team"}[30d])) / 0.01`, "{{team}}")))

	b.row("Latency")
	b.add(12, 8, latency("Trigger latency (due time → runner starts the run)",
		"Measured by the runner when it holds the run's lease, from the due time of the attempt.",
		quantiles("sundial_runner_trigger_latency_seconds", "", "")...))
	b.add(12, 8, latency("Dispatch latency (due time → run record in Kafka)",
		"Measured by the dispatcher when Kafka acknowledges the run record.",
		quantiles("sundial_dispatcher_dispatch_latency_seconds", "", "")...))
	b.add(12, 7, latency("Trigger latency p99 by priority", "",
		q(`histogram_quantile(0.99, sum by (le, priority) (rate(sundial_runner_trigger_latency_seconds_bucket[$__rate_interval])))`, "{{priority}}")))
	b.add(12, 7, ts("Started within 1 s, by priority", "percentunit", "",
		q(`sum by (priority) (rate(sundial_runner_trigger_latency_seconds_bucket{le=~"1|1\\.0"}[$__rate_interval])) / sum by (priority) (rate(sundial_runner_trigger_latency_seconds_count[$__rate_interval]))`, "{{priority}}")))

	b.row("Throughput")
	b.add(8, 8, ts("Runs dispatched and started", "ops", "Dispatched: run records written to sundial.runs.*. Started: leases taken by runners.",
		q(`sum(rate(sundial_dispatcher_runs_total[$__rate_interval]))`, "dispatched"),
		q(`sum(rate(sundial_runner_trigger_latency_seconds_count[$__rate_interval]))`, "started")))
	b.add(8, 8, ts("Runs by outcome", "ops", "Runs handled by the runners, by outcome.",
		q(`sum by (outcome) (rate(sundial_runner_runs_total[$__rate_interval]))`, "{{outcome}}")))
	b.add(8, 8, ts("Runs dispatched by origin", "ops", "",
		q(`sum by (origin) (rate(sundial_dispatcher_runs_total[$__rate_interval]))`, "{{origin}}")))

	b.row("Lost and duplicate indicators")
	b.add(6, 5, stat("Dispatched, not started (runs/s, 5 min)", "ops",
		"Runs dispatched minus runs started: a lasting positive value is a backlog in Kafka, or runs lost between dispatcher and runner.",
		[]Step{{Color: "green"}, {Color: "orange", Value: f(1)}, {Color: "red", Value: f(10)}},
		q(`sundial:runs_dispatched:rate5m - sundial:runs_started:rate5m`, "")))
	b.add(6, 5, stat("Duplicate deliveries refused (1 h)", "none",
		"Redeliveries of runs that had already completed, refused by their dedupe mark: duplicates that did not execute.",
		nil, q(`sum(increase(sundial_runner_runs_total{outcome="duplicate"}[1h])) or vector(0)`, "")))
	b.add(6, 5, stat("Entries dropped as invalid (1 h)", "none",
		"Due entries whose job or entry could not be used: they fire no run.", greenAtZero,
		q(`sum(increase(sundial_dispatcher_entries_dropped_total{reason="invalid"}[1h])) or vector(0)`, "")))
	b.add(6, 5, stat("Malformed run records (1 h)", "none", "Run records a runner could not decode; they are skipped.", greenAtZero,
		q(`sum(increase(sundial_runner_runs_total{outcome="malformed"}[1h])) or vector(0)`, "")))
	b.add(12, 7, ts("Duplicates, drops and dead letters", "ops", "",
		q(`sum(rate(sundial_runner_runs_total{outcome="duplicate"}[$__rate_interval]))`, "duplicate deliveries refused"),
		q(`sum by (reason) (rate(sundial_dispatcher_entries_dropped_total[$__rate_interval]))`, "dropped: {{reason}}"),
		q(`sum(rate(sundial_runner_dead_letters_total[$__rate_interval]))`, "dead letters")))
	b.add(12, 7, ts("Runs dispatched minus runs started", "ops", "",
		q(`sum(rate(sundial_dispatcher_runs_total[$__rate_interval])) - sum(rate(sundial_runner_trigger_latency_seconds_count[$__rate_interval]))`, "dispatched - started")))

	b.row("Intake and processes")
	b.add(6, 7, ts("Job definitions by outcome", "ops", "Records of sundial.jobs processed by the registry.",
		q(`sum by (outcome) (rate(sundial_registry_records_total[$__rate_interval]))`, "{{outcome}}")))
	b.add(6, 7, ts("Definitions rejected, by field", "ops", "",
		q(`sum by (field) (rate(sundial_registry_rejections_total[$__rate_interval]))`, "{{field}}")))
	b.add(6, 7, ts("Triggers by outcome", "ops", "Records of sundial.triggers processed.",
		q(`sum by (outcome) (rate(sundial_trigger_records_total[$__rate_interval]))`, "{{outcome}}")))
	b.add(6, 7, ts("Processes up, by component", "none", "",
		q(`sum by (component) (up{job="sundial"})`, "{{component}}")))
	return b.done()
}

// Dispatcher shows shard ownership, per-shard lag and watermarks, bucket
// loads and firing.
func Dispatcher() *Dashboard {
	b := newDashboard("sundial-dispatcher", "Sundial / Dispatcher",
		"Shard ownership, per-shard dispatch lag and watermark age, bucket loads, firing and the dispatchers' Kafka client.")

	b.row("Shards")
	b.add(6, 5, stat("Shards owned", "none", "Sum over the dispatchers.", nil, q(`sundial:shards_owned:sum`, "")))
	b.add(6, 5, stat("Shards in the cluster", "none", "S, as set in deploy/prometheus/rules/sundial-alerts.yml.", nil, q(`sundial:cluster_shards:count`, "")))
	b.add(6, 5, stat("Shards without an owner", "none", "Their runs are not dispatched.", greenAtZero, q(`sundial:shards_unowned:count`, "")))
	b.add(6, 5, stat("Dispatchers", "none", "", nil, q(`count(sundial_dispatcher_shards_owned)`, "")))
	b.add(12, 8, ts("Shards owned per dispatcher", "none", "",
		q(`sum by (instance) (sundial_dispatcher_shards_owned)`, "{{instance}}")))
	b.add(12, 8, ts("Shard claims by result", "ops", "claimed; conflict and stale: another owner holds a newer epoch; error.",
		q(`sum by (result) (rate(sundial_dispatcher_claims_total[$__rate_interval]))`, "{{result}}")))

	b.row("Lag and watermarks")
	b.add(12, 8, latency("Dispatch lag, worst 10 shards",
		"Age of each shard's oldest entry that is due and not yet dispatched.",
		q(`topk(10, max by (shard) (sundial_dispatcher_shard_lag_seconds))`, "shard {{shard}}")))
	b.add(12, 8, ts("Watermark age, worst 10 shards", "s",
		"Now minus the shard's durable watermark: how far back a take-over would start.",
		q(`topk(10, max by (shard) (sundial_dispatcher_watermark_age_seconds))`, "shard {{shard}}")))
	b.add(12, 8, latency("Dispatch latency by origin (p99)", "",
		q(`histogram_quantile(0.99, sum by (le, origin) (rate(sundial_dispatcher_dispatch_latency_seconds_bucket[$__rate_interval])))`, "{{origin}}")))
	b.add(12, 8, ts("Entries in memory per dispatcher", "none", "Bounded by the look-ahead window, not by the number of jobs.",
		q(`sum by (instance) (sundial_dispatcher_entries_in_memory)`, "{{instance}}")))

	b.row("Buckets and firing")
	b.add(8, 8, latency("Bucket load time", "Time to read one minute bucket of one shard from Cassandra.",
		quantiles("sundial_dispatcher_bucket_load_seconds", "", "")...))
	b.add(8, 8, ts("Bucket size (entries)", "none", "Entries in one minute bucket of one shard when read.",
		append(quantiles("sundial_dispatcher_bucket_entries", "", ""),
			q(`sum(rate(sundial_dispatcher_bucket_entries_sum[$__rate_interval])) / sum(rate(sundial_dispatcher_bucket_entries_count[$__rate_interval]))`, "mean"))...))
	b.add(8, 8, ts("Buckets read", "ops", "",
		q(`sum(rate(sundial_dispatcher_bucket_load_seconds_count[$__rate_interval]))`, "buckets/s")))
	b.add(8, 8, ts("Runs dispatched by origin", "ops", "",
		q(`sum by (origin) (rate(sundial_dispatcher_runs_total[$__rate_interval]))`, "{{origin}}")))
	b.add(8, 8, ts("Entries dropped by reason, fire errors", "ops",
		"dead: the job changed, was deleted or paused; misfire: skipped by the misfire policy; invalid. Fire errors are retried. ENQUEUED event errors: a run was written but its ENQUEUED event was not (the run still executes; its timing lacks the dispatch time).",
		q(`sum by (reason) (rate(sundial_dispatcher_entries_dropped_total[$__rate_interval]))`, "dropped: {{reason}}"),
		q(`sum(rate(sundial_dispatcher_fire_errors_total[$__rate_interval]))`, "fire errors"),
		q(`sum(rate(sundial_dispatcher_enqueued_event_errors_total[$__rate_interval]))`, "ENQUEUED event errors")))
	b.add(8, 8, ts("Wake-ups by result", "ops", "Records read from sundial.shards for entries that land in a loaded or past bucket.",
		q(`sum by (result) (rate(sundial_dispatcher_wakeups_total[$__rate_interval]))`, "{{result}}")))
	b.add(8, 8, ts("Job definitions by result", "ops",
		"prefetch: read with a bucket; hit: a firing found its job in memory; miss: a firing read it from the store (many misses: the job feed is behind); invalidated: a registry answer dropped it; replan: the job changed before its firing time.",
		q(`sum by (result) (rate(sundial_dispatcher_job_cache_total[$__rate_interval]))`, "{{result}}")))
	b.add(8, 8, ts("Job definitions in memory", "none", "Jobs held for the entries of the loaded windows: follows the look-ahead window, not the number of jobs stored.",
		q(`sum by (instance) (sundial_dispatcher_jobs_cached)`, "{{instance}}")))
	b.add(8, 8, ts("Job feed lag", "s", "How far behind the registry's answers on sundial.jobs.status the jobs in memory are; above the prepare-ahead time firings read their jobs from the store (slower, still correct).",
		q(`max by (instance) (sundial_dispatcher_job_feed_lag_seconds)`, "{{instance}}")))
	b.add(24, 8, latency("Firing phases p99", "plan: job read, liveness check, runs built (ahead of the due time); produce: from the firing time to Kafka's acknowledgement; chain: storing the next occurrence.",
		q(`histogram_quantile(0.99, sum by (le, phase) (rate(sundial_dispatcher_fire_phase_seconds_bucket[$__rate_interval])))`, "{{phase}}")))

	b.row("Entries enqueued (registry, triggers, runner retries, DAG engine)")
	b.add(8, 8, ts("Due entries enqueued by kind", "ops",
		"Entries written to the schedule by the processes that schedule runs: scheduled (the registry's first occurrences), retry (runners), trigger, dag.",
		q(`sum by (component, kind) (rate(sundial_enqueue_entries_total[$__rate_interval]))`, "{{component}} {{kind}}")))
	b.add(8, 8, ts("Wake-ups produced by result", "ops",
		"Records written to sundial.shards for entries due within the wake horizon; skipped: due later, found by the bucket read; failed: not acknowledged, the call is retried.",
		q(`sum by (result) (rate(sundial_enqueue_wakeups_total[$__rate_interval]))`, "{{result}}")))
	b.add(8, 8, latency("Enqueue call latency p99", "One Enqueue (store write, then wake-ups) or Wake call, by process and operation.",
		q(`histogram_quantile(0.99, sum by (le, component, op) (rate(sundial_enqueue_duration_seconds_bucket[$__rate_interval])))`, "{{component}} {{op}}")))
	b.add(24, 7, ts("Enqueue calls by outcome", "ops", "ok; invalid: refused before any write; store_error; wake_error (the entry is stored, its wake-up is retried).",
		q(`sum by (component, outcome) (rate(sundial_enqueue_duration_seconds_count[$__rate_interval]))`, "{{component}} {{outcome}}")))

	b.row("Kafka client")
	b.add(12, 7, ts("Records produced by topic", "ops", "",
		q(`sum by (topic) (rate(sundial_kafka_produce_records_total{component="dispatcher"}[$__rate_interval]))`, "{{topic}}")))
	b.add(12, 7, latency("Kafka request round trip p99 by broker", "",
		q(`histogram_quantile(0.99, sum by (le, node_id) (rate(sundial_kafka_request_duration_e2e_seconds_bucket{component="dispatcher"}[$__rate_interval])))`, "broker {{node_id}}")))
	return b.done()
}

// Runner shows trigger latency, outcomes, concurrency, leases and breakers.
func Runner() *Dashboard {
	b := newDashboard("sundial-runner", "Sundial / Runner",
		"Trigger latency, runs by outcome, retries and dead letters, concurrency and queues, leases and circuit breakers.")

	b.row("Latency and outcomes")
	b.add(12, 8, latency("Trigger latency", "From the attempt's due time to the lease.",
		quantiles("sundial_runner_trigger_latency_seconds", "", "")...))
	b.add(12, 8, latency("Trigger latency p99 by priority", "",
		q(`histogram_quantile(0.99, sum by (le, priority) (rate(sundial_runner_trigger_latency_seconds_bucket[$__rate_interval])))`, "{{priority}}")))
	b.add(12, 8, ts("Runs by outcome", "ops", "",
		q(`sum by (outcome) (rate(sundial_runner_runs_total[$__rate_interval]))`, "{{outcome}}")))
	b.add(12, 8, ts("Retries and dead letters", "ops", "Retries are written back as due entries; exhausted runs go to sundial.dlq.",
		q(`sum(rate(sundial_runner_retries_total[$__rate_interval]))`, "retries"),
		q(`sum(rate(sundial_runner_dead_letters_total[$__rate_interval]))`, "dead letters")))

	b.row("Concurrency")
	b.add(8, 8, ts("Runs in flight per runner", "none", "",
		q(`sum by (instance) (sundial_runner_runs_in_flight)`, "{{instance}}")))
	b.add(8, 8, ts("Queued runs by priority", "none", "Fetched runs waiting for a worker.",
		q(`sum by (priority) (sundial_runner_queued_runs)`, "{{priority}}")))
	b.add(8, 8, ts("Offset commit errors", "ops", "",
		q(`sum(rate(sundial_runner_commit_errors_total[$__rate_interval]))`, "commit errors")))

	b.row("Leases")
	b.add(8, 8, ts("Lease acquisitions by result", "ops",
		"acquired; already_done: dedupe mark found; held and no_slot: contention (another holder, or the job's concurrency limit); error.",
		q(`sum by (result) (rate(sundial_runner_lease_acquisitions_total[$__rate_interval]))`, "{{result}}")))
	// "or vector(0)": the held and no_slot series appear at the first
	// refusal; until then the contention is 0, not unknown.
	b.add(8, 8, ts("Lease contention", "percentunit", "Share of acquisitions refused because the lease or every slot was held.",
		q(`(sum(rate(sundial_runner_lease_acquisitions_total{result=~"held|no_slot"}[$__rate_interval])) or vector(0)) / sum(rate(sundial_runner_lease_acquisitions_total[$__rate_interval]))`, "contention")))
	b.add(8, 8, ts("Leases lost during execution", "ops", "Expired or revoked while the run executed; the execution is cancelled.",
		q(`sum(rate(sundial_runner_leases_lost_total[$__rate_interval]))`, "lost")))

	b.row("Pools and routing")
	b.add(12, 8, ts("Live executors by pool", "none", "Members of each pool on sundial.executors, as the dispatchers see them; a pool at 0 for 5 minutes fires SundialPoolEmpty.",
		q(`max by (pool) (sundial_executors_live)`, "{{pool}}")))
	b.add(12, 8, ts("Runs routed by strategy", "ops", "Runs a runner chose an executor for (every strategy but partitioned by job id, which needs no choice).",
		q(`sum by (strategy) (rate(sundial_runner_routed_runs_total[$__rate_interval]))`, "{{strategy}}")))

	b.row("Team quotas")
	b.add(6, 8, ts("Quota usage by team", "percentunit", "Jobs of max_jobs and runs executing of max_concurrent_runs, for the teams with a quota of their own (sundial quotas list).",
		q(`max by (team, quota) (sundial_quota_usage) / max by (team, quota) (sundial_quota_limit > 0)`, "{{team}} {{quota}}")))
	b.add(6, 8, ts("Team slots held", "none", "Runs executing under a team's max_concurrent_runs, summed over runners.",
		q(`sum by (team) (sundial_runner_team_slots_held)`, "{{team}}")))
	b.add(6, 8, ts("Runs deferred by team quota", "ops", "Runs that found their team at max_concurrent_runs and wait (DEFERRED, reason team_quota).",
		q(`sum by (team) (rate(sundial_runner_team_quota_deferrals_total[$__rate_interval]))`, "{{team}}")))
	b.add(6, 8, ts("Definitions rejected by quota", "ops", "Definitions that would have created a job beyond the team's max_jobs.",
		q(`sum by (quota) (rate(sundial_registry_quota_rejections_total[$__rate_interval]))`, "{{quota}}"),
		q(`sum(rate(sundial_quota_scrape_errors_total[$__rate_interval]))`, "quota metrics unreadable")))

	b.row("Tenancy")
	b.add(8, 8, ts("Runs deferred by rate quota", "ops", "Runs that found their team at max_runs_per_minute and wait for the next minute (DEFERRED, reason team_rate).",
		q(`sum by (team) (rate(sundial_runner_team_rate_deferrals_total[$__rate_interval]))`, "{{team}}")))
	b.add(8, 8, ts("Targets refused by egress", "ops", "Runs failed at once because their team's egress policy does not allow the address, topic or command (egress_refused, exec_not_allowed).",
		q(`sum by (team, kind) (rate(sundial_runner_egress_refusals_total[$__rate_interval]))`, "{{team}} {{kind}}")))
	b.add(8, 8, ts("Runs dead-lettered at dispatch", "ops", "Runs Kafka refused for good (too large, invalid, not authorised), put on sundial.dlq by the dispatcher so the shard moves on.",
		q(`sum by (code) (rate(sundial_dispatcher_runs_dead_lettered_total[$__rate_interval]))`, "{{code}}")))
	b.add(8, 8, ts("Runs waiting for a worker", "ops", "Handler runs no live executor serves for their team (no worker of the team registered the handler, or none is connected to a gateway): DEFERRED, reason no_worker, by team. Alert SundialHandlerWithoutWorker.",
		q(`sum by (team) (rate(sundial_runner_no_worker_deferrals_total[$__rate_interval]))`, "{{team}}")))

	b.row("Worker gateway")
	b.add(6, 8, ts("Workers connected by team", "none", "Team workers polling the API's worker gateways, or heard from within the lost-worker bound, summed over gateways.",
		q(`sum by (team) (sundial_gateway_workers)`, "{{team}}")))
	b.add(6, 8, ts("Gateway tasks by team", "none", "Attempts the gateways hold: queued (waiting for a worker of the team) and held (taken by a worker, in flight).",
		q(`sum by (team, state) (sundial_gateway_tasks)`, "{{team}} {{state}}")))
	b.add(6, 8, latency("Gateway task queue and poll wait", "Task: from an attempt queued by a gateway to a worker of its team taking it, high when the team's workers are busy or too few. Poll: how long workers' Polls waited, by result (empty: no task came).",
		append(quantiles("sundial_gateway_task_queue_seconds", "", ""),
			q(`histogram_quantile(0.5, sum by (le, result) (rate(sundial_gateway_poll_wait_seconds_bucket[$__rate_interval])))`, "poll p50 {{result}}"))...))
	b.add(6, 8, ts("Gateway completes and lost workers", "ops", "Outcomes workers gave back, by outcome (stale: after the attempt had ended, ignored), and attempts failed as worker_lost (retried on another worker), by team.",
		q(`sum by (outcome) (rate(sundial_gateway_completes_total[$__rate_interval]))`, "{{outcome}}"),
		q(`sum by (team) (rate(sundial_gateway_workers_lost_total[$__rate_interval]))`, "lost {{team}}")))

	b.row("Run history")
	b.add(12, 8, ts("History records by result", "ops",
		"Run events read from sundial.events and the history records stored for 'sundial runs list'; refused and invalid records are dropped, retries are failed writes tried again.",
		q(`sum by (result) (rate(sundial_history_records_total[$__rate_interval]))`, "records {{result}}"),
		q(`sum by (result) (rate(sundial_history_events_total[$__rate_interval]))`, "events {{result}}"),
		q(`sum(rate(sundial_history_retries_total[$__rate_interval]))`, "retries")))
	b.add(12, 8, latency("History lag", "From a run event's time to its record stored: how far run history is behind.",
		quantiles("sundial_history_lag_seconds", "", "")...))
	b.add(12, 8, ts("History consumer lag", "s",
		"Per history writer, the age of the oldest run event not yet stored (0 when caught up); SundialHistoryBehind fires past 5 minutes.",
		q(`max by (instance) (sundial_history_consumer_lag_seconds)`, "{{instance}}")))
	b.add(12, 8, ts("History write batching", "short",
		"Events behind on sundial.events; per store write, how many records went together and how many were folded into a later state of their attempt.",
		q(`sum(sundial_history_consumer_lag_records)`, "events behind"),
		q(`sum(rate(sundial_history_records_total{result="stored"}[$__rate_interval])) / sum(rate(sundial_history_batches_total[$__rate_interval]))`, "records per write"),
		q(`sum(rate(sundial_history_coalesced_total[$__rate_interval])) / sum(rate(sundial_history_batches_total[$__rate_interval]))`, "coalesced per write")))

	b.row("Downstreams")
	b.add(24, 8, states("Circuit breakers", "Per downstream, the worst state over the runners.",
		map[string][2]string{"0": {"closed", "green"}, "1": {"half-open", "orange"}, "2": {"open", "red"}},
		q(`max by (downstream) (sundial_runner_breaker_state)`, "{{downstream}}")))

	b.row("Kafka client")
	b.add(12, 7, ts("Records fetched by topic", "ops", "",
		q(`sum by (topic) (rate(sundial_kafka_fetch_records_total{component="runner"}[$__rate_interval]))`, "{{topic}}")))
	b.add(12, 7, ts("Records produced by topic", "ops", "Events, dead letters and Kafka targets.",
		q(`sum by (topic) (rate(sundial_kafka_produce_records_total{component="runner"}[$__rate_interval]))`, "{{topic}}")))
	return b.done()
}

// DAG shows DAG runs and nodes by state, the runs the engine triggers, and
// the engine's processing of events.
func DAG() *Dashboard {
	b := newDashboard("sundial-dag", "Sundial / DAG",
		"DAG runs and nodes by state, the runs the DAG engine triggers, and its processing of sundial.events.")

	b.row("DAG runs")
	b.add(6, 5, stat("DAG runs in progress", "none", "Unfinished DAG runs as of the engine's last sweep.", nil,
		q(`max(sundial_dagengine_dag_runs{state="running"}) or vector(0)`, "")))
	b.add(6, 5, stat("Stuck DAG runs", "none", "Unfinished DAG runs in which nothing can progress (see the engine's logs).", greenAtZero,
		q(`max(sundial_dagengine_dag_runs{state="stuck"}) or vector(0)`, "")))
	b.add(6, 5, stat("DAG runs succeeded (1 h)", "none", "", nil,
		q(`sum(increase(sundial_dagengine_dag_runs_total{state="succeeded"}[1h])) or vector(0)`, "")))
	b.add(6, 5, stat("DAG runs failed or timed out (1 h)", "none", "", greenAtZero,
		q(`sum(increase(sundial_dagengine_dag_runs_total{state=~"failed|timed_out"}[1h])) or vector(0)`, "")))
	b.add(12, 8, ts("DAG runs entering each state", "ops", "running: started or resumed; succeeded, failed, timed_out. Each transition counts once over all engine instances.",
		q(`sum by (state) (rate(sundial_dagengine_dag_runs_total[$__rate_interval]))`, "{{state}}")))
	b.add(12, 8, ts("Unfinished DAG runs by state", "none", "Every instance sweeps every unfinished run, so the instances agree; the largest is shown.",
		q(`max by (state) (sundial_dagengine_dag_runs)`, "{{state}}")))

	b.row("Nodes and their runs")
	b.add(8, 8, ts("Nodes entering each state", "ops", "running (started), succeeded, failed, cancelled, timed_out, skipped.",
		q(`sum by (state) (rate(sundial_dagengine_nodes_total[$__rate_interval]))`, "{{state}}")))
	b.add(8, 8, ts("Node runs dispatched", "ops", "Runs of DAG nodes whose parents all succeeded, written to sundial.runs.*.",
		q(`sum(rate(sundial_dispatcher_runs_total{origin="dag"}[$__rate_interval]))`, "dispatched")))
	b.add(8, 8, latency("Dispatch latency of node runs", "",
		quantiles("sundial_dispatcher_dispatch_latency_seconds", `{origin="dag"}`, "")...))

	b.row("DAG engine")
	b.add(8, 8, ts("Run events by result", "ops", "Events of DAG nodes read from sundial.events: applied, ignored (duplicates, stale), unknown_dag_run, malformed, failed.",
		q(`sum by (result) (rate(sundial_dagengine_run_events_total[$__rate_interval]))`, "{{result}}")))
	b.add(8, 8, ts("Conflicts and retries", "ops", "Conditional writes that lost to another instance (recomputed), and transient errors retried by operation.",
		q(`sum(rate(sundial_dagengine_version_conflicts_total[$__rate_interval]))`, "version conflicts"),
		q(`sum by (op) (rate(sundial_dagengine_retries_total[$__rate_interval]))`, "retries: {{op}}")))
	b.add(8, 8, ts("DAG definitions by outcome", "ops", "DAG records of sundial.jobs.",
		q(`sum by (outcome) (rate(sundial_dagengine_definitions_total[$__rate_interval]))`, "{{outcome}}")))
	b.add(12, 7, ts("Records fetched by topic", "ops", "",
		q(`sum by (topic) (rate(sundial_kafka_fetch_records_total{component="dagengine"}[$__rate_interval]))`, "{{topic}}")))
	b.add(12, 7, ts("DAG engine processes up", "none", "",
		q(`sum(up{job="sundial", component="dagengine"})`, "up")))
	return b.done()
}

// Backends shows the latency and errors of Kafka, Redis and Cassandra as the
// Sundial processes see them, and the processes' own resources.
func Backends() *Dashboard {
	b := newDashboard("sundial-backends", "Sundial / Backends",
		"Kafka, Redis and Cassandra as Sundial's clients see them: call latency, throughput, errors, connection pools; and the processes' CPU and memory.")

	b.row("Kafka")
	b.add(8, 8, latency("Request round trip p99 by component", "From writing a request to reading its response (kprom request_duration_e2e).",
		q(`histogram_quantile(0.99, sum by (le, component) (rate(sundial_kafka_request_duration_e2e_seconds_bucket[$__rate_interval])))`, "{{component}}")))
	b.add(8, 8, ts("Records produced and fetched", "ops", "",
		q(`sum by (component) (rate(sundial_kafka_produce_records_total[$__rate_interval]))`, "produced: {{component}}"),
		q(`sum by (component) (rate(sundial_kafka_fetch_records_total[$__rate_interval]))`, "fetched: {{component}}")))
	b.add(8, 8, ts("Connection, read and write errors", "ops", "",
		q(`sum by (component) (rate(sundial_kafka_connect_errors_total[$__rate_interval]))`, "connect: {{component}}"),
		q(`sum by (component) (rate(sundial_kafka_read_errors_total[$__rate_interval]))`, "read: {{component}}"),
		q(`sum by (component) (rate(sundial_kafka_write_errors_total[$__rate_interval]))`, "write: {{component}}")))
	b.add(8, 7, ts("Records buffered for produce", "none", "Records in the clients waiting to be produced.",
		q(`sum by (component) (sundial_kafka_buffered_produce_records_total)`, "{{component}}")))
	b.add(8, 7, ts("Bytes produced and fetched", "Bps", "Uncompressed.",
		q(`sum by (component) (rate(sundial_kafka_produce_uncompressed_bytes_total[$__rate_interval]))`, "produced: {{component}}"),
		q(`sum by (component) (rate(sundial_kafka_fetch_uncompressed_bytes_total[$__rate_interval]))`, "fetched: {{component}}")))
	b.add(8, 7, ts("Broker throttling p99", "s", "",
		q(`histogram_quantile(0.99, sum by (le, node_id) (rate(sundial_kafka_request_throttled_seconds_bucket[$__rate_interval])))`, "broker {{node_id}}")))

	b.row("Redis")
	b.add(8, 8, latency("Command latency p99 by command", "evalsha is the lease scripts' round trip.",
		q(`histogram_quantile(0.99, sum by (le, command) (rate(sundial_redis_command_duration_seconds_bucket[$__rate_interval])))`, "{{command}}")))
	b.add(8, 8, ts("Commands by outcome", "ops", "nil is a missing key, not a failure.",
		q(`sum by (outcome) (rate(sundial_redis_command_duration_seconds_count[$__rate_interval]))`, "{{outcome}}")))
	b.add(8, 8, ts("Connection pool", "none", "",
		q(`sum by (component, state) (sundial_redis_pool_connections)`, "{{component}} {{state}}"),
		q(`sum by (component) (rate(sundial_redis_pool_timeouts_total[$__rate_interval]))`, "{{component}} pool timeouts/s"),
		q(`sum by (component) (rate(sundial_redis_dials_total{outcome!="ok"}[$__rate_interval]))`, "{{component}} failed dials/s")))

	b.row("Cassandra")
	b.add(8, 8, latency("Statement latency p99 by kind and table", "One attempt of one statement or batch (one page for reads); _lwt: lightweight transactions.",
		q(`histogram_quantile(0.99, sum by (le, op, table) (rate(sundial_cassandra_request_duration_seconds_bucket[$__rate_interval])))`, "{{op}} {{table}}")))
	b.add(8, 8, ts("Statements by outcome", "ops", "",
		q(`sum by (outcome) (rate(sundial_cassandra_request_duration_seconds_count[$__rate_interval]))`, "{{outcome}}")))
	b.add(8, 8, ts("Driver retries", "ops", "",
		q(`sum by (op, table) (rate(sundial_cassandra_request_retries_total[$__rate_interval]))`, "{{op}} {{table}}")))

	b.row("Backend work")
	b.add(24, 8, ts("Backend requests per run", "none", "What the processes asked of Kafka, Cassandra and Redis (requests, and the records, rows and commands they carried), counted by the clients' hooks, divided by the runs dispatched: docs/architecture.md, \"The work of one run\".",
		q(`sum by (backend, kind) (rate(sundial_backend_requests_total[$__rate_interval])) / scalar(sum(rate(sundial_dispatcher_runs_total[$__rate_interval])))`, "{{backend}} {{kind}}")))

	b.row("Processes")
	b.add(8, 7, ts("CPU by process", "percentunit", "",
		q(`sum by (component, instance) (rate(process_cpu_seconds_total{job="sundial"}[$__rate_interval]))`, "{{component}} {{instance}}")))
	b.add(8, 7, ts("Resident memory by process", "bytes", "",
		q(`sum by (component, instance) (process_resident_memory_bytes{job="sundial"})`, "{{component}} {{instance}}")))
	b.add(8, 7, ts("Goroutines by process", "none", "",
		q(`sum by (component, instance) (go_goroutines{job="sundial"})`, "{{component}} {{instance}}")))
	return b.done()
}
