package topics

import (
	"fmt"
	"regexp"
	"strings"
	"time"
)

// Base names of the per-team job topics and of the audit trail.
const (
	baseTeamJobs = "sundial.jobs."
	baseAudit    = "sundial.audit"
)

// reservedTeams are the names that cannot be teams because their job topic
// would be another topic of Sundial's.
var reservedTeams = map[string]bool{"status": true}

// teamName is what a team may be called: it becomes part of a topic name and
// of a Kafka ACL, so it is kept to characters every tool quotes the same way.
var teamName = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// ValidTeam reports why team cannot name a team's job topic, or nil.
func ValidTeam(team string) error {
	switch {
	case !teamName.MatchString(team):
		return fmt.Errorf("team %q: must be 1 to 63 lowercase letters, digits or hyphens, starting with a letter or digit", team)
	case reservedTeams[team]:
		return fmt.Errorf("team %q: reserved (sundial.jobs.%s is another topic)", team, team)
	}
	return nil
}

// TeamJobs is sundial.jobs.<team>: the job and DAG definitions of one team,
// keyed by id, laid out and compacted like sundial.jobs. Kafka ACLs decide
// who may write it; the registry takes the owning team from its name. An
// invalid team panics: teams come from validated configuration.
func (n Names) TeamJobs(team string) string {
	if err := ValidTeam(team); err != nil {
		panic("topics: " + err.Error())
	}
	return n.Prefix + baseTeamJobs + team
}

// TeamOf returns the team whose job topic topic is, or false when topic is
// no team's job topic (sundial.jobs itself, sundial.jobs.status, another).
func (n Names) TeamOf(topic string) (string, bool) {
	team, ok := strings.CutPrefix(topic, n.Prefix+baseTeamJobs)
	if !ok || ValidTeam(team) != nil {
		return "", false
	}
	return team, true
}

// TeamRevisionBase is added to the offset of a definition read from a
// team's job topic to make its revision (Names.Revision).
const TeamRevisionBase = int64(1) << 40

// Revision is the revision of the definition at offset of topic, the one
// rule for it: the offset itself on the shared sundial.jobs (and any topic
// that is no team's), TeamRevisionBase+offset on a team's job topic.
// Revisions order the definitions of one job, and a job's definitions come
// from one partition of one topic, except while an installation moves from
// the shared topic to team topics: there the offsets of the two topics are
// unrelated. The base puts every team-topic revision after every
// shared-topic one (no partition reaches 2^40 records), so the team's first
// definition on its own topic replaces the one it defined on the shared
// topic, and the shared topic can no longer change the job afterwards.
func (n Names) Revision(topic string, offset int64) int64 {
	if _, ok := n.TeamOf(topic); ok {
		return TeamRevisionBase + offset
	}
	return offset
}

// JobsTopicPatterns returns the regular expressions (Go syntax, anchored)
// of the definition topics a consumer of definitions reads: every team's
// job topic, and sundial.jobs itself when shared is true. Exclude lists the
// topics the patterns match but that carry no definitions.
func (n Names) JobsTopicPatterns(shared bool) (patterns, exclude []string) {
	patterns = []string{"^" + regexp.QuoteMeta(n.Prefix+baseTeamJobs) + `[a-z0-9][a-z0-9-]{0,62}$`}
	if shared {
		patterns = append(patterns, "^"+regexp.QuoteMeta(n.Jobs())+"$")
	}
	for team := range reservedTeams {
		exclude = append(exclude, "^"+regexp.QuoteMeta(n.Prefix+baseTeamJobs+team)+"$")
	}
	return patterns, exclude
}

// TeamJobsSpec is how a team's job topic is created: as sundial.jobs, so
// that a job keeps its partition whichever definition topic carries it.
func (n Names) TeamJobsSpec(team string) Spec {
	return Spec{Name: n.TeamJobs(team), Partitions: JobsPartitions, Configs: map[string]string{"cleanup.policy": "compact"}}
}

// Audit is sundial.audit: the audit trail (package audit), one record per
// definition change or operator action, keyed by job or DAG id. Only
// Sundial's own processes write it.
func (n Names) Audit() string { return n.Prefix + baseAudit }

// AuditPartitions and AuditRetention shape sundial.audit. The topic is a
// feed for other systems; the store keeps the trail for its own retention.
const (
	AuditPartitions = 4
	AuditRetention  = 90 * 24 * time.Hour
)

// AuditSpec is how sundial.audit is created.
func (n Names) AuditSpec() Spec {
	return Spec{Name: n.Audit(), Partitions: AuditPartitions, Configs: map[string]string{
		"cleanup.policy": "delete", "retention.ms": fmt.Sprint(AuditRetention.Milliseconds()),
	}}
}
