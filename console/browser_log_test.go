package console_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	"github.com/sundialhq/sundial/proto/sundial/api/v1/apiv1connect"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/runner/target"
)

// chattyHandler names the in-process handler that logs a numbered line
// ("chatty line N") every tick until its gate opens.
const chattyHandler = "test.chatty"

type chatty struct{ gate *gate }

func newChatty() *chatty { return &chatty{gate: &gate{ch: make(chan struct{})}} }

func (c *chatty) Handle(ctx context.Context, run *sundialv1.Run) error {
	return c.HandleAttempt(ctx, target.Request{Run: run})
}

func (c *chatty) HandleAttempt(ctx context.Context, req target.Request) error {
	out := req.Output
	if out == nil {
		out = &target.Output{}
	}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for i := 1; ; i++ {
		out.Append(fmt.Sprintf("chatty line %d", i))
		select {
		case <-c.gate.ch:
			out.Append("chatty done")
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// lastChattyLine is the number of the newest "chatty line N" in lines, 0
// with none.
func lastChattyLine(lines []string) int {
	n := 0
	for _, l := range lines {
		if v, ok := strings.CutPrefix(l, "chatty line "); ok {
			if i, err := strconv.Atoi(v); err == nil {
				n = max(n, i)
			}
		}
	}
	return n
}

// TestConsoleLiveLogInABrowser opens the page of a running run in a real
// headless Chromium: the run's log lines show while it runs, pausing the
// live log stops its requests (the lines the run logs meanwhile are not
// read), resuming reads on from where it stopped, and the final log shows
// once the run has ended.
func TestConsoleLiveLogInABrowser(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	c := startOpsConsole(t, ctx)
	b := c.b

	jobs := apiv1connect.NewJobServiceClient(http.DefaultClient, c.p.APIURL(), as(adminToken)...)
	applied, err := jobs.ApplyJob(ctx, connect.NewRequest(&apiv1.ApplyJobRequest{Spec: &sundialv1.JobSpec{
		Id: "dev.chatty", OwnerTeam: "dev", Description: "logs a line every 200 ms until the test lets it end",
		Schedule: &sundialv1.Schedule{TimeZone: "UTC", Kind: &sundialv1.Schedule_At{At: &sundialv1.At{Time: timestamppb.New(time.Now().Add(24 * time.Hour).Truncate(time.Second))}}},
		Target:   &sundialv1.Target{Kind: &sundialv1.Target_Handler{Handler: &sundialv1.HandlerTarget{Name: chattyHandler}}},
		Timeout:  durationpb.New(10 * time.Minute),
	}}))
	require.NoError(t, err)
	require.True(t, applied.Msg.GetAccepted(), "apply dev.chatty: %v", applied.Msg)
	ops := apiv1connect.NewOperatorServiceClient(http.DefaultClient, c.p.APIURL(), as(operatorToken)...)
	var runID string
	require.Eventually(t, func() bool {
		resp, err := ops.TriggerJob(ctx, connect.NewRequest(&apiv1.TriggerJobRequest{JobId: "dev.chatty", IdempotencyKey: "live-log"}))
		if err != nil {
			return false // the definition is not loaded yet
		}
		runID = resp.Msg.GetRunId()
		return true
	}, 3*time.Minute, 250*time.Millisecond, "trigger dev.chatty")

	// A viewer may read the run's log. Every request the page sends to
	// TailRunLog is counted.
	tab := b.tab(t, viewerToken)
	eval[bool](t, tab, `(() => { window.tails = 0; const f = window.fetch;
		window.fetch = (...a) => { if (String(a[0]).includes('TailRunLog')) window.tails++; return f.apply(window, a); }; return true; })()`)
	eval[bool](t, tab, fmt.Sprintf(`(() => { location.hash = '#/runs/%s'; return true; })()`, runID))
	eventually(t, tab, `document.getElementById('log') !== null && document.getElementById('log').dataset.live === 'on'`, "the live log did not open")
	eventually(t, tab, `/chatty line 3\b/.test(document.getElementById('live-log').textContent)`, "the running run's lines do not show")
	assert.False(t, eval[bool](t, tab, `/chatty done/.test(document.getElementById('live-log').textContent)`), "the run is still running")
	screenshot(t, tab, "run-live-log")

	// Pause: the stream closes and nothing more is read.
	require.NoError(t, chromedp.Do(tab, chromedp.Click(chromedp.ID("log-toggle"))))
	eventually(t, tab, `document.getElementById('log').dataset.live === 'paused'`, "the live log did not pause")
	assert.Equal(t, "true", eval[string](t, tab, `document.getElementById('log-toggle').getAttribute('aria-pressed')`))
	requests := eval[int](t, tab, `window.tails`)
	shownText := eval[string](t, tab, `document.getElementById('live-log').textContent`)
	shown := lastChattyLine(strings.Split(shownText, "\n"))
	// Wait, on the API, until the run has logged five lines more than the
	// page shows: a live log would have shown them.
	runs := c.runs(viewerToken)
	require.Eventually(t, func() bool {
		tctx, tcancel := context.WithTimeout(ctx, 5*time.Second)
		defer tcancel()
		stream, err := runs.TailRunLog(tctx, connect.NewRequest(&apiv1.TailRunLogRequest{RunId: runID}))
		if err != nil {
			return false
		}
		defer func() { _ = stream.Close() }()
		var lines []string
		for stream.Receive() {
			lines = append(lines, stream.Msg().GetLines()...)
			if lastChattyLine(lines) >= shown+5 {
				return true
			}
		}
		return false
	}, 3*time.Minute, 500*time.Millisecond, "the run logged no more lines after the pause")
	assert.Equal(t, shownText, eval[string](t, tab, `document.getElementById('live-log').textContent`), "lines arrived while paused")
	assert.Equal(t, requests, eval[int](t, tab, `window.tails`), "the paused page called TailRunLog")

	// Resume: the log reads on after the last line shown, none twice.
	require.NoError(t, chromedp.Do(tab, chromedp.Click(chromedp.ID("log-toggle"))))
	eventually(t, tab, fmt.Sprintf(`/chatty line %d\b/.test(document.getElementById('live-log').textContent)`, shown+5), "no line after resuming")
	text := eval[string](t, tab, `document.getElementById('live-log').textContent`)
	assert.Equal(t, 1, strings.Count(text, fmt.Sprintf("chatty line %d\n", shown)), "a line shows twice after resuming")

	// The end: the final log and the run's final state show.
	c.chatty.gate.open()
	eventually(t, tab, `document.getElementById('log').dataset.live === 'ended'`, "the live log did not end with the run")
	assert.Contains(t, eval[string](t, tab, `document.getElementById('live-log').textContent`), "chatty done")
	eventually(t, tab, `document.getElementById('results').textContent.includes('succeeded')`, "the run's final state does not show")
}
