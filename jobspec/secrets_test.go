package jobspec_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/sundialhq/sundial/jobspec"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

func httpSpec(h *sundialv1.HttpTarget) *sundialv1.JobSpec {
	return &sundialv1.JobSpec{Id: "billing.sync", OwnerTeam: "billing", Target: &sundialv1.Target{Kind: &sundialv1.Target_Http{Http: h}}}
}

func TestIsSecretHeader(t *testing.T) {
	t.Parallel()
	marked := &sundialv1.HttpTarget{SecretHeaders: []string{"X-Tenant"}}
	for _, tc := range []struct {
		name   string
		secret bool
	}{
		{"Authorization", true},
		{"proxy-authorization", true},
		{"Cookie", true},
		{"X-Api-Key", true},
		{"X-Auth-Token", true},
		{"X-Client-Secret", true},
		{"X-Password", true},
		{"x-tenant", true}, // marked, in another case
		{"Content-Type", false},
		{"Accept", false},
		{"X-Request-Source", false},
	} {
		assert.Equal(t, tc.secret, jobspec.IsSecretHeader(marked, tc.name), tc.name)
	}
}

func TestRedactURL(t *testing.T) {
	t.Parallel()
	marked := &sundialv1.HttpTarget{SecretQueryParams: []string{"sig"}}
	for _, tc := range []struct {
		name, in, want string
	}{
		{"a secret-like query parameter loses its value", "https://h.example/p?apikey=abc123&page=2", "https://h.example/p?apikey=<redacted>&page=2"},
		{"a marked parameter loses its value", "https://h.example/p?sig=abc&x=1", "https://h.example/p?sig=<redacted>&x=1"},
		{"every occurrence is redacted", "https://h.example/?token=a&token=b", "https://h.example/?token=<redacted>&token=<redacted>"},
		{"an escaped name is decoded before the check", "https://h.example/?api%5Fkey=abc", "https://h.example/?api%5Fkey=<redacted>"},
		{"a reference is shown as is", "https://h.example/?apikey=${secret:maps}", "https://h.example/?apikey=${secret:maps}"},
		{"the password of the user information", "https://bob:hunter2@h.example/p", "https://bob:%3Credacted%3E@h.example/p"},
		{"a token used as the user name", "https://ghp_abc@h.example/p", "https://%3Credacted%3E@h.example/p"},
		{"a URL without secrets is kept as written", "https://h.example/a%2Fb?q=x+y#f", "https://h.example/a%2Fb?q=x+y#f"},
		{"a URL that does not parse is redacted too", "https://h.example/%zz?password=pw", "https://h.example/%zz?password=<redacted>"},
		{"an empty value stays empty", "https://h.example/?token=", "https://h.example/?token="},
		{"a relative URL of a redirect", "/next?access_token=abc", "/next?access_token=<redacted>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tc.want, jobspec.RedactURL(tc.in, marked))
		})
	}
}

