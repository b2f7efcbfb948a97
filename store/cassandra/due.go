package cassandra

import (
	"bytes"
	"context"
	"fmt"
	"iter"
	"time"

	"github.com/gocql/gocql"
	"golang.org/x/sync/errgroup"

	"github.com/sundialhq/sundial/store"
)

// PutDue implements store.Schedule.
func (s *Store) PutDue(ctx context.Context, entries ...store.DueEntry) error {
	for i, e := range entries {
		if err := e.Validate(); err != nil {
			return fmt.Errorf("put due entry %d: %w", i, err)
		}
	}
	shards, err := s.shardCount(ctx)
	if err != nil {
		return fmt.Errorf("put due: %w", err)
	}
	return s.putDue(ctx, shards, entries, s.cfg.WriteConcurrency)
}

type partitionKey struct {
	bucket time.Time
	shard  int
}

// putDue groups entries by partition and writes them as unlogged batches,
// limit at a time (negative: all at once). Each batch holds at most
// BatchSize statements. It stays within one partition unless every node
// replicates every partition (batching.go): then consecutive partitions'
// groups share a batch of at most maxCrossBatchBytes.
func (s *Store) putDue(ctx context.Context, shards int, entries []store.DueEntry, limit int) error {
	if len(entries) == 1 {
		e := entries[0]
		p := partitionKey{bucket: store.BucketOf(e.Due), shard: store.ShardOf(e.JobID, shards)}
		if err := s.idempotent(ctx, s.q.insertDue, s.dueArgs(p, e)...).Exec(); err != nil {
			return fmt.Errorf("put due entry %s of job %q (bucket %s shard %d): %w", e.RunID, e.JobID, p.bucket.Format(time.RFC3339), p.shard, err)
		}
		return nil
	}
	type placed struct {
		p partitionKey
		e store.DueEntry
	}
	groups := map[partitionKey][]placed{}
	var order []partitionKey
	for _, e := range entries {
		p := partitionKey{bucket: store.BucketOf(e.Due), shard: store.ShardOf(e.JobID, shards)}
		if _, ok := groups[p]; !ok {
			order = append(order, p)
		}
		groups[p] = append(groups[p], placed{p, e})
	}
	// split cuts one partition's group as dueBatches does.
	split := func(g []placed) iter.Seq[[]placed] {
		return func(yield func([]placed) bool) {
			es := make([]store.DueEntry, len(g))
			for i, x := range g {
				es[i] = x.e
			}
			start := 0
			for chunk := range s.dueBatches(es) {
				if !yield(g[start : start+len(chunk)]) {
					return
				}
				start += len(chunk)
			}
		}
	}
	var batches iter.Seq[[]placed]
	if s.cross {
		ordered := make([][]placed, len(order))
		for i, p := range order {
			ordered[i] = groups[p]
		}
		batches = packGroups(ordered, s.cfg.BatchSize, maxCrossBatchBytes, func(x placed) int { return len(x.e.JobID) + len(x.e.RunID) + len(x.e.Payload) }, split)
	} else {
		batches = func(yield func([]placed) bool) {
			for _, p := range order {
				for b := range split(groups[p]) {
					if !yield(b) {
						return
					}
				}
			}
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(limit)
	for chunk := range batches {
		g.Go(func() error {
			b := s.sess.NewBatch(gocql.UnloggedBatch).WithContext(gctx)
			for _, x := range chunk {
				b.Entries = append(b.Entries, gocql.BatchEntry{Stmt: s.q.insertDue, Args: s.dueArgs(x.p, x.e), Idempotent: true})
			}
			if err := s.sess.ExecuteBatch(b); err != nil {
				first := chunk[0].p
				return fmt.Errorf("put %d due entries (the first into bucket %s shard %d): %w", len(chunk), first.bucket.Format(time.RFC3339), first.shard, err)
			}
			return nil
		})
	}
	return g.Wait()
}

// maxDueBatchBytes bounds the payload bytes of one batch of due entries.
// A single-partition batch is one mutation, exempt from the server's batch
// size threshold but not from its largest mutation (half a commit-log
// segment, 16 MiB by default), and an entry's payload may hold a job's whole
// definition (its snapshot, up to a payload's bound of 256 KiB and more).
const maxDueBatchBytes = 4 << 20

// dueBatches cuts the entries of one partition into batches of at most
// BatchSize statements and maxDueBatchBytes of payload; an entry larger
// than that goes alone.
func (s *Store) dueBatches(entries []store.DueEntry) iter.Seq[[]store.DueEntry] {
	return func(yield func([]store.DueEntry) bool) {
		start, bytes := 0, 0
		for i, e := range entries {
			if i > start && (i-start == s.cfg.BatchSize || bytes+len(e.Payload) > maxDueBatchBytes) {
				if !yield(entries[start:i]) {
					return
				}
				start, bytes = i, 0
			}
			bytes += len(e.Payload)
		}
		if start < len(entries) {
			yield(entries[start:])
		}
	}
}

func (s *Store) dueArgs(p partitionKey, e store.DueEntry) []any {
	return []any{p.bucket, p.shard, ms(e.Due), e.JobID, string(e.Kind), e.RunID, e.Attempt, e.Revision, e.Payload}
}

// ListBucket implements store.Schedule, reading BucketPageSize rows per
// round trip. Each page is decoded whole and its response released before
// the first of its entries is yielded, and the next page is asked for only
// when the caller takes past the last: a caller that stops taking (the
// dispatcher's read of a shard that holds its share of entries) then holds
// one decoded page, not the driver's frame of it and a frame prefetched
// behind it, for as long as it waits.
func (s *Store) ListBucket(ctx context.Context, bucket time.Time, shard int) iter.Seq2[store.DueEntry, error] {
	return func(yield func(store.DueEntry, error) bool) {
		if err := s.checkShard(ctx, shard); err != nil {
			yield(store.DueEntry{}, fmt.Errorf("list bucket: %w", err))
			return
		}
		b := store.BucketOf(bucket)
		var state []byte
		for {
			page, next, err := s.bucketPage(ctx, b, shard, state)
			if err != nil {
				yield(store.DueEntry{}, fmt.Errorf("list bucket %s shard %d: %w", b.Format(time.RFC3339), shard, err))
				return
			}
			for _, e := range page {
				if !yield(e, nil) {
					return
				}
			}
			if len(next) == 0 {
				return
			}
			state = next
		}
	}
}

// bucketPage reads the page of a bucket's partition that starts at state
// (nil: the first), decoded, and the state of the page after it (empty:
// none).
func (s *Store) bucketPage(ctx context.Context, b time.Time, shard int, state []byte) ([]store.DueEntry, []byte, error) {
	it := s.idempotent(ctx, s.q.selectBucket, b, shard).PageSize(s.cfg.BucketPageSize).PageState(state).Iter()
	// The state is copied: it points into the response's frame, which it
	// would otherwise keep in memory.
	next := bytes.Clone(it.PageState())
	page := make([]store.DueEntry, 0, it.NumRows())
	sc := it.Scanner()
	for sc.Next() {
		var e store.DueEntry
		var kind string
		if err := sc.Scan(&e.Due, &e.JobID, &kind, &e.RunID, &e.Attempt, &e.Revision, &e.Payload); err != nil {
			_ = it.Close()
			return nil, nil, err
		}
		decoded(&e, kind)
		page = append(page, e)
	}
	if err := sc.Err(); err != nil {
		return nil, nil, err
	}
	return page, next, nil
}

// decoded completes an entry scanned from a row: the due time in UTC, the
// kind from its column, and no payload rather than an empty one.
func decoded(e *store.DueEntry, kind string) {
	e.Due = e.Due.UTC()
	e.Kind = store.Kind(kind)
	if len(e.Payload) == 0 {
		e.Payload = nil
	}
}

// DeleteDue implements store.Schedule.
func (s *Store) DeleteDue(ctx context.Context, keys ...store.DueKey) error {
	for i, k := range keys {
		if err := k.Validate(); err != nil {
			return fmt.Errorf("delete due entry %d: %w", i, err)
		}
	}
	shards, err := s.shardCount(ctx)
	if err != nil {
		return fmt.Errorf("delete due: %w", err)
	}
	return s.deleteDue(ctx, shards, keys)
}

func (s *Store) deleteDue(ctx context.Context, shards int, keys []store.DueKey) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(s.cfg.WriteConcurrency)
	for _, k := range keys {
		g.Go(func() error {
			p := partitionKey{bucket: store.BucketOf(k.Due), shard: store.ShardOf(k.JobID, shards)}
			err := s.idempotent(gctx, s.q.deleteDue, p.bucket, p.shard, ms(k.Due), k.JobID, string(k.Kind), k.RunID).Exec()
			if err != nil {
				return fmt.Errorf("delete due entry %s of job %q: %w", k.RunID, k.JobID, err)
			}
			return nil
		})
	}
	return g.Wait()
}

// DeleteBucket implements store.Schedule with one partition tombstone.
func (s *Store) DeleteBucket(ctx context.Context, bucket time.Time, shard int) error {
	if err := s.checkShard(ctx, shard); err != nil {
		return fmt.Errorf("delete bucket: %w", err)
	}
	b := store.BucketOf(bucket)
	if err := s.idempotent(ctx, s.q.deleteBucket, b, shard).Exec(); err != nil {
		return fmt.Errorf("delete bucket %s shard %d: %w", b.Format(time.RFC3339), shard, err)
	}
	return nil
}
