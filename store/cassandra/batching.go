package cassandra

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"strings"

	"github.com/gocql/gocql"
	"golang.org/x/sync/errgroup"
)

// Whether an unlogged batch may span partitions.
//
// A batch confined to one partition is one mutation, applied by the replicas
// that own it. A batch spanning partitions is sent to one coordinator, which
// applies each partition's mutation on that partition's replicas. When
// every node holds a replica of every partition of the keyspace (one node;
// three nodes with replication factor 3; each data centre with no more nodes
// than its replication factor), the coordinator is a replica of every
// partition in the batch: it writes them all locally and replicates them as
// it would single writes, and the cluster answers one request instead of
// one per partition. On 27 November 2026 that request overhead was most of
// Cassandra's CPU for the hot path's one-row writes (the next occurrence of
// a firing, the history row of an attempt). In a larger cluster such a batch
// makes one coordinator wait on many replicas, the classic way to overload
// Cassandra, so there batches stay within one partition.
//
// fullReplicas answers that question for the keyspace, from system.local,
// system.peers_v2 (peerDataCentres) and the keyspace's replication, read once when the store
// opens: a cluster grown past its replication factor later keeps batching
// across partitions until its processes restart, which costs coordination,
// never correctness (every statement keeps its own key and write timestamp).
func fullReplicas(ctx context.Context, sess *gocql.Session, keyspace string) (bool, error) {
	var (
		local       string
		replication map[string]string
	)
	if err := sess.Query(`SELECT data_center FROM system.local`).WithContext(ctx).Idempotent(true).Scan(&local); err != nil {
		return false, fmt.Errorf("read the local node's data centre: %w", err)
	}
	nodes := map[string]int{local: 1}
	peers, err := peerDataCentres(ctx, sess)
	if err != nil {
		return false, fmt.Errorf("read the peers' data centres: %w", err)
	}
	for _, dc := range peers {
		nodes[dc]++
	}
	if err := sess.Query(`SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = ?`, keyspace).
		WithContext(ctx).Idempotent(true).Scan(&replication); err != nil {
		return false, fmt.Errorf("read the replication of keyspace %s: %w", keyspace, err)
	}
	return everyNodeReplicates(nodes, replication), nil
}

// everyNodeReplicates says whether, with nodes per data centre and a
// keyspace's replication settings, every node holds a replica of every
// partition. An unknown strategy answers no.
func everyNodeReplicates(nodes map[string]int, replication map[string]string) bool {
	class := replication["class"]
	switch {
	case strings.HasSuffix(class, "SimpleStrategy"):
		rf, err := strconv.Atoi(replication["replication_factor"])
		if err != nil {
			return false
		}
		total := 0
		for _, n := range nodes {
			total += n
		}
		return total <= rf
	case strings.HasSuffix(class, "NetworkTopologyStrategy"):
		for dc, n := range nodes {
			rf, err := strconv.Atoi(replication[dc])
			if err != nil || n > rf {
				return false
			}
		}
		return true
	}
	return false
}

// maxCrossBatchBytes bounds the estimated size of a batch of due entries or
// run records that spans partitions: the server logs a warning for every
// such batch over batch_size_warn_threshold (5 KiB by default) and refuses
// one over batch_size_fail_threshold (50 KiB); a batch within one partition
// is exempt from both. The hot path's batches are small anyway (what the
// firings of one dispatcher hand in while a write is out).
const maxCrossBatchBytes = 4 << 10

// statementOverhead is added to a statement's own bytes (keys and payload)
// when estimating a batch's size: its fixed columns and framing.
const statementOverhead = 64

// packGroups puts consecutive groups (each the statements of one
// partition, in order) into shared batches of at most maxStmts statements
// and maxBytes of estimated size (size estimates a statement's own bytes):
// maxCrossBatchBytes on the hot path, maxRowBatchBytes for registration's
// writes. A group is never split across shared batches: one that alone
// exceeds a batch is cut by split into batches within its partition, to
// which the server's size threshold does not apply. The order of a group's
// statements is kept.
func packGroups[T any](groups [][]T, maxStmts, maxBytes int, size func(T) int, split func([]T) iter.Seq[[]T]) iter.Seq[[]T] {
	return func(yield func([]T) bool) {
		var cur []T
		curBytes := 0
		flush := func() bool {
			if len(cur) == 0 {
				return true
			}
			b := cur
			cur, curBytes = nil, 0
			return yield(b)
		}
		for _, g := range groups {
			gBytes := 0
			for _, x := range g {
				gBytes += size(x) + statementOverhead
			}
			if len(g) > maxStmts || gBytes > maxBytes {
				if !flush() {
					return
				}
				for b := range split(g) {
					if !yield(b) {
						return
					}
				}
				continue
			}
			if len(cur)+len(g) > maxStmts || curBytes+gBytes > maxBytes {
				if !flush() {
					return
				}
			}
			cur = append(cur, g...)
			curBytes += gBytes
		}
		flush()
	}
}

// partStmt is one write of writeByPartition: its statement and values, the
// partition it writes (any string that tells the partitions of the
// statements apart) and an estimate of its own bytes (keys and values).
type partStmt struct {
	part  string
	stmt  string
	args  []any
	bytes int
}

// writeByPartition writes stmts, which must be idempotent, in unlogged
// batches: the statements of one partition together and in their order, at
// most maxStmts to a batch (one mutation each), and, when every node
// replicates every partition, the statements of several partitions in one
// batch (packGroups) of at most maxBytes. Up to WriteConcurrency batches
// are out at once. On error some statements may be written: a retry writes
// them again.
func (s *Store) writeByPartition(ctx context.Context, stmts []partStmt, maxStmts, maxBytes int) error {
	groups := map[string][]partStmt{}
	var order []string
	for _, st := range stmts {
		if _, ok := groups[st.part]; !ok {
			order = append(order, st.part)
		}
		groups[st.part] = append(groups[st.part], st)
	}
	split := func(g []partStmt) iter.Seq[[]partStmt] {
		return slices.Chunk(g, maxStmts)
	}
	ordered := make([][]partStmt, len(order))
	for i, p := range order {
		ordered[i] = groups[p]
	}
	batches := func(yield func([]partStmt) bool) {
		for _, g := range ordered {
			for b := range split(g) {
				if !yield(b) {
					return
				}
			}
		}
	}
	if s.cross {
		batches = packGroups(ordered, maxStmts, maxBytes, func(st partStmt) int { return st.bytes }, split)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(s.cfg.WriteConcurrency)
	for chunk := range batches {
		g.Go(func() error {
			if len(chunk) == 1 {
				return s.idempotent(gctx, chunk[0].stmt, chunk[0].args...).Exec()
			}
			b := s.sess.NewBatch(gocql.UnloggedBatch).WithContext(gctx)
			for _, st := range chunk {
				b.Entries = append(b.Entries, gocql.BatchEntry{Stmt: st.stmt, Args: st.args, Idempotent: true})
			}
			return s.sess.ExecuteBatch(b)
		})
	}
	return g.Wait()
}
