package topics_test

import (
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/internal/topics"
)

func TestTeamTopics(t *testing.T) {
	t.Parallel()
	n := topics.Names{Prefix: "p.x+"}
	assert.Equal(t, "p.x+sundial.jobs.team-a", n.TeamJobs("team-a"))
	assert.Equal(t, "p.x+sundial.audit", n.Audit())

	for _, tc := range []struct {
		topic string
		team  string
		ok    bool
	}{
		{"p.x+sundial.jobs.team-a", "team-a", true},
		{"p.x+sundial.jobs.7", "7", true},
		{"p.x+sundial.jobs", "", false},
		{"p.x+sundial.jobs.status", "", false},
		{"p.x+sundial.jobs.Team", "", false},
		{"p.x+sundial.jobs.a.b", "", false},
		{"sundial.jobs.team-a", "", false},
		{"p.x+sundial.audit", "", false},
	} {
		team, ok := n.TeamOf(tc.topic)
		assert.Equal(t, tc.ok, ok, tc.topic)
		assert.Equal(t, tc.team, team, tc.topic)
	}

	for _, bad := range []string{"", "status", "-a", "A", "a.b", "a_b", string(make([]byte, 64))} {
		assert.Error(t, topics.ValidTeam(bad), "%q", bad)
		assert.Panics(t, func() { n.TeamJobs(bad) }, "%q", bad)
	}
	require.NoError(t, topics.ValidTeam("a"))
}

// Every team-topic revision follows every shared-topic one, and within a
// topic revisions follow offsets.
func TestRevision(t *testing.T) {
	t.Parallel()
	n := topics.Names{Prefix: "p."}
	for _, tc := range []struct {
		topic  string
		offset int64
		want   int64
	}{
		{"p.sundial.jobs", 0, 0},
		{"p.sundial.jobs", 123456789, 123456789},
		{"p.sundial.jobs.team-a", 0, topics.TeamRevisionBase},
		{"p.sundial.jobs.team-a", 7, topics.TeamRevisionBase + 7},
		{"sundial.jobs.team-a", 7, 7}, // another installation's: not a team topic here
		{"p.sundial.jobs.status", 7, 7},
	} {
		assert.Equal(t, tc.want, n.Revision(tc.topic, tc.offset), "%s@%d", tc.topic, tc.offset)
	}
	assert.Greater(t, n.Revision("p.sundial.jobs.team-a", 0), n.Revision("p.sundial.jobs", 1<<39),
		"a team's first definition replaces one from the shared topic")
}

// The patterns match exactly the topics TeamOf accepts, plus sundial.jobs
// when shared, once the exclusions are applied: what the registry and the DAG
// engine consume.
func TestJobsTopicPatterns(t *testing.T) {
	t.Parallel()
	n := topics.Names{Prefix: "p.x+"}
	consumed := func(shared bool, topic string) bool {
		patterns, exclude := n.JobsTopicPatterns(shared)
		for _, e := range exclude {
			if regexp.MustCompile(e).MatchString(topic) {
				return false
			}
		}
		for _, p := range patterns {
			if regexp.MustCompile(p).MatchString(topic) {
				return true
			}
		}
		return false
	}
	for _, topic := range []string{
		"p.x+sundial.jobs", "p.x+sundial.jobs.status", "p.x+sundial.jobs.team-a", "p.x+sundial.jobs.a.b",
		"pAx+sundial.jobs.team-a", "sundial.jobs.team-a", "p.x+sundial.jobs.team-a.x", "p.x+sundial.audit",
		"p.x+sundial.triggers",
	} {
		_, team := n.TeamOf(topic)
		assert.Equal(t, team || topic == n.Jobs(), consumed(true, topic), "shared: %s", topic)
		assert.Equal(t, team, consumed(false, topic), "teams only: %s", topic)
	}
}
