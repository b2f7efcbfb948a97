package audit_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sundialhq/sundial/audit"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

func cron(expr string) *sundialv1.Schedule {
	return &sundialv1.Schedule{Kind: &sundialv1.Schedule_Cron{Cron: &sundialv1.Cron{Expression: expr}}}
}

func TestDiff(t *testing.T) {
	t.Parallel()
	base := &sundialv1.JobSpec{
		Id: "j", OwnerTeam: "a", Schedule: cron("0 * * * *"), Priority: sundialv1.Priority_PRIORITY_HIGH,
		Labels: map[string]string{"env": "prod", "tier": "1"}, Timeout: durationpb.New(60e9),
	}
	with := func(f func(s *sundialv1.JobSpec)) *sundialv1.JobSpec {
		s := proto.Clone(base).(*sundialv1.JobSpec)
		f(s)
		return s
	}
	tests := []struct {
		name          string
		before, after proto.Message
		want          []audit.Change
	}{
		{"identical", base, with(func(*sundialv1.JobSpec) {}), nil},
		{"nested scalar", base, with(func(s *sundialv1.JobSpec) { s.Schedule = cron("*/5 * * * *") }),
			[]audit.Change{{Field: "schedule.cron.expression", Before: `"0 * * * *"`, After: `"*/5 * * * *"`}}},
		{"enum by name and a map whole", base, with(func(s *sundialv1.JobSpec) {
			s.Priority = sundialv1.Priority_PRIORITY_LOW
			s.Labels["env"] = "dev"
		}), []audit.Change{
			{Field: "labels", Before: `{env: "prod", tier: "1"}`, After: `{env: "dev", tier: "1"}`},
			{Field: "priority", Before: "PRIORITY_HIGH", After: "PRIORITY_LOW"},
		}},
		{"field unset", base, with(func(s *sundialv1.JobSpec) { s.Timeout = nil }),
			[]audit.Change{{Field: "timeout", Before: `"60s"`}}},
		{"oneof switched", base, with(func(s *sundialv1.JobSpec) {
			s.Schedule = &sundialv1.Schedule{Kind: &sundialv1.Schedule_Immediate{Immediate: &sundialv1.Immediate{}}}
		}), []audit.Change{{Field: "schedule.immediate", After: "{}"}, {Field: "schedule.cron", Before: `{"expression":"0 * * * *"}`}}},
		{"creation", nil, &sundialv1.JobSpec{Id: "j", Paused: true},
			[]audit.Change{{Field: "id", After: `"j"`}, {Field: "paused", After: "true"}}},
		{"deletion", &sundialv1.JobSpec{Id: "j"}, nil, []audit.Change{{Field: "id", Before: `"j"`}}},
		{"typed nil", (*sundialv1.JobSpec)(nil), &sundialv1.JobSpec{Id: "j"}, []audit.Change{{Field: "id", After: `"j"`}}},
		{"optional set to its zero", &sundialv1.JobSpec{}, &sundialv1.JobSpec{Revision: proto.Uint64(0)},
			[]audit.Change{{Field: "revision", After: "0"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, audit.Diff(tt.before, tt.after))
		})
	}
}

func TestDiffCutsLongValues(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", audit.MaxValue) // two bytes each: the cut splits one
	got := audit.Diff(&sundialv1.JobSpec{}, &sundialv1.JobSpec{Description: long})
	assert.Len(t, got, 1)
	assert.LessOrEqual(t, len(got[0].After), audit.MaxValue+len("…"))
	assert.True(t, strings.HasSuffix(got[0].After, "…"))
	assert.True(t, strings.ToValidUTF8(got[0].After, "?") == got[0].After, "valid UTF-8")
}

func TestRecordValidate(t *testing.T) {
	t.Parallel()
	err := audit.Record{}.Validate()
	for _, f := range []string{"id", "actor", "action", "subject", "at"} {
		assert.ErrorContains(t, err, f+": required")
	}
}
