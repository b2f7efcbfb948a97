package dag

import "fmt"

// MayRunJob reports whether a registered job whose stored owner_team is
// jobTeam may run as a node of a DAG owned by dagTeam: only when both name
// the same team. A DAG's node runs belong to the DAG's team (quota, dead
// letters, run history), never to another's.
func MayRunJob(jobTeam, dagTeam string) bool {
	return dagTeam != "" && jobTeam == dagTeam
}

// JobNotFound is the one reason given for a job_id node whose job is
// missing, deleted, or another team's: the cases read the same, so that a
// DAG learns nothing of other teams' job ids.
func JobNotFound(jobID, dagTeam string) string {
	return fmt.Sprintf("job %q not found in team %s", jobID, dagTeam)
}
