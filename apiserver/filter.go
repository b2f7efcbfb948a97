package apiserver

import (
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/sundialhq/sundial/auth"
	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// definition is what filters look at in a job or DAG definition.
type definition struct {
	id          string
	team        string
	labels      map[string]string
	paused      bool
	schedule    *sundialv1.Schedule
	description string
}

// stateOf is a definition's DefinitionState.
func stateOf(paused bool) apiv1.DefinitionState {
	if paused {
		return apiv1.DefinitionState_DEFINITION_STATE_PAUSED
	}
	return apiv1.DefinitionState_DEFINITION_STATE_ACTIVE
}

// scheduleKindOf is the kind of a schedule, SCHEDULE_KIND_NONE without one.
func scheduleKindOf(s *sundialv1.Schedule) apiv1.ScheduleKind {
	switch s.GetKind().(type) {
	case *sundialv1.Schedule_Immediate:
		return apiv1.ScheduleKind_SCHEDULE_KIND_IMMEDIATE
	case *sundialv1.Schedule_At:
		return apiv1.ScheduleKind_SCHEDULE_KIND_AT
	case *sundialv1.Schedule_Delay:
		return apiv1.ScheduleKind_SCHEDULE_KIND_DELAY
	case *sundialv1.Schedule_Cron:
		return apiv1.ScheduleKind_SCHEDULE_KIND_CRON
	case *sundialv1.Schedule_Interval:
		return apiv1.ScheduleKind_SCHEDULE_KIND_INTERVAL
	default:
		return apiv1.ScheduleKind_SCHEDULE_KIND_NONE
	}
}

// selects reports whether p may see d and d passes f and contains text
// (case-insensitively, in its id, description or label values; "" passes).
func selects(p auth.Principal, f *apiv1.DefinitionFilter, text string, d definition) bool {
	if !p.CanSee(d.team) {
		return false
	}
	if f.GetTeam() != "" && f.GetTeam() != d.team {
		return false
	}
	for k, v := range f.GetLabels() {
		if got, ok := d.labels[k]; !ok || got != v {
			return false
		}
	}
	if st := f.GetState(); st != apiv1.DefinitionState_DEFINITION_STATE_UNSPECIFIED && st != stateOf(d.paused) {
		return false
	}
	if k := f.GetScheduleKind(); k != apiv1.ScheduleKind_SCHEDULE_KIND_UNSPECIFIED && k != scheduleKindOf(d.schedule) {
		return false
	}
	return text == "" || containsText(d, strings.ToLower(text))
}

func containsText(d definition, lower string) bool {
	if strings.Contains(strings.ToLower(d.id), lower) || strings.Contains(strings.ToLower(d.description), lower) {
		return true
	}
	for _, v := range d.labels {
		if strings.Contains(strings.ToLower(v), lower) {
			return true
		}
	}
	return false
}

// selectedSpec decodes a stored job definition and reports whether p may
// see it and it passes f and text (selects). A definition that does not
// decode is not selected: it is not this caller's to fix, and GetJob
// reports it.
func selectedSpec(p auth.Principal, f *apiv1.DefinitionFilter, text string, raw []byte) (*sundialv1.JobSpec, bool) {
	spec := &sundialv1.JobSpec{}
	if err := proto.Unmarshal(raw, spec); err != nil {
		return nil, false
	}
	return spec, selects(p, f, text, definition{
		id: spec.GetId(), team: spec.GetOwnerTeam(), labels: spec.GetLabels(),
		paused: spec.GetPaused(), schedule: spec.GetSchedule(), description: spec.GetDescription(),
	})
}
