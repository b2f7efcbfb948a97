package operator

import (
	"context"
	"fmt"
	"time"

	"github.com/sundialhq/sundial/audit"
	"github.com/sundialhq/sundial/auth"
)

// Audit actions of the operator actions, as they appear in the trail.
const (
	AuditPaused     = "job.paused"
	AuditResumed    = "job.resumed"
	AuditTriggered  = "job.triggered"
	AuditBackfilled = "job.backfilled"
	AuditCancelled  = "run.cancelled"
	AuditRetried    = "run.retried"
)

// auditActions maps an Action's Kind to its audit action.
var auditActions = map[string]string{
	"pause": AuditPaused, "resume": AuditResumed, "trigger": AuditTriggered,
	"backfill": AuditBackfilled, "cancel": AuditCancelled, "retry": AuditRetried,
}

// AuditTrail is the Recorder that writes each Action to the audit trail.
// The actor is the caller's auth.Principal in ctx (its Subject: a token,
// an OIDC subject); a call without a principal (the CLI, run with the
// store's credentials) is recorded as Fallback.
type AuditTrail struct {
	// Trail receives the records (*audit.Trail). Required.
	Trail audit.Recorder
	// Fallback is the actor of actions taken without a principal in ctx,
	// "cli:<user>" say. Empty records them as "unknown".
	Fallback string
}

var _ Recorder = AuditTrail{}

// Record writes a as one audit record. Its ID is the action's time, kind
// and subject, so that records sort in the order of the actions.
func (t AuditTrail) Record(ctx context.Context, a Action) error {
	actor := t.Fallback
	if p, ok := auth.FromContext(ctx); ok && p.Subject != "" {
		actor = p.Subject
	}
	if actor == "" {
		actor = "unknown"
	}
	action := auditActions[a.Kind]
	if action == "" {
		action = "job." + a.Kind
	}
	detail := a.Detail
	if a.RunID != "" {
		detail = "run " + a.RunID + " " + detail
	}
	at := a.At.UTC()
	return t.Trail.Record(ctx, audit.Record{
		ID:      fmt.Sprintf("%s/%s/%s/%s", at.Format("20060102T150405.000000000Z"), action, a.JobID, a.RunID),
		At:      at.Truncate(time.Millisecond),
		Actor:   actor,
		Action:  action,
		Subject: a.JobID,
		Team:    a.Team,
		Detail:  detail,
	})
}
