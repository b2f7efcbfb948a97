// Package checkpoint keeps the checkpoints of runs and carries the
// checkpoint session of an executing attempt to its handler.
//
// A checkpoint is a small blob (at most MaxSize bytes) a handler saves to
// resume from later. One row per run keeps the latest checkpoint, its
// sequence number (1 for the first of the run, growing by one with each
// save across attempts), the attempt that saved it and the fencing token of
// the lease it was saved under.
//
// Invariants:
//   - Fencing: a save is applied only when its fencing token is at least
//     the stored one (a lightweight transaction in the store). Tokens grow
//     with every lease of a job, so an attempt that lost its lease, whose
//     token is older than the one of the attempt that took the run over,
//     cannot overwrite a newer checkpoint: its save fails with ErrStale.
//   - Suspension: a run suspended by an operator keeps its row, marked
//     suspended together with the run as it was delivered, so a resume can
//     dispatch it again under the same run id. The mark is fenced like a
//     save. A resume clears it with a transaction, so of two resumes racing
//     one finds the run suspended.
//   - A Session belongs to one attempt: its saves are serialised, and once
//     a save has reported ErrSuspended every later save reports it too
//     without writing.
package checkpoint
