// Package apiserver is the control-plane API: one HTTP server that answers
// gRPC, gRPC-Web and HTTP/JSON (Connect) from the schema in
// proto/sundial/api/v1, with the job and DAG services.
//
//	srv, err := apiserver.New(apiserver.Config{
//		Addr:          "127.0.0.1:8480",
//		Authenticator: tokens,
//		Services:      []apiserver.Service{jobs.Service(), dags.Service()},
//	})
//	err = srv.Start(ctx)
//	defer srv.Stop()
//
// # Invariants
//
//   - Stateless: a server holds no state beyond its connections. Every read
//     goes to the store, every change is a record produced to the jobs topic,
//     so any number of servers run side by side behind one address.
//   - Kafka is the one write path: ApplyJob and DeleteJob (and their DAG
//     twins) produce what a platform team's producer would, and wait for the
//     registry's (or DAG engine's) answer on the status topic, matched by the
//     record it names. A change answered late may still be applied: the
//     DeadlineExceeded answer says so; the status topic has the final word.
//     Resuming a DAG run (ResumeDagRun) is no definition: it calls the DAG
//     engine's own code (dagengine.Runs.Resume, as `sundial dag resume`
//     does), one conditional write of the DAG run that no concurrent engine
//     can lose, and PlanDag checks a DAG definition with ApplyDag's checks
//     (dagProblems) and writes nothing.
//   - Authentication before anything: every Connect call and every plain
//     handler passes the Authenticator first, in the edge (edge.go), before
//     a byte of the body is read, inflated or decoded. A call without a valid bearer
//     token is answered Unauthenticated (401) and reaches no service (a
//     refused JWT's answer names why; a refused Sundial token's says only
//     "not valid"); a credential that could not be checked because a
//     backend is down is Unavailable (503), never a bad credential. An
//     accepted call's context carries its auth.Principal (auth.FromContext).
//     Only HealthPath, MetricsPath and the paths of Config.Public (the web
//     console's static files, which hold no secret and call the API with
//     the user's own token) are open; a path is open only when the mux
//     routes it to one of those handlers.
//   - Visibility: a definition of a team the caller may not see
//     (auth.Principal.CanSee) is answered NotFound, exactly as a missing one,
//     never PermissionDenied, and listings leave it out; the cluster admin
//     sees every team. PermissionDenied is only said to callers about their
//     own team (a viewer who tries to apply).
//   - Secrets: every definition an answer holds (jobs, DAGs, dead runs,
//     plans) has its HTTP targets' secret values shown as "<redacted>", to
//     every caller, the cluster admin included (jobspec.Redact). An apply
//     (ApplyJob, ApplyDag, PlanApply) puts the stored value back for a
//     "<redacted>" value before it produces, so a read-edit-apply cycle
//     keeps the secrets and the record on Kafka stays the whole
//     definition; it is refused when nothing is stored behind it or the
//     URL's host changed (jobspec.KeepRedacted).
//   - Ownership: a change needs the admin role in the definition's
//     owner_team, and a definition of a team the caller may not see cannot be
//     overwritten by applying the same id under the caller's team.
//   - Bounded edge: a body is bounded as sent and after decompression
//     (Config.MaxRequestBytes), and in time (Config.BodyReadTimeout, lifted
//     once it is read so that streams live on); headers, idle connections
//     and their number are bounded too, and a caller holds at most
//     WatchServiceConfig.MaxStreamsPerCaller watches.
//   - Errors that can never succeed (a record too large for Kafka, a
//     backfill over its bound) are InvalidArgument naming the limit, never
//     Unavailable (produceError).
//   - Bounded work: a page holds at most MaxPageSize items, and one listing
//     request reads at most JobServiceConfig.MaxScan stored definitions; a
//     page cut short by it still carries a next page token. Page tokens carry
//     a hash of the filter and are refused with another.
//   - Metrics: requests are counted by procedure and code, refused ones
//     included; no label carries a team, job or token.
//   - Lifecycle: Start listens and serves; Stop stops accepting, gives
//     requests in flight Config.ShutdownGrace, and returns once the serving
//     goroutines have exited. Stop is idempotent and safe before Start.
//   - Acting needs the operator role in the job's team (OperatorService);
//     every change the API makes (applies, deletes, operator actions) is
//     recorded in the audit trail with the caller's Subject as actor, after
//     it took effect; a failure to record is logged, never undoes it.
//   - Teams and tokens (TeamService): teams, and the tokens of any team, are
//     the cluster admin's; a team's admin lists, creates and revokes its own
//     team's tokens only, and another team's token is NotFound to it. A
//     token's secret is in CreateToken's answer only: never in another
//     answer, an audit record, a log line or an error, nor is its hash.
//   - Teams and quotas are written by the cluster admin alone (CreateTeam,
//     DeleteTeam, SetQuotas): to a team's caller another team is NotFound,
//     whether it exists or not, and its own team PermissionDenied
//     (requireClusterAdminOf). A quota change is checked by the quota
//     package's one rule (quota.Change), as the CLI's is.
//
// Other services (runs, DLQ, watch, cluster, operator, audit, quotas, teams)
// mount the same way: a Service built with ConnectService gets the same
// interceptors, and a plain http.Handler in Config.Handlers gets the same
// authentication.
package apiserver
