package leasing

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Lease is a held concurrency slot of a job, taken for one run.
type Lease struct {
	JobID string
	RunID string
	// Token is the fencing token: it strictly increases with every acquire
	// of the job's slots, so a downstream that remembers the highest token it
	// has seen can refuse a write from an older holder.
	Token int64
	// AcquiredAt is when the call that acquired or last renewed the lease
	// started, on the holder's clock (Config.Now). Trust is measured from the
	// start of the call, never from its reply.
	AcquiredAt time.Time
	// TTL is how long the server keeps the lease after that call.
	TTL time.Duration
	// Margin is subtracted from TTL by TrustedUntil.
	Margin time.Duration
	// Flagged says, for each of the request's Flags in order, whether the
	// key existed when the lease was taken (read in the same script, so no
	// write fell in between).
	Flagged []bool
}

// TrustedUntil is the instant after which the holder must assume the lease is
// lost: AcquiredAt + TTL - Margin. The server expires the lease no earlier
// than TTL after the call reached it, which is after AcquiredAt.
func (l Lease) TrustedUntil() time.Time {
	return l.AcquiredAt.Add(l.TTL - l.Margin)
}

func (l Lease) String() string {
	return fmt.Sprintf("lease %s token %d", l.RunID, l.Token)
}

// Request asks for a lease on one run of a job.
type Request struct {
	JobID string
	RunID string
	// Limit is the job's concurrency limit: how many of its runs may hold a
	// slot at once. Zero means 1.
	Limit int
	// Flags optionally name keys whose existence the acquire reports in
	// Lease.Flagged, read atomically with taking the lease: the caller's
	// markers for the run (the runner's cancel and suspend markers), at no
	// extra round trip. Each must hold the job's hash tag "{JobID}", so
	// that it lives in the same cluster slot as the lease's keys.
	Flags []string
}

func (r Request) limit() int {
	if r.Limit == 0 {
		return 1
	}
	return r.Limit
}

func (r Request) validate() error {
	var errs []error
	if err := validateJobID(r.JobID); err != nil {
		errs = append(errs, err)
	}
	if r.RunID == "" {
		errs = append(errs, errors.New("field RunID: is empty"))
	}
	if r.Limit < 0 {
		errs = append(errs, fmt.Errorf("field Limit: %d is negative", r.Limit))
	}
	for i, f := range r.Flags {
		if !strings.Contains(f, "{"+r.JobID+"}") {
			errs = append(errs, fmt.Errorf("field Flags[%d]: %q does not hold the job's hash tag {%s}", i, f, r.JobID))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("leasing: bad request for job %q run %q: %w", r.JobID, r.RunID, errors.Join(errs...))
	}
	return nil
}

// validateJobID rejects ids that would not form one cluster hash tag: an
// empty tag hashes the whole key, and braces would end or nest the tag.
func validateJobID(id string) error {
	switch {
	case id == "":
		return errors.New("field JobID: is empty")
	case strings.ContainsAny(id, "{}"):
		return fmt.Errorf("field JobID: %q contains '{' or '}', which cannot be inside a cluster hash tag", id)
	}
	return nil
}

func validateLease(l Lease) error {
	var errs []error
	if err := validateJobID(l.JobID); err != nil {
		errs = append(errs, err)
	}
	if l.RunID == "" {
		errs = append(errs, errors.New("field RunID: is empty"))
	}
	if l.Token <= 0 {
		errs = append(errs, fmt.Errorf("field Token: %d is not a token this store issued", l.Token))
	}
	if len(errs) > 0 {
		return fmt.Errorf("leasing: bad lease for job %q run %q: %w", l.JobID, l.RunID, errors.Join(errs...))
	}
	return nil
}
