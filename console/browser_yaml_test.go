package console_test

import (
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	"github.com/sundialhq/sundial/proto/sundial/api/v1/apiv1connect"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// TestConsoleEditorReadsYAML: a definition typed as YAML in the job editor
// is read by the server, with the rule of `sundial jobs apply -f`: a
// mistake is shown with its field and line, and once fixed the plan shows
// the diff, the form follows what the server read, and Apply applies it.
func TestConsoleEditorReadsYAML(t *testing.T) {
	env := newEditEnv(t)
	b := env.b
	const id = "dev.yaml-made"
	yaml := strings.Join([]string{
		"id: " + id,
		"ownerTeam: dev",
		"description: typed as YAML",
		"schedule:",
		"  cron:",
		`    expression: "0 */3 * * * *"`,
		"  timeZone: Europe/Paris",
		"target:",
		"  handler:",
		"    name: dev.hello",
		"overlapPolicy: sometimes",
		"timeout: 1m30s",
		"",
	}, "\n")

	tab := b.tab(t, devAdminToken)
	b.open(t, tab, "#/edit", "editor")
	waitFor(t, tab, "#e-yaml")
	eval[bool](t, tab, `(() => { document.querySelector('#e-yaml-box summary').click(); return true; })()`)
	require.Equal(t, "TEXTAREA", eval[string](t, tab, `document.getElementById('e-yaml').tagName`), "the YAML is not editable")

	// A value the file format does not know: its field and line.
	setValue(t, tab, "e-yaml", yaml)
	assert.True(t, eval[bool](t, tab, `document.querySelector('#editor-form fieldset').disabled`), "the form waits for the server's reading")
	click(t, tab, "plan-button")
	waitFor(t, tab, "#plan-errors")
	errs := eval[string](t, tab, `document.getElementById('plan-errors').textContent`)
	assert.Contains(t, errs, "overlapPolicy (line 11)")
	assert.Contains(t, errs, `"sometimes" is not one of`)
	assert.True(t, eval[bool](t, tab, `document.getElementById('apply').disabled`), "Apply after a plan with errors")

	// Fixed: the plan, the form as the server read it, and Apply.
	setValue(t, tab, "e-yaml", strings.Replace(yaml, "sometimes", "forbid", 1))
	click(t, tab, "plan-button")
	waitFor(t, tab, "#plan-summary")
	assert.Contains(t, eval[string](t, tab, `document.getElementById('plan-summary').textContent`), "Creates the job")
	diff := texts(t, tab, `#plan-diff tbody tr td:first-child`)
	assert.Subset(t, diff, []string{"id", "schedule", "overlap_policy", "timeout"})
	assert.Equal(t, "OVERLAP_POLICY_FORBID", eval[string](t, tab, `document.getElementById('e-overlap').value`), "the form shows what the server read")
	assert.Equal(t, "90s", eval[string](t, tab, `document.getElementById('e-timeout').value`))
	assert.False(t, eval[bool](t, tab, `document.querySelector('#editor-form fieldset').disabled`), "the form after the server read the YAML")
	assert.False(t, eval[bool](t, tab, `document.getElementById('apply').disabled`), "Apply after a clean plan")
	click(t, tab, "apply")
	waitFor(t, tab, "#apply-result")
	assert.Contains(t, eval[string](t, tab, `document.getElementById('apply-result').textContent`), "Applied: created")

	jobs := apiv1connect.NewJobServiceClient(http.DefaultClient, env.p.APIURL(), as(devAdminToken)...)
	got, err := jobs.GetJob(tab, connect.NewRequest(&apiv1.GetJobRequest{Id: id}))
	require.NoError(t, err)
	spec := got.Msg.GetJob().GetSpec()
	assert.Equal(t, "typed as YAML", spec.GetDescription())
	assert.Equal(t, sundialv1.OverlapPolicy_OVERLAP_POLICY_FORBID, spec.GetOverlapPolicy())
	assert.Equal(t, int64(90), spec.GetTimeout().GetSeconds())
	assert.Equal(t, "Europe/Paris", spec.GetSchedule().GetTimeZone())
}
