package grafana_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/deploy/grafana"
)

// The committed JSON files are what the code generates: run `make dashboards`
// after changing a dashboard.
func TestDashboardFilesAreGenerated(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("dashboards/*.json")
	require.NoError(t, err)
	all := grafana.All()
	assert.Len(t, files, len(all), "dashboards/ holds exactly the generated dashboards")
	for name, d := range all {
		want, err := d.JSON()
		require.NoError(t, err)
		have, err := os.ReadFile(filepath.Join("dashboards", name))
		require.NoError(t, err, "dashboard %s is not generated: run make dashboards", name)
		assert.Equal(t, string(want), string(have), "dashboards/%s is stale: run make dashboards", name)
	}
}

func TestDashboardsAreWellFormed(t *testing.T) {
	t.Parallel()
	uids := map[string]bool{}
	for name, d := range grafana.All() {
		t.Run(name, func(t *testing.T) {
			assert.False(t, uids[d.UID], "uid %s used twice", d.UID)
			uids[d.UID] = true
			assert.LessOrEqual(t, len(d.UID), 40, "Grafana limits uids to 40 characters")
			assert.NotEmpty(t, d.Queries())
			ids := map[int]bool{}
			type cell struct{ x, y int }
			taken := map[cell]string{}
			for _, p := range d.Panels {
				assert.False(t, ids[p.ID], "panel id %d used twice", p.ID)
				ids[p.ID] = true
				assert.NotEmpty(t, p.Title)
				assert.LessOrEqual(t, p.GridPos.X+p.GridPos.W, 24, "panel %q overflows the grid", p.Title)
				for x := p.GridPos.X; x < p.GridPos.X+p.GridPos.W; x++ {
					for y := p.GridPos.Y; y < p.GridPos.Y+p.GridPos.H; y++ {
						other, ok := taken[cell{x, y}]
						require.False(t, ok, "panels %q and %q overlap", p.Title, other)
						taken[cell{x, y}] = p.Title
					}
				}
				for _, tg := range p.Targets {
					assert.NotEmpty(t, tg.RefID)
					assert.NotEmpty(t, tg.Expr)
				}
			}
			b, err := d.JSON()
			require.NoError(t, err)
			var generic map[string]any
			require.NoError(t, json.Unmarshal(b, &generic))
		})
	}
}
