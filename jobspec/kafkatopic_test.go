package jobspec

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestSundialTopicIsRefusedBehindAnyPrefix(t *testing.T) {
	t.Parallel()
	for topic, want := range map[string]bool{
		"sundial.anything":           true,
		"x.sundial.jobs":             true,
		"x.sundial.jobs.team-b":      true,
		"xsundial.audit":             true,
		"a.sundial.b.sundial.events": true,
		"x.sundial.jobsearch":        false,
		"payments.sundial.notes":     false,
		"payments.events":            false,
		"mysundial":                  false,
	} {
		assert.Equal(t, want, sundialTopic(topic), topic)
	}
}
