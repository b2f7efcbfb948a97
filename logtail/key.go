package logtail

import "strconv"

// Key is the Redis stream of one attempt's log. keyPrefix is the runners'
// key prefix (runner.Config.KeyPrefix); the job id in braces keeps every
// key of a job in one Redis Cluster slot, as the runner's other keys do.
func Key(keyPrefix, jobID, runID string, attempt uint32) string {
	return keyPrefix + "{" + jobID + "}:log:" + runID + ":" + strconv.FormatUint(uint64(attempt), 10)
}