func TestSecretRefs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in string
		want     []string
		err      string
	}{
		{"none", "Bearer abc", nil, ""},
		{"one", "Bearer ${secret:api-token}", []string{"api-token"}, ""},
		{"two", "${secret:a.b}:${secret:C_1}", []string{"a.b", "C_1"}, ""},
		{"unclosed", "${secret:abc", nil, "malformed secret reference"},
		{"empty name", "${secret:}", nil, "malformed secret reference"},
		{"a path", "${secret:../other-team/x}", nil, "malformed secret reference"},
		{"a slash", "${secret:a/b}", nil, "malformed secret reference"},
		{"a dot first", "${secret:..data}", nil, "malformed secret reference"},
		{"a dollar alone is text", "price $5 {x}", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := jobspec.SecretRefs(tc.in)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestRedactSpec(t *testing.T) {
	t.Parallel()
	spec := httpSpec(&sundialv1.HttpTarget{
		Url: "https://h.example/v1?key=K-SECRET&page=1",
		Headers: map[string]string{
			"Authorization": "Bearer B-SECRET",
			"X-Upstream":    "Bearer ${secret:up}",
			"X-Tenant":      "T-SECRET",
			"Content-Type":  "application/json",
		},
		SecretHeaders: []string{"x-tenant"},
	})
	jobspec.Redact(spec)
	h := spec.GetTarget().GetHttp()
	assert.Equal(t, "https://h.example/v1?key=<redacted>&page=1", h.GetUrl())
	assert.Equal(t, map[string]string{
		"Authorization": jobspec.Redacted,
		"X-Upstream":    "Bearer ${secret:up}",
		"X-Tenant":      jobspec.Redacted,
		"Content-Type":  "application/json",
	}, h.GetHeaders())
}

func TestRedactReachesInlineJobsAndRuns(t *testing.T) {
	t.Parallel()
	secretTarget := func() *sundialv1.Target {
		return &sundialv1.Target{Kind: &sundialv1.Target_Http{Http: &sundialv1.HttpTarget{
			Url: "https://h.example/", Headers: map[string]string{"Authorization": "Bearer S"},
		}}}
	}
	dag := &sundialv1.DagSpec{Id: "billing.flow", Nodes: []*sundialv1.DagNode{
		{Id: "a", Job: &sundialv1.DagNode_Inline{Inline: &sundialv1.JobSpec{Target: secretTarget()}}},
		{Id: "b", Job: &sundialv1.DagNode_JobId{JobId: "billing.x"}},
	}}
	dead := &sundialv1.DeadLetter{Run: &sundialv1.Run{RunId: "r", Target: secretTarget()}}
	for _, m := range []proto.Message{dag, dead} {
		jobspec.Redact(m)
	}
	assert.Equal(t, jobspec.Redacted, dag.GetNodes()[0].GetInline().GetTarget().GetHttp().GetHeaders()["Authorization"])
	assert.Equal(t, jobspec.Redacted, dead.GetRun().GetTarget().GetHttp().GetHeaders()["Authorization"])
}

func TestRedactPair(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name                  string
		before, after         *sundialv1.HttpTarget
		wantBefore, wantAfter string // the Authorization header
		wantBURL, wantAURL    string
	}{
		{
			name:       "an unchanged secret reads the same on both sides",
			before:     &sundialv1.HttpTarget{Url: "https://h/?apikey=A", Headers: map[string]string{"Authorization": "X"}},
			after:      &sundialv1.HttpTarget{Url: "https://h/?apikey=A", Headers: map[string]string{"Authorization": "X"}},
			wantBefore: jobspec.Redacted, wantAfter: jobspec.Redacted,
			wantBURL: "https://h/?apikey=<redacted>", wantAURL: "https://h/?apikey=<redacted>",
		},
		{
			name:       "a changed secret says that it changed and nothing else",
			before:     &sundialv1.HttpTarget{Url: "https://h/?apikey=A", Headers: map[string]string{"Authorization": "X"}},
			after:      &sundialv1.HttpTarget{Url: "https://h/?apikey=B", Headers: map[string]string{"authorization": "Y"}},
			wantBefore: jobspec.Redacted, wantAfter: jobspec.RedactedChanged,
			wantBURL: "https://h/?apikey=<redacted>", wantAURL: "https://h/?apikey=<redacted changed>",
		},
		{
			name:       "a header marked secret on one side only is secret on both",
			before:     &sundialv1.HttpTarget{Headers: map[string]string{"Authorization": "X", "X-Tenant": "t1"}, SecretHeaders: []string{"X-Tenant"}},
			after:      &sundialv1.HttpTarget{Headers: map[string]string{"Authorization": "X", "X-Tenant": "t1"}},
			wantBefore: jobspec.Redacted, wantAfter: jobspec.Redacted,
		},
		{
			name:       "a secret added reads redacted",
			before:     &sundialv1.HttpTarget{},
			after:      &sundialv1.HttpTarget{Headers: map[string]string{"Authorization": "Y"}},
			wantBefore: "", wantAfter: jobspec.Redacted,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b, a := httpSpec(tc.before), httpSpec(tc.after)
			jobspec.RedactPair(b, a)
			bh, ah := b.GetTarget().GetHttp(), a.GetTarget().GetHttp()
			assert.Equal(t, tc.wantBefore, bh.GetHeaders()["Authorization"])
			got := ah.GetHeaders()["Authorization"]
			if got == "" {
				got = ah.GetHeaders()["authorization"]
			}
			assert.Equal(t, tc.wantAfter, got)
			assert.Equal(t, tc.wantBURL, bh.GetUrl())
			assert.Equal(t, tc.wantAURL, ah.GetUrl())
			if x := bh.GetHeaders()["X-Tenant"]; x != "" {
				assert.Equal(t, jobspec.Redacted, x)
				assert.Equal(t, jobspec.Redacted, ah.GetHeaders()["X-Tenant"])
			}
		})
	}
}

