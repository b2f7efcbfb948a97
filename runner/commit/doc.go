// Package commit computes, per Kafka partition, the offset a consumer may
// commit when records finish out of order: the contiguous watermark.
//
// Records of a partition are handed to workers in offset order but finish in
// any order. The committed offset says "every record below this one is
// finished", so it may only move to one past the highest offset o such that
// o and every tracked offset below it have finished. A record that is still
// running pins the watermark at its own offset: a consumer that restarts from
// the committed offset re-reads it and everything after it, so an unfinished
// record is never skipped, while finished records behind it may be read
// again (at-least-once; the runner's dedupe mark absorbs those).
//
// A Partition is pure bookkeeping, not safe for concurrent use: the runner
// guards it with its own lock. Its memory is one entry per tracked offset
// between the watermark and the highest offset added; Pending reports that
// count so the caller can stop fetching a partition whose watermark is pinned
// by a long record.
package commit
