// Package quotatest is the conformance suite of quota.Store: every
// implementation (quota.Memory, the Cassandra store) runs it.
package quotatest
