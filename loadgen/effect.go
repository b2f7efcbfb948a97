package loadgen

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
)

// Effect is one execution's call of the counting downstream, as a handler
// makes it: the run id is its idempotency key; the job, the attempt and
// the fencing token are what the downstream counts by, as for the runners'
// HTTP attempts.
type Effect struct {
	RunID        string
	JobID        string
	Attempt      uint32
	FencingToken int64
}

// PostEffect applies e at the counting downstream at url (Downstream.URL)
// with client, with the headers a runner's HTTP attempt carries, so that a
// handler's effects are counted as an HTTP target's are. An answer other
// than 2xx is an error naming its status.
func PostEffect(ctx context.Context, client *http.Client, url string, e Effect) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, http.NoBody)
	if err != nil {
		return fmt.Errorf("effect of %s: %w", e.RunID, err)
	}
	req.Header.Set(headerIdempotencyKey, e.RunID)
	req.Header.Set(headerJobID, e.JobID)
	req.Header.Set(headerAttempt, strconv.FormatUint(uint64(e.Attempt), 10))
	if e.FencingToken > 0 {
		req.Header.Set(headerFencingToken, strconv.FormatInt(e.FencingToken, 10))
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("effect of %s: %w", e.RunID, err)
	}
	defer func() { _ = resp.Body.Close() }()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("effect of %s: the downstream answered %s", e.RunID, resp.Status)
	}
	return nil
}
