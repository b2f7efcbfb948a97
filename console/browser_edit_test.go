package console_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/chromedp/chromedp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/apiserver"
	"github.com/sundialhq/sundial/embedded"
)

// devAdminToken is the admin of team dev: the role that applies and
// deletes its definitions.
const devAdminToken = "console-test-dev-admin"

// editEnv is the console of `sundial dev` behind a proxy's sub-path, with
// a browser, for the tests of the editor, the heat-map and the team pages.
type editEnv struct {
	b *browser
	p *embedded.Pipeline
}

// as is the options of an API client holding token.
func as(token string) []connect.ClientOption {
	return []connect.ClientOption{connect.WithInterceptors(apiserver.BearerToken(token))}
}

// newEditEnv starts the embedded pipeline with its samples, a proxy that
// mounts the API under /sundial/, and Chromium.
func newEditEnv(t *testing.T) *editEnv {
	t.Helper()
	exe := chromium(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	t.Cleanup(cancel)
	p, err := embedded.New(embedded.Config{Registerer: prometheus.NewRegistry(), Logger: slog.New(slog.DiscardHandler),
		Handlers: embedded.SampleHandlers(), APIAddr: "127.0.0.1:0",
		APITokens: []string{"*:admin:" + adminToken, "dev:admin:" + devAdminToken, "dev:operator:" + operatorToken, "dev:viewer:" + viewerToken}})
	require.NoError(t, err)
	require.NoError(t, p.Start(ctx))
	t.Cleanup(p.Stop)
	_, err = p.LoadSamples(ctx)
	require.NoError(t, err)

	upstream, err := url.Parse(p.APIURL())
	require.NoError(t, err)
	proxy := httptest.NewServer(http.StripPrefix("/sundial", httputil.NewSingleHostReverseProxy(upstream)))
	t.Cleanup(proxy.Close)

	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true), chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true))...)
	t.Cleanup(cancelAlloc)
	root, cancelRoot := chromedp.NewContext(alloc)
	t.Cleanup(cancelRoot)
	require.NoError(t, chromedp.Do(root), "start Chromium at %s", exe)
	return &editEnv{b: &browser{t: t, ctx: root, base: proxy.URL + "/sundial/console/"}, p: p}
}

// texts is the text of every element matching css that is not hidden.
func texts(t *testing.T, ctx context.Context, css string) []string {
	t.Helper()
	return eval[[]string](t, ctx, `[...document.querySelectorAll(`+"`"+css+"`"+`)].filter((e) => !e.closest('[hidden]')).map((e) => e.textContent.trim())`)
}

// TestConsoleEditsInABrowser drives the console's role-aware pages, the
// job editor, the heat-map and the team pages in a real headless Chromium
// against the embedded pipeline of `sundial dev`.
func TestConsoleEditsInABrowser(t *testing.T) {
	env := newEditEnv(t)
	b := env.b

	t.Run("each role sees the buttons its role may use, as WhoAmI says", func(t *testing.T) {
		cases := []struct {
			token, who string
			buttons    []string
		}{
			{viewerToken, "viewer of team dev", nil},
			{operatorToken, "operator of team dev", []string{"Trigger now", "Pause"}},
			{devAdminToken, "admin of team dev", []string{"Trigger now", "Pause", "Delete…"}},
			{adminToken, "cluster admin", []string{"Trigger now", "Pause", "Delete…"}},
		}
		for _, c := range cases {
			tab := b.tab(t, c.token)
			who, err := chromedp.Run(tab, chromedp.Text(chromedp.ID("whoami")))
			require.NoError(t, err)
			assert.Equal(t, c.who, who)
			b.open(t, tab, "#/jobs/dev.hello-cron", "job")
			got := texts(t, tab, `#actions [data-write]`)
			assert.ElementsMatch(t, c.buttons, got, "write buttons of %s", c.who)
		}
	})
}
