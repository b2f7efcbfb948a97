package console_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/embedded"
	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// failOnceHandler names the in-process handler whose first call fails and
// every later one succeeds: a DAG node that runs it fails once, and a
// resume reruns it to success.
const failOnceHandler = "test.fail-once"

type failOnce struct{ calls atomic.Int64 }

func (f *failOnce) Handle(context.Context, *sundialv1.Run) error {
	if f.calls.Add(1) == 1 {
		return errors.New("the first call fails, on purpose")
	}
	return nil
}

// inlineNode is a DAG node running handler once (no retry).
func inlineNode(id, handler string, parents ...string) *sundialv1.DagNode {
	return &sundialv1.DagNode{Id: id, Parents: parents, Job: &sundialv1.DagNode_Inline{Inline: &sundialv1.JobSpec{
		Retry:  &sundialv1.RetryPolicy{MaxAttempts: 1},
		Target: &sundialv1.Target{Kind: &sundialv1.Target_Handler{Handler: &sundialv1.HandlerTarget{Name: handler}}},
	}}}
}

// setDagSpec replaces the DAG editor's text with edit applied to it, as
// typing would (an input event).
func setDagSpec(t *testing.T, tab context.Context, edit string) {
	t.Helper()
	eval[bool](t, tab, `(() => { const a = document.getElementById('dag-spec'); const s = JSON.parse(a.value); `+edit+`;
		a.value = JSON.stringify(s, null, 2); return a.dispatchEvent(new Event('input')); })()`)
}

// strayNulls lists the text nodes of the page's main element that read
// "null": a null that the DOM's own append wrote as text.
const strayNulls = `[...document.getElementById('main').childNodes].filter((n) => n.nodeType === Node.TEXT_NODE && n.textContent === 'null').map((n) => n.textContent)`

// accessible fails the test on each serious or critical violation axe-core
// finds on the tab's page.
func accessible(t *testing.T, tab context.Context, page string) {
	t.Helper()
	axe, err := os.ReadFile(filepath.Join("testdata", "axe.min.js"))
	require.NoError(t, err)
	for _, v := range scanAccessibility(t, tab, string(axe)) {
		for _, n := range v.Nodes {
			t.Errorf("%s: %s (%s, %s) at %v: %s", page, v.ID, v.Impact, v.Help, n.Target, n.HTML)
		}
	}
}

