package dagengine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sundialhq/sundial/dagengine/dag"
	"github.com/sundialhq/sundial/jobspec"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/store"
)

// handleDefinition processes one record of sundial.jobs. Records with the
// header "sundial-kind: dag" are the engine's: it validates the DagSpec,
// stores it (or the tombstone) and answers on sundial.jobs.status with a
// JobStatus whose subject is dag_id, in the encoding of the record. Job
// records are the registry's and get no answer from here; but a tombstone
// without the header deletes the DAG of its key too, if there is one, since
// jobs and DAGs share one id namespace (the registry answers it).
func (e *Engine) handleDefinition(ctx context.Context, rec *kgo.Record) []*kgo.Record {
	var kind, contentType string
	for _, h := range rec.Headers {
		switch strings.ToLower(h.Key) {
		case sundialv1.HeaderKind:
			kind = string(h.Value)
		case sundialv1.HeaderContentType:
			contentType = string(h.Value)
		}
	}
	team, teamTopic := e.cfg.Topics.TeamOf(rec.Topic)
	if kind != sundialv1.KindDag {
		if rec.Value == nil && (kind == "" || kind == sundialv1.KindJob) {
			e.deleteSilently(ctx, rec, team, teamTopic)
		}
		return nil
	}

	def, errs := dag.Decode(rec.Key, rec.Value, contentType, e.cfg.Options)
	st := &sundialv1.JobStatus{
		Subject: &sundialv1.JobStatus_DagId{DagId: jobspec.ValidUTF8(def.Key)},
		Source:  jobspec.StatusSource(rec),
		Shard:   uint32(store.ShardOf(def.Key, e.cfg.Shards)),
		// As the registry's: ownership holds only without the shared topic.
		OwnershipEnforced: !e.cfg.SharedTopic,
	}
	if def.Spec != nil && def.Spec.Revision != nil {
		st.Revision = proto.Uint64(def.Spec.GetRevision())
	}
	if len(errs) == 0 && teamTopic {
		var err error
		if errs, err = e.checkOwner(ctx, rec.Topic, team, def); err != nil {
			return nil // ctx ended: the record is redelivered
		}
	}
	var err error
	switch {
	case len(errs) > 0:
		jobspec.Reject(st, errs)
	case def.Tombstone:
		err = e.deleteDag(ctx, rec, st)
	default:
		err = e.putDag(ctx, rec, def, st)
	}
	if err != nil { // only ctx ending stops a record; it is redelivered
		return nil
	}
	st.ProcessedAt = timestamppb.New(e.cfg.Now())
	e.runs.m.definitions.WithLabelValues(strings.ToLower(strings.TrimPrefix(st.GetOutcome().String(), "DEFINITION_OUTCOME_"))).Inc()
	return []*kgo.Record{e.statusRecord(rec, def.Encoding, st)}
}

func (e *Engine) deleteDag(ctx context.Context, rec *kgo.Record, st *sundialv1.JobStatus) error {
	var outcome store.Outcome
	err := e.retry(ctx, "delete_dag", func() (err error) {
		outcome, err = e.cfg.Store.DeleteDag(ctx, string(rec.Key), e.revision(rec), rec.Timestamp)
		return err
	})
	if err != nil {
		return err
	}
	if outcome == store.OutcomeStale {
		st.Outcome = sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_STALE
		return nil
	}
	st.Accepted = true
	st.Outcome = sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_DELETED
	e.sched.notify(store.Dag{ID: string(rec.Key), Revision: e.revision(rec), Deleted: true})
	return nil
}

// checkOwner applies the ownership rules to a DAG record of team's topic,
// as the registry does to jobs: the definition must name team as
// owner_team, and the DAG in force must be team's. The answer never names
// the team that owns a DAG. It fails only when ctx ends.
func (e *Engine) checkOwner(ctx context.Context, topic, team string, def dag.Definition) ([]dag.FieldError, error) {
	if !def.Tombstone && def.Spec.GetOwnerTeam() != team {
		return []dag.FieldError{{Field: "owner_team", Reason: fmt.Sprintf(
			"%q is not the team of topic %s, %q: a team's topic carries only that team's DAGs", def.Spec.GetOwnerTeam(), topic, team)}}, nil
	}
	owner, found, err := e.ownerOf(ctx, def.Key)
	if err != nil || !found || owner == team {
		return nil, err
	}
	return []dag.FieldError{{Field: "owner_team", Reason: fmt.Sprintf(
		"DAG %s belongs to another team: a team may change or delete only its own DAGs", def.Key)}}, nil
}

// ownerOf returns the owner_team of the DAG in force (found false when
// there is none, or it is deleted).
func (e *Engine) ownerOf(ctx context.Context, id string) (owner string, found bool, err error) {
	err = e.retry(ctx, "get_dag", func() error {
		d, err := e.cfg.Store.GetDag(ctx, id)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return nil
		case err != nil:
			return err
		case d.Deleted:
			return nil
		}
		owner, found = dagOwner(d.Spec), true
		return nil
	})
	return owner, found, err
}

