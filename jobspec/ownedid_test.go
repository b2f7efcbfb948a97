package jobspec_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sundialhq/sundial/jobspec"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

func TestCheckOwnedID(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, id, team string
		field, reason  string // "" field: valid
	}{
		{"an id under its owner team is valid", "billing.invoices", "billing", "", ""},
		{"a name may hold more dots and colons", "billing.eu.nightly:v2", "billing", "", ""},
		{"an id without its team's prefix is still valid (not yet required)", "invoices", "billing", "", ""},
		{"the team alone is not an id", "billing.", "billing", "id", "empty segment"},
		{"a slash is reserved for inline nodes", "b.dagx/n", "b", "id", `contains "/"`},
		{"a squat of another team's inline node is refused", "redteam-b.dagx/n", "redteam-a", "id", `contains "/"`},
		{"a double dot is an empty segment", "b..x", "b", "id", "empty segment"},
		{"a leading dot is an empty segment", "../b", "b", "id", `contains "/"`},
		{"dots alone are refused", "..", "b", "id", "empty segment"},
		{"a run-id separator is refused", "b.x@1", "b", "id", `"@"`},
		{"a team with upper case is refused", "Pay.x", "Pay", "owner_team", "lowercase"},
		{"a team with a dot is refused", "a.b.x", "a.b", "owner_team", "lowercase"},
		{"a reserved team is refused", "status.x", "status", "owner_team", "reserved"},
		{"an empty team is required", "x.y", "", "owner_team", "required"},
		{"an empty id is required", "", "b", "id", "required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			errs := jobspec.CheckOwnedID(tt.id, tt.team)
			if tt.field == "" {
				assert.Empty(t, errs)
				return
			}
			require.NotEmpty(t, errs)
			assert.Equal(t, tt.field, errs[0].Field, "%v", errs)
			assert.Contains(t, errs[0].Reason, tt.reason)
		})
	}
}

func TestLegacyIDsAreKeptOnlyForTheirStoredOwner(t *testing.T) {
	t.Parallel()
	legacy := &sundialv1.JobSpec{Id: "billing..nightly-report", OwnerTeam: "billing", Target: &sundialv1.Target{Kind: &sundialv1.Target_Handler{Handler: &sundialv1.HandlerTarget{Name: "noop"}}}}
	errs := jobspec.Validate(legacy)
	require.Len(t, errs, 1, "%v", errs)

	assert.Empty(t, jobspec.LegacyAllowed(errs, legacy, "billing", true), "the stored owner updates its legacy job")
	assert.Equal(t, errs, jobspec.LegacyAllowed(errs, legacy, "billing", false), "a new job must follow the rule")
	assert.Equal(t, errs, jobspec.LegacyAllowed(errs, legacy, "search", true), "another team cannot take a legacy id")

	slash := &sundialv1.JobSpec{Id: "b.dag/n", OwnerTeam: "b", Target: legacy.Target}
	assert.Empty(t, jobspec.LegacyAllowed(jobspec.Validate(slash), slash, "b", true), "a legacy id with a slash stays its owner's")
}

func TestInlineJobsKeepTheirNodeID(t *testing.T) {
	t.Parallel()
	inline := &sundialv1.JobSpec{Id: "data.etl/extract", OwnerTeam: "data", Target: &sundialv1.Target{Kind: &sundialv1.Target_Handler{Handler: &sundialv1.HandlerTarget{Name: "noop"}}}}
	assert.Empty(t, jobspec.Limits{}.ValidateInline(inline))
	assert.NotEmpty(t, jobspec.Validate(inline), "a defined job cannot take an inline node's id")
}

func TestValidationRefusesWhatTheRunnerWouldIgnore(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"Host", "Content-Length", "Transfer-Encoding", "Connection", "Keep-Alive", "Upgrade", "TE", "Trailer", "Proxy-Connection"} {
		spec := &sundialv1.JobSpec{Id: "t.h", OwnerTeam: "t", Target: &sundialv1.Target{Kind: &sundialv1.Target_Http{Http: &sundialv1.HttpTarget{
			Url: "https://example.com/", Headers: map[string]string{name: "x"},
		}}}}
		errs := jobspec.Validate(spec)
		require.Len(t, errs, 1, "%s: %v", name, errs)
		assert.Equal(t, `target.http.headers["`+name+`"]`, errs[0].Field)
		assert.Contains(t, errs[0].Reason, name)
	}

	zero := &sundialv1.JobSpec{Id: "t.at", OwnerTeam: "t", Schedule: &sundialv1.Schedule{Kind: &sundialv1.Schedule_At{At: &sundialv1.At{
		Time: timestamppb.New(time.Time{}),
	}}}, Target: &sundialv1.Target{Kind: &sundialv1.Target_Handler{Handler: &sundialv1.HandlerTarget{Name: "noop"}}}}
	errs := jobspec.Validate(zero)
	require.Len(t, errs, 1, "%v", errs)
	assert.Contains(t, errs[0].Reason, "before 1970")
}

func TestWholeSpecSizeIsBounded(t *testing.T) {
	t.Parallel()
	headers := map[string]string{}
	for i := range 60 {
		headers["X-Pad-"+strings.Repeat("h", 4000)[:4000-8]+string(rune('a'+i%26))+string(rune('a'+i/26))] = strings.Repeat("v", 4000)
	}
	spec := &sundialv1.JobSpec{Id: "t.big", OwnerTeam: "t", Payload: make([]byte, 256<<10), Target: &sundialv1.Target{Kind: &sundialv1.Target_Http{Http: &sundialv1.HttpTarget{
		Url: "https://example.com/", Body: make([]byte, 256<<10), Headers: headers,
	}}}}
	errs := jobspec.Validate(spec)
	require.Len(t, errs, 1, "%v", errs)
	assert.Equal(t, "record", errs[0].Field)
	assert.Contains(t, errs[0].Reason, "at most 524288")
}
