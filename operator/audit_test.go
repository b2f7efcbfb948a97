package operator_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/audit"
	"github.com/sundialhq/sundial/auth"
	"github.com/sundialhq/sundial/operator"
)

type records []audit.Record

func (r *records) Record(_ context.Context, rec audit.Record) error {
	if err := rec.Validate(); err != nil {
		return err
	}
	*r = append(*r, rec)
	return nil
}

func TestAuditTrailActor(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)
	var got records
	trail := operator.AuditTrail{Trail: &got, Fallback: "cli:ops"}

	caller := auth.NewContext(t.Context(), auth.Principal{Subject: "token:abc", Team: "data", Role: auth.RoleOperator})
	require.NoError(t, trail.Record(caller, operator.Action{Kind: "pause", JobID: "j", Team: "data", At: at}))
	require.NoError(t, trail.Record(t.Context(), operator.Action{Kind: "cancel", JobID: "j", RunID: "j@1", Team: "data", At: at}))

	require.Len(t, got, 2)
	assert.Equal(t, "token:abc", got[0].Actor)
	assert.Equal(t, operator.AuditPaused, got[0].Action)
	assert.Equal(t, "data", got[0].Team)
	assert.Equal(t, "cli:ops", got[1].Actor, "no principal: the fallback")
	assert.Equal(t, operator.AuditCancelled, got[1].Action)
	assert.Contains(t, got[1].Detail, "j@1")
	assert.NotEqual(t, got[0].ID, got[1].ID, "two actions, two records")
}