func TestKeepRedacted(t *testing.T) {
	t.Parallel()
	stored := httpSpec(&sundialv1.HttpTarget{
		Url:     "https://h.example/v1?apikey=K1&apikey=K2&page=1",
		Headers: map[string]string{"Authorization": "Bearer B", "X-Tenant": "T"},
	})
	for _, tc := range []struct {
		name     string
		spec     *sundialv1.HttpTarget
		stored   *sundialv1.JobSpec
		want     *sundialv1.HttpTarget
		wantErrs []string
	}{
		{
			name:   "redacted values take the stored ones",
			spec:   &sundialv1.HttpTarget{Url: "https://h.example/v2?apikey=<redacted>&apikey=%3Credacted%3E&page=2", Headers: map[string]string{"authorization": "<redacted>", "X-Tenant": "T2"}},
			stored: stored,
			want:   &sundialv1.HttpTarget{Url: "https://h.example/v2?apikey=K1&apikey=K2&page=2", Headers: map[string]string{"authorization": "Bearer B", "X-Tenant": "T2"}},
		},
		{
			name:     "a new job has no stored value",
			spec:     &sundialv1.HttpTarget{Url: "https://h.example/?apikey=<redacted>", Headers: map[string]string{"Authorization": "<redacted>"}},
			wantErrs: []string{`target.http.headers["Authorization"]: "<redacted>" stands for the stored value, and job "billing.sync" has none`, `target.http.url (query parameter "apikey"): "<redacted>" stands for the stored value`},
		},
		{
			name:     "a header the stored job lacks",
			spec:     &sundialv1.HttpTarget{Url: "https://h.example/", Headers: map[string]string{"Cookie": "<redacted>"}},
			stored:   stored,
			wantErrs: []string{`target.http.headers["Cookie"]: "<redacted>" stands for the stored value`},
		},
		{
			name:     "another host does not get the stored secret",
			spec:     &sundialv1.HttpTarget{Url: "https://attacker.example/v1", Headers: map[string]string{"Authorization": "<redacted>"}},
			stored:   stored,
			wantErrs: []string{`target.http.headers["Authorization"]: "<redacted>" keeps the stored value only while the URL's scheme and host stay https://h.example`},
		},
		{
			name:   "nothing redacted, nothing to do",
			spec:   &sundialv1.HttpTarget{Url: "https://other.example/", Headers: map[string]string{"Authorization": "Bearer new"}},
			stored: stored,
			want:   &sundialv1.HttpTarget{Url: "https://other.example/", Headers: map[string]string{"Authorization": "Bearer new"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			spec := httpSpec(tc.spec)
			errs := jobspec.KeepRedacted(spec, tc.stored)
			var got []string
			for _, e := range errs {
				got = append(got, e.Error())
			}
			require.Len(t, got, len(tc.wantErrs), "%q", got)
			for i, w := range tc.wantErrs {
				assert.True(t, strings.HasPrefix(got[i], w), "got %q, want prefix %q", got[i], w)
			}
			if tc.want != nil {
				assert.True(t, proto.Equal(tc.want, spec.GetTarget().GetHttp()), "got %v", spec.GetTarget().GetHttp())
			}
		})
	}
}

func TestKeepRedactedDagPairsNodesByID(t *testing.T) {
	t.Parallel()
	node := func(id, auth string) *sundialv1.DagNode {
		return &sundialv1.DagNode{Id: id, Job: &sundialv1.DagNode_Inline{Inline: &sundialv1.JobSpec{Target: &sundialv1.Target{Kind: &sundialv1.Target_Http{Http: &sundialv1.HttpTarget{
			Url: "https://h.example/" + id, Headers: map[string]string{"Authorization": auth},
		}}}}}}
	}
	stored := &sundialv1.DagSpec{Id: "billing.flow", Nodes: []*sundialv1.DagNode{node("a", "A"), node("b", "B")}}
	spec := &sundialv1.DagSpec{Id: "billing.flow", Nodes: []*sundialv1.DagNode{node("b", jobspec.Redacted), node("a", jobspec.Redacted)}}
	require.Empty(t, jobspec.KeepRedactedDag(spec, stored))
	assert.Equal(t, "B", spec.GetNodes()[0].GetInline().GetTarget().GetHttp().GetHeaders()["Authorization"])
	assert.Equal(t, "A", spec.GetNodes()[1].GetInline().GetTarget().GetHttp().GetHeaders()["Authorization"])
}

func TestValidateSecretReferences(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		h    *sundialv1.HttpTarget
		want []string
	}{
		{"references in headers, path and query", &sundialv1.HttpTarget{
			Url:     "https://h.example/hooks/${secret:hook-path}?apikey=${secret:maps.key}",
			Headers: map[string]string{"Authorization": "Bearer ${secret:api-token}"},
		}, nil},
		{"a malformed reference", &sundialv1.HttpTarget{
			Url:     "https://h.example/",
			Headers: map[string]string{"Authorization": "Bearer ${secret:../x}"},
		}, []string{`target.http.headers["Authorization"]: malformed secret reference`}},
		{"a reference in the host", &sundialv1.HttpTarget{Url: "https://${secret:host}/"}, []string{"target.http.url: cannot parse", "target.http.url: a secret reference may stand in the path and the query only"}},
		{"marks must be names", &sundialv1.HttpTarget{Url: "https://h.example/", SecretHeaders: []string{"bad name"}, SecretQueryParams: []string{""}}, []string{
			`target.http.secret_headers[0]: "bad name" is not a valid name`,
			`target.http.secret_query_params[0]: "" is not a valid name`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got []string
			for _, e := range jobspec.Validate(httpSpec(tc.h)) {
				got = append(got, e.Error())
			}
			require.Len(t, got, len(tc.want), "%q", got)
			for i, w := range tc.want {
				assert.True(t, strings.HasPrefix(got[i], w), "got %q, want prefix %q", got[i], w)
			}
		})
	}
}

func TestValidateRefusesRedactionMarkers(t *testing.T) {
	t.Parallel()
	errs := jobspec.Validate(httpSpec(&sundialv1.HttpTarget{
		Url:     "https://h.example/?apikey=%3Credacted%3E",
		Headers: map[string]string{"Authorization": jobspec.Redacted},
	}))
	var got []string
	for _, e := range errs {
		got = append(got, e.Error())
	}
	assert.Equal(t, []string{
		`target.http.headers["Authorization"]: "<redacted>" stands for a secret the API did not show; apply through the API to keep the stored value, or give the value or a ${secret:NAME} reference`,
		`target.http.url: query parameter "apikey": "<redacted>" stands for a secret the API did not show; apply through the API to keep the stored value, or give the value or a ${secret:NAME} reference`,
	}, got)
}