// dagOwner is the owner_team of a stored DagSpec; empty when it has none
// or does not decode, which matches no team.
func dagOwner(spec []byte) string {
	old := &sundialv1.DagSpec{}
	if proto.Unmarshal(spec, old) != nil {
		return ""
	}
	return old.GetOwnerTeam()
}

// deleteSilently deletes the DAG named by a tombstone sent without the
// kind header, if there is one; on a team's topic, only a DAG of that
// team.
func (e *Engine) deleteSilently(ctx context.Context, rec *kgo.Record, team string, teamTopic bool) {
	if len(rec.Key) == 0 {
		return
	}
	id := string(rec.Key)
	_ = e.retry(ctx, "delete_dag", func() error {
		d, err := e.cfg.Store.GetDag(ctx, id)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return nil
		case err != nil:
			return err
		case d.Deleted:
			return nil
		}
		if teamTopic && dagOwner(d.Spec) != team {
			return nil // another team's DAG, or one whose owner is unknown
		}
		if _, err := e.cfg.Store.DeleteDag(ctx, id, e.revision(rec), rec.Timestamp); err != nil {
			return err
		}
		e.sched.notify(store.Dag{ID: id, Revision: e.revision(rec), Deleted: true})
		e.cfg.Logger.Info("DAG deleted by a tombstone without the kind header", "dag", id, "offset", rec.Offset)
		return nil
	})
}

func (e *Engine) putDag(ctx context.Context, rec *kgo.Record, def dag.Definition, st *sundialv1.JobStatus) error {
	value, err := dag.Marshal(def.Spec)
	if err != nil {
		jobspec.Reject(st, []dag.FieldError{{Field: "record", Reason: fmt.Sprintf("cannot encode the definition: %v", err)}})
		return nil
	}
	d := store.Dag{ID: def.Key, Spec: value, Revision: e.revision(rec), UpdatedAt: rec.Timestamp}

	// The producer's revision rules hold against the definition in force.
	if def.Spec.Revision != nil {
		var stored store.Dag
		found := false
		if err := e.retry(ctx, "get_dag", func() error {
			s, err := e.cfg.Store.GetDag(ctx, d.ID)
			switch {
			case errors.Is(err, store.ErrNotFound):
				return nil
			case err != nil:
				return err
			}
			stored, found = s, true
			return nil
		}); err != nil {
			return err
		}
		if found && !stored.Deleted && stored.Revision < d.Revision {
			old := &sundialv1.DagSpec{}
			if err := proto.Unmarshal(stored.Spec, old); err == nil && old.Revision != nil {
				have, want := old.GetRevision(), def.Spec.GetRevision()
				switch {
				case want < have:
					jobspec.Reject(st, []dag.FieldError{{Field: "revision", Reason: fmt.Sprintf("%d is lower than the revision in force, %d: an older definition arrived after a newer one", want, have)}})
					return nil
				case want == have && string(store.SpecHash(value)) != string(stored.Hash):
					jobspec.Reject(st, []dag.FieldError{{Field: "revision", Reason: fmt.Sprintf("%d is the revision in force, but the definition differs from it: increase the revision with every change", want)}})
					return nil
				}
			}
		}
	}

	var outcome store.Outcome
	if err := e.retry(ctx, "put_dag", func() (err error) {
		outcome, err = e.cfg.Store.PutDag(ctx, d)
		return err
	}); err != nil {
		return err
	}
	switch outcome {
	case store.OutcomeCreated, store.OutcomeUpdated:
		st.Accepted = true
		st.Outcome = sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_CREATED
		if outcome == store.OutcomeUpdated {
			st.Outcome = sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_UPDATED
		}
		d.Hash = store.SpecHash(value)
		d.UpdatedAt = store.Truncate(d.UpdatedAt)
		e.sched.notify(d)
	case store.OutcomeUnchanged:
		st.Accepted = true
		st.Outcome = sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_UNCHANGED
	default:
		st.Outcome = sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_STALE
		return nil
	}
	if s := def.Spec.GetSchedule(); s != nil && !def.Spec.GetPaused() {
		if sched, errs := jobspec.CompileSchedule(s, rec.Timestamp.UTC().Truncate(time.Millisecond)); len(errs) == 0 {
			if next, ok := jobspec.FirstDue(sched, jobspec.MisfirePolicy(s), jobspec.CatchUpWindow(s), rec.Timestamp, e.cfg.Now()); ok {
				st.NextDueTime = timestamppb.New(store.Truncate(next))
			}
		}
	}
	return nil
}

// statusRecord encodes st in enc, keyed by the definition's key.
func (e *Engine) statusRecord(rec *kgo.Record, enc sundialv1.Encoding, st *sundialv1.JobStatus) *kgo.Record {
	if e.cfg.StatusEncoding == sundialv1.EncodingJSON {
		enc = sundialv1.EncodingJSON
	}
	out, err := jobspec.StatusRecord(e.cfg.Topics.JobsStatus(), rec, enc, st)
	if err != nil {
		e.cfg.Logger.Error("answering with a status that says it could not be encoded", "err", err)
	}
	return out
}

// revision is the revision of the definition in rec (topics.Names.Revision,
// the one rule, shared with the registry).
func (e *Engine) revision(rec *kgo.Record) int64 {
	return e.cfg.Topics.Revision(rec.Topic, rec.Offset)
}