// TestConsoleDagPlanAndResumeInABrowser drives the DAG editor's Plan and
// Apply, and a DAG run's Resume, in a real headless Chromium against
// `sundial dev`'s pipeline.
func TestConsoleDagPlanAndResumeInABrowser(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	c := startOpsConsole(t, ctx)
	b := c.b

	t.Run("a DAG plan shows the diff, then Apply applies that draft", func(t *testing.T) {
		const id = "dev.plan-dag"
		require.NoError(t, c.p.ApplyDag(ctx, &sundialv1.DagSpec{Id: id, OwnerTeam: "dev", Description: "planned in the console",
			Schedule: &sundialv1.Schedule{TimeZone: "UTC", Kind: &sundialv1.Schedule_Cron{Cron: &sundialv1.Cron{Expression: "0 0 3 * * *"}}},
			Nodes:    []*sundialv1.DagNode{inlineNode("a", embedded.HandlerHello), inlineNode("b", embedded.HandlerHello, "a")}}))
		nodes := func() int {
			d, err := c.dags(viewerToken).GetDag(ctx, connect.NewRequest(&apiv1.GetDagRequest{Id: id}))
			require.NoError(t, err)
			return len(d.Msg.GetDag().GetSpec().GetNodes())
		}

		viewer := b.tab(t, viewerToken)
		b.open(t, viewer, "#/dagedit/"+id, "dagedit")
		assert.True(t, eval[bool](t, viewer, `document.getElementById('dag-plan') === null && document.getElementById('dag-apply') === null`),
			"a viewer gets neither Plan nor Apply")
		assert.Empty(t, eval[[]string](t, viewer, strayNulls), "the page writes no null")
		b.open(t, viewer, "#/dags", "dags")
		assert.Empty(t, eval[[]string](t, viewer, strayNulls), "the DAG list writes no null")
		operator := b.tab(t, operatorToken)
		b.open(t, operator, "#/dagedit/"+id, "dagedit")
		assert.True(t, eval[bool](t, operator, `document.getElementById('dag-plan') !== null && document.getElementById('dag-apply') === null`),
			"an operator may plan, not apply")

		tab := b.tab(t, devAdminToken)
		b.open(t, tab, "#/dagedit/"+id, "dagedit")
		eventually(t, tab, `document.querySelectorAll('#dag-graph g.node').length === 2`, "the DAG's graph is not drawn")
		assert.True(t, eval[bool](t, tab, `document.getElementById('dag-apply').disabled`), "Apply waits for a plan")
		setDagSpec(t, tab, `s.nodes.push({id: 'c', parents: ['b'], inline: {target: {handler: {name: '`+embedded.HandlerHello+`'}}}})`)
		eval[bool](t, tab, `(document.getElementById('dag-plan').click(), true)`)
		eventually(t, tab, `!!document.querySelector('#plan-nodes table')`, "the plan shows no node diff")
		assert.Equal(t, [][]string{{"c", "added"}}, eval[[][]string](t, tab,
			`[...document.querySelectorAll('#plan-nodes tbody tr')].map((tr) => [...tr.cells].slice(0, 2).map((td) => td.textContent))`))
		assert.Equal(t, [][]string{{"b", "c", "added"}}, eval[[][]string](t, tab,
			`[...document.querySelectorAll('#plan-edges tbody tr')].map((tr) => [...tr.cells].map((td) => td.textContent))`))
		assert.Equal(t, 5, eval[int](t, tab, `document.querySelectorAll('#plan-fires tbody tr').length`), "the next five fires")
		accessible(t, tab, "#/dagedit with its plan")
		screenshot(t, tab, "dag-plan")
		assert.False(t, eval[bool](t, tab, `document.getElementById('dag-apply').disabled`), "a clean plan offers Apply")
		assert.Empty(t, eval[[]string](t, tab, strayNulls), "the page writes no null")
		assert.Equal(t, 2, nodes(), "a plan applies nothing")

		// A draft edited after its plan must be planned again.
		setDagSpec(t, tab, `s.description = 'planned twice'`)
		assert.True(t, eval[bool](t, tab, `document.getElementById('dag-apply').disabled`), "Apply is for the draft planned")
		eval[bool](t, tab, `(document.getElementById('dag-plan').click(), true)`)
		eventually(t, tab, `!document.getElementById('dag-apply').disabled`, "the second plan does not offer Apply")
		eval[bool](t, tab, `(document.getElementById('dag-apply').click(), true)`)
		eventually(t, tab, `!!document.getElementById('dag-applied')`, "the DAG was not applied")
		assert.Equal(t, 3, nodes(), "Apply applied the draft planned")

		// Someone else changes the DAG: the page's revision is stale now.
		require.NoError(t, c.p.ApplyDag(ctx, &sundialv1.DagSpec{Id: id, OwnerTeam: "dev", Description: "changed meanwhile",
			Nodes: []*sundialv1.DagNode{inlineNode("a", embedded.HandlerHello)}}))
		setDagSpec(t, tab, `s.description = 'planned thrice'`)
		eval[bool](t, tab, `(document.getElementById('dag-plan').click(), true)`)
		eventually(t, tab, `document.getElementById('action-status').textContent.includes('expected_revision')`,
			"a plan of a definition changed meanwhile is not refused")
		assert.True(t, eval[bool](t, tab, `document.getElementById('dag-apply').disabled`))
		assert.Equal(t, 1, nodes(), "the other change stands")
	})

	t.Run("a failed DAG run resumed from its page finishes", func(t *testing.T) {
		const id = "dev.resume-dag"
		require.NoError(t, c.p.ApplyDag(ctx, &sundialv1.DagSpec{Id: id, OwnerTeam: "dev", Description: "fails once, then resumed",
			Schedule: &sundialv1.Schedule{TimeZone: "UTC", Kind: &sundialv1.Schedule_Immediate{Immediate: &sundialv1.Immediate{}}},
			Nodes:    []*sundialv1.DagNode{inlineNode("flaky", failOnceHandler), inlineNode("after", embedded.HandlerHello, "flaky")}}))
		dags := c.dags(viewerToken)
		var run string
		require.Eventually(t, func() bool {
			resp, err := dags.ListDagRuns(ctx, connect.NewRequest(&apiv1.ListDagRunsRequest{DagId: id, Limit: 5}))
			if err != nil || len(resp.Msg.GetDagRuns()) == 0 || resp.Msg.GetDagRuns()[0].GetStatus() != "failed" {
				return false
			}
			run = resp.Msg.GetDagRuns()[0].GetDagRunId()
			return true
		}, 3*time.Minute, 250*time.Millisecond, "the run of %s did not fail", id)
		page := "#/dagrun/" + url.PathEscape(run)

		for _, tok := range []string{viewerToken, operatorToken} {
			tab := b.tab(t, tok)
			b.open(t, tab, page, "dagrun")
			eventually(t, tab, `document.getElementById('dag-run-status')?.textContent === 'failed'`, "the failed run is not shown")
			assert.True(t, eval[bool](t, tab, `document.getElementById('dag-resume') === null`), "only an admin is offered Resume (%s)", tok)
		}

		tab := b.tab(t, devAdminToken)
		b.open(t, tab, page, "dagrun")
		eventually(t, tab, `!!document.getElementById('dag-resume')`, "the team's admin is not offered Resume")
		assert.Equal(t, "skipped", eval[string](t, tab, `document.querySelector('#dag-graph g[data-node="after"]').dataset.phase`))
		accessible(t, tab, "#/dagrun with Resume")
		eval[bool](t, tab, `window.sameDocument = true`)
		eval[bool](t, tab, `(document.getElementById('dag-resume').click(), true)`)
		eventually(t, tab, `document.getElementById('dag-resumed')?.textContent === 'Resumed: flaky run again.'`, "the resume is not confirmed")
		eventually(t, tab, `window.sameDocument === true && document.getElementById('dag-run-status').textContent === 'succeeded'`,
			"the resumed run did not finish on the page without a reload")
		assert.True(t, eval[bool](t, tab, `[...document.querySelectorAll('#dag-graph g.node')].every((g) => g.dataset.phase === 'succeeded')`))
		got, err := dags.GetDagRun(ctx, connect.NewRequest(&apiv1.GetDagRunRequest{DagRunId: run}))
		require.NoError(t, err)
		assert.Equal(t, int32(1), got.Msg.GetDagRun().GetResumes())
		assert.Equal(t, fmt.Sprintf("%s/flaky#2", run), got.Msg.GetDagRun().GetNodes()[0].GetRunId(), "the node ran again under a new run id")
	})
}
